"""Regenerate ``completions/`` (bash, zsh, fish) and ``man/`` (one page per command).

Run ``python -m nsqctl.cli.gendocs`` from the repository root after changing any
command or option; ``tests/unit/test_gendocs.py`` fails while the committed files are stale.
Output is deterministic (the man page date is the nsqctl version, not today).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import typer.completion
import typer.main
from click_man.core import write_man_pages

from nsqctl import __version__

PROG = "nsqctl"
SHELLS = {"bash": "nsqctl.bash", "zsh": "_nsqctl", "fish": "nsqctl.fish"}


def generate(root: Path) -> dict[Path, str]:
    """Every generated file, relative to ``root``, with its content."""
    from nsqctl.cli.app import app

    files: dict[Path, str] = {}
    for shell, name in SHELLS.items():
        script = typer.completion.get_completion_script(
            prog_name=PROG, complete_var="_NSQCTL_COMPLETE", shell=shell
        )
        files[root / "completions" / name] = script.rstrip("\n") + "\n"
    command = typer.main.get_command(app)
    with tempfile.TemporaryDirectory() as tmp:
        write_man_pages(PROG, command, version=__version__, target_dir=tmp, date=__version__)
        for page in sorted(Path(tmp).iterdir()):
            files[root / "man" / page.name] = page.read_text()
    return files


def write(root: Path) -> list[Path]:
    """Write the files and remove man pages of commands that no longer exist."""
    files = generate(root)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    stale = [p for p in (root / "man").glob("*.1") if p not in files]
    for path in stale:
        path.unlink()
    return sorted(files)


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()
    written = write(root)
    print(f"wrote {len(written)} files under {root}/completions and {root}/man")


if __name__ == "__main__":
    main()
