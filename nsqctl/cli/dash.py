"""``nsqctl dash``: open the terminal dashboard on a cluster."""

from __future__ import annotations

import sys

import typer

from nsqctl.cli.common import (
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.numbers import seconds
from nsqctl.cli.readonly import origin
from nsqctl.errors import ConfigError
from nsqctl.stats.poller import DEFAULT_TIMEOUT, StatsPoller
from nsqctl.stats.session import StatsSession


def dash(
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
    interval: float = typer.Option(
        2.0, "--interval", "-i", parser=seconds(), help="Seconds between polls."
    ),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT,
        "--timeout",
        parser=seconds(),
        help="Seconds before an nsqd counts as down for a poll.",
    ),
) -> None:
    """Live dashboard: nodes, topics, partitions, channels and consumers (? for keys)."""
    require_terminal()
    sel = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require="http")
    from nsqctl.admin.drain_state import drain_labels
    from nsqctl.tui.app import DashApp  # Textual loads only for this command

    poller = StatsPoller(sel.lookupd, sel.nsqd_http, timeout=timeout)
    # the node screen shows the drains `nsqctl node drain` records in the state dir
    # under read-only the dashboard still shows everything; its actions are refused
    read_only = origin(sel.read_only_setting()) if sel.read_only else None
    DashApp(
        StatsSession(poller), interval=interval, drain_states=drain_labels, read_only=read_only
    ).run()


def require_terminal() -> None:
    """Refuse to start without a terminal on stdin and stdout: the dashboard draws with
    escape codes and is left with keys, so redirected it fills a file with escape codes
    and, with no key to read, never ends."""
    for name, stream in (("stdout", sys.stdout), ("stdin", sys.stdin)):
        if stream is None or not stream.isatty():
            raise ConfigError(
                f"dash needs a terminal, and its {name} is not one: run it in a terminal; "
                "for output to a file or a pipe use `nsqctl stat --json` or "
                "`nsqctl top --json`"
            )
