"""Every reporting command accepts ``--json``, proved by walking the
command tree: a new command must be put in one of the two lists below, or this fails.

"Reporting" means the command ends by telling what it found or did (a table, a summary, a
count). Not reporting, each for its reason:

* ``tail``, ``peek``: messages, whose own machine format is ``--format json``;
* ``dash``: an interactive screen;
* ``completion``, ``sandbox env``: scripts for a shell to run;
* ``config path``, ``sandbox build``: one path, for ``$(...)``;
* ``sandbox down``, ``config set-profile``: act, and say so in one line on stderr;
* ``exporter``: a server, whose machine format is the Prometheus text it serves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nsqctl.cli.app import root_command

NOT_REPORTING = {
    "tail",
    "peek",
    "dash",
    "completion",
    "sandbox env",
    "config path",
    "sandbox build",
    "sandbox down",
    "config set-profile",
    "exporter",
}

REPORTING = {
    "pub",
    "lookup",
    "version",
    "stat",
    "check",
    "top",
    "archive",
    "replay",
    "trace",
    "sandbox up",
    "sandbox status",
    "sandbox topic create",
    "config profiles",
    "dead-letter list",
    "dead-letter replay",
    "node drain",
    "node restore",
    "node list",
    *(
        f"topic {a}"
        for a in ("create", "delete", "list", "pause", "unpause", "empty", "expand", "move")
    ),
    "topic update",
    *(
        f"channel {a}"
        for a in (
            "list",
            "create",
            "delete",
            "pause",
            "unpause",
            "empty",
            "skip",
            "unskip",
            "setoffset",
        )
    ),
}


def _leaves(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    if hasattr(command, "list_commands"):  # a group (click's own or typer's copy of it)
        ctx = command.context_class(command)
        for name in command.list_commands(ctx):
            yield from _leaves(command.get_command(ctx, name), (*path, name))
    else:
        yield " ".join(path), command


def test_every_command_is_classified_and_every_reporting_one_has_json() -> None:
    leaves = dict(_leaves(root_command()))
    assert not REPORTING & NOT_REPORTING
    unclassified = set(leaves) - REPORTING - NOT_REPORTING
    assert not unclassified, f"say whether these report (and give them --json): {unclassified}"
    assert not (REPORTING | NOT_REPORTING) - set(leaves), "a listed command no longer exists"
    without = sorted(
        name
        for name in REPORTING
        if "--json" not in {o for p in leaves[name].params for o in getattr(p, "opts", ())}
    )
    assert without == [], f"reporting commands without --json: {without}"
