"""``nsqctl completion SHELL`` prints a script a real shell can load, and the shell then
completes through nsqctl itself (bash driven as a user's shell would be)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nsqctl.cli.gendocs import SHELLS

NSQCTL = Path(sys.executable).parent / "nsqctl"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_the_printed_script_is_the_committed_one(shell: str) -> None:
    out = subprocess.run(
        [str(NSQCTL), "completion", shell], capture_output=True, text=True, check=True
    )
    assert out.stdout == (REPO / "completions" / SHELLS[shell]).read_text()


def test_an_unknown_shell_is_one_line_and_exit_2() -> None:
    out = subprocess.run([str(NSQCTL), "completion", "tcsh"], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1
    assert "tcsh" in out.stderr


def test_bash_completes_commands_after_eval() -> None:
    bash = shutil.which("bash")
    assert bash is not None
    script = (
        f'PATH="{NSQCTL.parent}:$PATH"\n'
        'eval "$(nsqctl completion bash)"\n'
        "COMP_WORDS=(nsqctl ta); COMP_CWORD=1\n"
        "_nsqctl_completion nsqctl\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    out = subprocess.run([bash, "--norc", "-c", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "tail" in out.stdout.split()
