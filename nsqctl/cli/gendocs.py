"""Regenerate ``completions/`` (bash, zsh, fish) and ``man/`` (one page per command).

Run ``python -m nsqctl.cli.gendocs`` from the repository root after changing any
command or option; ``tests/unit/test_gendocs.py`` fails while the committed files are stale.
Output is deterministic (the man page date is the nsqctl version, not today).
"""

from __future__ import annotations

import sys
from inspect import cleandoc
from pathlib import Path
from typing import Any

import typer.completion
import typer.main

from nsqctl import __version__

PROG = "nsqctl"
SHELLS = {"bash": "nsqctl.bash", "zsh": "_nsqctl", "fish": "nsqctl.fish"}
SHORT_HELP = 45  # characters of a command's summary in NAME and COMMANDS (click-man's)


def completion_script(shell: str) -> str:
    """The script that makes ``shell`` ask nsqctl itself for completions (``nsqctl
    completion SHELL`` prints it; ``completions/`` holds a copy of each)."""
    # typer.completion re-exports it without listing it in an __all__
    script = typer.completion.get_completion_script(  # type: ignore[attr-defined]
        prog_name=PROG, complete_var="_NSQCTL_COMPLETE", shell=shell
    )
    return script.rstrip("\n") + "\n"


def roff_text(text: str) -> str:
    """``text`` with its backslashes shown as such: troff reads ``\\n`` as a register (click-man
    passes help text through as it is), so ``tail --format``'s escapes and ``pub
    --delimiter``'s default would print garbled. A line that starts with ``.`` or ``'`` would
    be read as a request (and dropped): ``\\&`` (a zero-width character) goes first."""
    text = text.replace("\\", "\\e")
    return "\n".join(
        "\\&" + line if line.startswith((".", "'")) else line for line in text.split("\n")
    )


def man_pages(command: Any, name: str = PROG, parent: Any = None) -> dict[str, str]:
    """``{file name: troff}`` for a command and every command below it.

    The pages are laid out by click-man's ``ManPage``; the command tree is walked here,
    with the click that typer carries (click-man's own walker only sees options of the
    separately installed click, and since typer 0.26 left every option out).
    """
    from click_man.man import ManPage

    ctx = command.context_class(command, info_name=name, parent=parent)
    page = ManPage(ctx.command_path)
    page.version = __version__
    page.date = __version__
    page.short_help = command.get_short_help_str(SHORT_HELP)
    page.description = roff_text(
        cleandoc("\n\n".join(text for text in (command.help, command.epilog) if text))
    )
    page.synopsis = " ".join(command.collect_usage_pieces(ctx))
    page.options = [
        (record[0], roff_text(record[1]))
        for param in command.params
        if param.param_type_name == "option" and (record := param.get_help_record(ctx)) is not None
    ]
    subcommands = getattr(command, "commands", {})
    page.commands = [(n, c.get_short_help_str(SHORT_HELP)) for n, c in subcommands.items()]
    pages = {f"{ctx.command_path.replace(' ', '-')}.1": str(page)}
    for sub_name, sub in subcommands.items():
        if not sub.hidden:
            pages.update(man_pages(sub, sub_name, ctx))
    return pages


def generate(root: Path) -> dict[Path, str]:
    """Every generated file, relative to ``root``, with its content."""
    from nsqctl.cli.app import root_command

    files: dict[Path, str] = {}
    for shell, name in SHELLS.items():
        files[root / "completions" / name] = completion_script(shell)
    for name, text in sorted(man_pages(root_command()).items()):
        files[root / "man" / name] = text
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
