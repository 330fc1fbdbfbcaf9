"""Pipeline commands without the ``archive`` extra: one line naming the install command.

The core install has no pyspark/pyarrow (the ``archive`` extra adds pyarrow, ``spark``
both). ``archive``, ``replay`` and ``trace`` then fail with one line and exit 1 before
touching any cluster, while their ``--help`` and usage errors work as for any command.
Here the extra is hidden from a real nsqctl process by an import finder that refuses it
(so the test runs with or without the extra installed); the last test runs the console
script as installed, the extra hidden the same way.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.cli import assert_one_line_error, clean_env, run_cli, run_python

HIDER = """
import sys

class HideSpark:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in ("pyspark", "pyarrow", "py4j"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, HideSpark)
"""

HIDE_SPARK = (
    HIDER
    + """
from nsqctl.cli.app import main
sys.argv = ["nsqctl", *sys.argv[1:]]
main()
"""
)

CALLS = {
    "archive": ["archive", "orders", "--out", "/nonexistent/archive", "--nsqd", "127.0.0.1:1"],
    "replay": ["replay", "/nonexistent/archive", "--to-topic", "t", "--nsqd", "127.0.0.1:1"],
    "trace": ["trace", "123", "--archive", "/nonexistent/archive"],
}


def _without_spark(*args: str) -> subprocess.CompletedProcess[str]:
    return run_python("-c", HIDE_SPARK, *args)


@pytest.mark.parametrize("command", list(CALLS))
def test_pipeline_command_without_the_extra_names_the_install(command: str) -> None:
    line = assert_one_line_error(_without_spark(*CALLS[command]), 1)
    assert f"nsqctl {command} needs the archive extra" in line, line
    assert "pip install 'nsqctl[archive]'" in line, line


@pytest.mark.parametrize("command", list(CALLS))
def test_help_and_usage_errors_work_without_the_extra(command: str) -> None:
    helped = _without_spark(command, "--help")
    assert helped.returncode == 0 and f"Usage: nsqctl {command}" in helped.stdout
    assert_one_line_error(_without_spark(command, "--no-such-option"), 2)


def test_other_commands_do_not_need_the_extra() -> None:
    proc = _without_spark("version", "--client")
    assert proc.returncode == 0 and proc.stdout.startswith("nsqctl "), proc.stderr


def test_core_install_console_script(tmp_path: Path) -> None:
    """The installed console script itself, the extra hidden by a ``sitecustomize`` on
    PYTHONPATH (imported at interpreter start, before the entry point runs): what a core
    install runs, whether or not this environment has the extra."""
    (tmp_path / "sitecustomize.py").write_text(HIDER)
    proc = run_cli(CALLS["archive"], env=clean_env({"PYTHONPATH": str(tmp_path)}))
    line = assert_one_line_error(proc, 1)
    assert "pip install 'nsqctl[archive]'" in line, line
