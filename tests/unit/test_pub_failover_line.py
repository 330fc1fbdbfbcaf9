"""``pub``'s failover progress line speaks as the CLI: the library's reason names an
action as a call (`lookup(T)`), which a CLI user reads as the command to type."""

from __future__ import annotations

from nsqctl.cli.commands.pub import failover_line
from nsqctl.failover import FailoverEvent


def test_the_reason_names_the_command_not_the_library_call() -> None:
    reason = (
        "no writable leader: its leader's nsqd is down; `lookup(ord4)` shows each "
        "partition's leader"
    )
    event = FailoverEvent("waiting", "publish", "ord4", 1, 3.0, 30.0, reason=reason)
    line = failover_line(event)
    assert line.startswith("nsqctl pub: waiting for a leader for ord4/1 (3s of 30s): ")
    assert "`nsqctl lookup ord4` shows each partition's leader" in line, line
    assert "lookup(ord4)" not in line
