"""Running the real ``nsqctl`` console script in a subprocess with a clean environment."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from typer.testing import CliRunner


def _console_script() -> str:
    """The ``nsqctl`` installed beside the running Python (the venv under test), else PATH's:
    ``.venv/bin/python -m pytest`` must test that venv's nsqctl even when it is not on PATH."""
    beside = Path(sys.executable).parent / "nsqctl"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("nsqctl") or "nsqctl"


NSQCTL = _console_script()

#: The environment for in-process ``CliRunner`` runs: every NSQCTL_* setting unset (None) and
#: a config path that does not exist, so a developer's own profiles never leak into a test.
RUNNER_ENV: dict[str, str | None] = {
    "NSQCTL_CONFIG": "/nonexistent/nsqctl-test.toml",
    "NSQCTL_LOOKUPD": None,
    "NSQCTL_NSQD": None,
    "NSQCTL_NSQD_HTTP": None,
    "NSQCTL_PROFILE": None,
    "NSQCTL_READ_ONLY": None,
    "NSQCTL_STATE_DIR": None,
}


def clean_env(extra: Mapping[str, str] | None = None, config: Path | None = None) -> dict[str, str]:
    """The test's environment minus every NSQCTL_* setting, with a private config path
    (so a developer's own profiles never leak into a test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSQCTL_")}
    env["NSQCTL_CONFIG"] = str(config or "/nonexistent/nsqctl-test-config.toml")
    env.pop("NO_COLOR", None)
    env["TERM"] = "dumb"
    env.update(extra or {})
    return env


def run_cli(
    args: Sequence[str],
    *,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
    stdout: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """``nsqctl ARGS`` with bytes output; stdin is empty unless ``input`` is given.
    ``stdout``: a file to write standard output to (a regular file, /dev/full) rather
    than a pipe to capture it (then the result's ``stdout`` is None)."""
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(stdout.open("wb")) if stdout is not None else subprocess.PIPE
        return subprocess.run(
            [NSQCTL, *args],
            input=input if input is not None else b"",
            stdout=out,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else clean_env(),
            timeout=timeout,
            check=False,
        )


def run_text(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with the clean environment and no stdin; its text output (60 s at most)."""
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``nsqctl ARGS`` with text output and no stdin (not a TTY: no prompts)."""
    return run_text([NSQCTL, *args])


def run_python(*args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` (this interpreter, e.g. ``-X importtime NSQCTL --help`` or ``-c CODE``)
    like :func:`cli`: text output, no stdin, the clean environment."""
    return run_text([sys.executable, *args])


def pub_process(*args: str) -> subprocess.Popen[bytes]:
    """``nsqctl pub ARGS`` as a process whose stdin the test writes, and may leave open
    (pub then waits for more input), with :func:`clean_env`."""
    return subprocess.Popen(
        [NSQCTL, "pub", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )


def invoke(*args: str, input: str | None = None) -> Any:
    """``nsqctl ARGS`` in-process (Typer's ``CliRunner``) with :data:`RUNNER_ENV`."""
    from nsqctl.cli.app import app

    return CliRunner().invoke(app, list(args), env=RUNNER_ENV, input=input)


def run_main(*args: str) -> subprocess.CompletedProcess[str]:
    """``nsqctl ARGS`` through the console script's own ``main()`` (its one-line errors and
    exit codes) in this process, with :data:`RUNNER_ENV` and no stdin.

    For commands that start Spark: ``spark_session`` is get-or-create, so they use the test
    session's SparkSession (tests/helpers/spark.py) instead of starting a JVM of their own,
    the slowest part of a Spark command. Everything Python writes to stdout and stderr is
    captured; the JVM's own stderr went to its log file when it started."""
    from nsqctl.cli.app import main

    argv = ["nsqctl", *args]
    saved_argv, sys.argv = sys.argv, argv
    try:
        with CliRunner().isolation(input="", env=RUNNER_ENV) as (stdout, stderr, _both):
            try:
                main()
                code = 0
            except SystemExit as exit_:  # as the interpreter ends a process with it
                code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
                if isinstance(exit_.code, str):
                    print(exit_.code, file=sys.stderr)
            sys.stdout.flush()
            sys.stderr.flush()
            out, err = stdout.getvalue().decode(), stderr.getvalue().decode()
    finally:
        sys.argv = saved_argv
    return subprocess.CompletedProcess(argv, code, out, err)


def assert_one_line_error(
    proc: subprocess.CompletedProcess[bytes] | subprocess.CompletedProcess[str], code: int
) -> str:
    """Exit ``code``, stderr exactly one ``nsqctl: error:`` line, no traceback."""
    err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode()
    assert proc.returncode == code, (proc.returncode, err)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("nsqctl: error: "), lines
    return lines[0]
