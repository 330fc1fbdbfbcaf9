"""Smoke test of an installed (non-editable) nsqctl, run with the Python of the venv it
was installed into: every command's --help exits 0, the man pages and py.typed are where
a user's tools look for them, and nsqctl owns the only top-level import names expected.
A file missing from the package fails here, not on a user's machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import nsqctl
from nsqctl.cli.app import root_command

BIN = Path(sys.executable).parent
NSQCTL = str(BIN / "nsqctl")
EXPECTED_TOP_LEVEL = {"nsqctl"}


def command_paths(cmd: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [path]
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        paths += command_paths(sub, (*path, name))
    return paths


def main() -> None:
    src = Path(nsqctl.__file__).resolve()
    assert "site-packages" in src.parts, f"nsqctl imported from {src}, not the wheel"
    failures = []
    paths = command_paths(root_command())
    for path in paths:
        out = subprocess.run([NSQCTL, *path, "--help"], capture_output=True, text=True)
        if out.returncode != 0 or "Usage" not in out.stdout:
            failures.append(f"nsqctl {' '.join(path)} --help: exit {out.returncode}")
    print(f"{len(paths)} commands' --help ran")
    if not (src.parent / "tui" / "app.py").is_file():
        failures.append("the dashboard (nsqctl.tui) is not in the installed package")
    if not (src.parent / "py.typed").is_file():
        failures.append("py.typed is not in the installed package")
    page = Path(sys.prefix) / "share" / "man" / "man1" / "nsqctl-tail.1"
    if not page.is_file():
        failures.append(f"no man page at {page}")
    elif shutil.which("man"):
        env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
        env.pop("MANPATH", None)
        found = subprocess.run(
            ["man", "-w", "nsqctl-tail"], capture_output=True, text=True, env=env
        )
        if found.returncode != 0 or Path(found.stdout.strip()).resolve() != page.resolve():
            failures.append(f"man does not find nsqctl-tail: {found.stdout}{found.stderr}")
    script = subprocess.run([NSQCTL, "completion", "bash"], capture_output=True, text=True)
    if script.returncode != 0 or "_NSQCTL_COMPLETE" not in script.stdout:
        failures.append("nsqctl completion bash printed no script")
    version = subprocess.run([NSQCTL, "version", "--client"], capture_output=True, text=True)
    if nsqctl.__version__ not in version.stdout:
        failures.append(f"version --client says {version.stdout!r}")
    dist = distribution("nsqctl")
    top = set((dist.read_text("top_level.txt") or "").split())
    if top != EXPECTED_TOP_LEVEL:
        failures.append(
            f"top-level import names {sorted(top)}, expected {sorted(EXPECTED_TOP_LEVEL)}"
        )
    if failures:
        sys.exit("wheel smoke failed:\n  " + "\n  ".join(failures))
    print("wheel smoke: ok")


if __name__ == "__main__":
    main()
