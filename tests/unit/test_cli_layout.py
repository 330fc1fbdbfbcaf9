"""Where a command's code is found: ``nsqctl NAME`` lives in ``nsqctl/cli/commands/NAME.py``
(``-`` written ``_``), and every module there is a command or a part of one
(``NAME_PART.py``), so a reader finds a command by its name alone."""

from __future__ import annotations

from pathlib import Path

from nsqctl.cli.app import COMMANDS

ROOT = Path(__file__).resolve().parents[2]
COMMANDS_DIR = ROOT / "nsqctl" / "cli" / "commands"


def module_name(command: str) -> str:
    return command.replace("-", "_")


def test_each_command_lives_in_the_module_named_after_it() -> None:
    misplaced = [
        f"{entry.name}: {entry.target}"
        for entry in COMMANDS
        if entry.target.partition(":")[0] != f"nsqctl.cli.commands.{module_name(entry.name)}"
    ]
    assert not misplaced, "commands not in nsqctl/cli/commands/<command>.py: " + ", ".join(
        misplaced
    )


def test_every_commands_module_is_a_command_or_a_part_of_one() -> None:
    names = {module_name(entry.name) for entry in COMMANDS}
    strays = sorted(
        path.name
        for path in COMMANDS_DIR.glob("*.py")
        if path.stem != "__init__"
        and path.stem not in names
        and not any(path.stem.startswith(f"{name}_") for name in names)
    )
    assert not strays, (
        "modules in nsqctl/cli/commands that are no command and no <command>_<part> "
        "(a helper several commands share belongs in nsqctl/cli): " + ", ".join(strays)
    )
    assert len(list(COMMANDS_DIR.glob("*.py"))) > len(names)  # the walk saw the folder
