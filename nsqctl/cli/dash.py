"""``nsqctl dash``: open the terminal dashboard on a cluster."""

from __future__ import annotations

import typer

from nsqctl.cli.common import (
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    require_positive_seconds,
    resolve_cluster,
)
from nsqctl.stats.poller import DEFAULT_TIMEOUT, StatsPoller
from nsqctl.stats.session import StatsSession


def dash(
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
    interval: float = typer.Option(2.0, "--interval", "-i", help="Seconds between polls."),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT, "--timeout", help="Seconds before an nsqd counts as down for a poll."
    ),
) -> None:
    """Live dashboard: nodes, topics, partitions, channels and consumers (? for keys)."""
    require_positive_seconds(interval, "--interval")
    require_positive_seconds(timeout, "--timeout")
    sel = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require="http")
    from nsqctl.admin.drain_state import drain_labels
    from nsqctl.tui.app import DashApp  # Textual loads only for this command

    poller = StatsPoller(sel.lookupd, sel.nsqd_http, timeout=timeout)
    # the node screen shows the drains `nsqctl node drain` records in the state dir
    DashApp(StatsSession(poller), interval=interval, drain_states=drain_labels).run()
