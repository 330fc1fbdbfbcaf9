"""``nsqctl top``: the hottest channels (or client connections), refreshing in place.

Ranked by :mod:`nsqctl.stats.hotspots` from the same polls as ``stat`` and the dashboard;
rates need two polls, so the first table (and ``--once``) comes after the second.

``--once`` stays two polls, so it cannot flag an *orphan* (depth growing over
:data:`~nsqctl.stats.rules.GROWING_SAMPLES` steps, so one more poll than that) and says so
in one line. Taking more quick polls instead was left out: it would triple the wait of a
command meant as a snapshot, and growth over a few polls a fraction of a second apart is
a burst, not a channel left behind; ``nsqctl check --orphan`` is the one-shot that judges it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING, Any

import typer

from nsqctl.cli.flags import (
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    require_first_answer,
    resolve_cluster,
)
from nsqctl.cli.numbers import poll_interval, seconds
from nsqctl.cli.output.terminal import escape_controls
from nsqctl.errors import ConfigError
from nsqctl.stats.coverage import coverage
from nsqctl.stats.hotspots import (
    SORT_KEYS,
    ChannelHotSpot,
    ClientHotSpot,
    HotSpot,
    SortKey,
    rank_channels,
    rank_clients,
)
from nsqctl.stats.poller import DEFAULT_TIMEOUT, StatsPoller
from nsqctl.stats.rules import GROWING_SAMPLES
from nsqctl.stats.sources import StatsSession, ViewSource
from nsqctl.stats.view import ClusterView

if TYPE_CHECKING:  # rich loads when a table is drawn, not for --help or --json
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

RANKING = "this ranking"
"""What top's warnings say may be incomplete."""
REASON_STYLE = {"stalled": "bold red", "orphan": "bold red", "poison": "bold red"}
ONCE_POLLS = 2
ONCE_NOTE = (
    f"orphan not judged: it needs {GROWING_SAMPLES + 1} polls of growing depth, --once takes "
    f"{ONCE_POLLS}; run top without --once, or `nsqctl check --orphan`"
)


def ranked(view: ClusterView, sort: SortKey, clients: bool, limit: int) -> list[HotSpot]:
    if clients:
        return list(rank_clients(view, sort, limit))
    return list(rank_channels(view, sort, limit))


def _entry_json(entry: HotSpot) -> dict[str, Any]:
    common = {
        "topic": entry.topic,
        "channel": entry.channel,
        "requeue_rate": entry.requeue_rate,
        "timeout_rate": entry.timeout_rate,
        "time_to_drain": entry.time_to_drain,
        "saturation": entry.saturation,
        "in_flight": entry.in_flight,
        "ready": entry.ready,
        "reasons": list(entry.reasons),
    }
    if isinstance(entry, ChannelHotSpot):
        return {
            "scope": "channel",
            **common,
            "depth": entry.depth,
            "held": entry.held,
            "clients": entry.client_count,
            "drain_rate": entry.drain_rate,
        }
    return {
        "scope": "client",
        **common,
        "node": entry.node,
        "partition": entry.partition,
        "client_id": entry.client_id,
        "hostname": entry.hostname,
        "remote_address": entry.remote_address,
    }


def top_record(view: ClusterView, sort: SortKey, clients: bool, limit: int) -> dict[str, Any]:
    """The ``--json`` document (always one ``--once``): when, how ranked, the entries,
    nodes that are not up, the note that orphans are not judged, and what the ranking could
    not see (``complete``, ``warnings``)."""
    seen = coverage(view)
    return {
        "time": view.taken_at,
        "sort": sort,
        "by": "client" if clients else "channel",
        "entries": [_entry_json(e) for e in ranked(view, sort, clients, limit)],
        "nodes": [
            {"address": n.address, "state": n.stats.state, "error": n.stats.error}
            for n in view.nodes
            if n.stats.state != "up"
        ],
        "notes": [ONCE_NOTE],
        "complete": seen.complete,
        "warnings": seen.warnings(RANKING),
    }


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _drain(entry: HotSpot) -> str:
    if entry.time_to_drain is None:
        return "never"
    return f"{entry.time_to_drain:.0f}s"


def _saturation(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _reasons(entry: HotSpot) -> Text:
    from rich.text import Text

    text = Text()
    for i, reason in enumerate(entry.reasons):
        text.append(("" if i == 0 else " ") + reason, style=REASON_STYLE.get(reason, "yellow"))
    return text


def render_table(view: ClusterView, sort: SortKey, clients: bool, limit: int) -> Table:
    from rich.table import Table
    from rich.text import Text

    entries = ranked(view, sort, clients, limit)
    when = time.strftime("%H:%M:%S", time.localtime(view.taken_at))
    down = [n.address for n in view.nodes if n.stats.state == "down"]
    title = f"{when} hot {'clients' if clients else 'channels'} by {sort}"
    if down:
        title += f" · nsqd down: {', '.join(down)}"
    table = Table(title=title, title_justify="left")
    first = ("client", "nsqd", "part") if clients else ("channel", "depth", "clients")
    for column in (*first, "req/s", "t-o/s", "drain", "in-flight/rdy", "reasons"):
        table.add_column(column, justify="left" if column in ("channel", "client") else "right")
    for e in entries:
        if isinstance(e, ClientHotSpot):
            head = (
                f"{e.topic}/{e.channel} {escape_controls(e.hostname)} {e.remote_address}",
                e.node,
                "-" if e.partition is None else str(e.partition),
            )
        else:
            head = (f"{e.topic}/{e.channel}", str(e.depth), str(e.client_count))
        sat = f"{e.in_flight}/{e.ready} {_saturation(e.saturation)}"
        table.add_row(
            *(Text(h) for h in head),
            Text(_rate(e.requeue_rate)),
            Text(_rate(e.timeout_rate)),
            Text(_drain(e)),
            Text(sat),
            _reasons(e),
        )
    seen = coverage(view)
    notes = [*seen.unseen_warnings(RANKING), *seen.lookupd_warnings(RANKING)]
    if not entries:
        notes.insert(0, f"no channels on {seen.searched}")
    if notes:
        table.caption = "\n".join(notes)
    return table


async def run_top(
    source: ViewSource,
    *,
    sort: SortKey,
    clients: bool,
    limit: int,
    interval: float,
    once: bool,
    as_json: bool,
    console: Console | None = None,
) -> None:
    """Two polls ``interval`` apart, then print (``once``) or keep refreshing the table."""
    from rich.console import Console
    from rich.live import Live

    console = console or Console()
    try:
        require_first_answer(await source.refresh())
        await asyncio.sleep(interval)
        view = await source.refresh()
        if as_json:
            sys.stdout.write(json.dumps(top_record(view, sort, clients, limit)) + "\n")
            sys.stdout.flush()
            return
        if once:
            console.print(render_table(view, sort, clients, limit))
            console.print(ONCE_NOTE, style="dim", markup=False, highlight=False, soft_wrap=True)
            return
        with Live(render_table(view, sort, clients, limit), console=console) as live:
            while True:
                await asyncio.sleep(interval)
                view = await source.refresh()
                live.update(render_table(view, sort, clients, limit))
    finally:
        await source.aclose()


def top(
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
    sort: str = typer.Option(
        "requeue",
        "--sort",
        "-s",
        help="Rank by: requeue (rate), timeout (rate), drain (time to drain), "
        "saturation (in-flight / RDY).",
    ),
    clients: bool = typer.Option(False, "--clients", help="Rank client connections instead."),
    limit: int = typer.Option(20, "-n", "--limit", help="Show the N hottest."),
    once: bool = typer.Option(
        False,
        "--once",
        help=(
            "Two polls, print the ranking and exit (too few to flag an orphan: that needs "
            f"{GROWING_SAMPLES + 1} polls of growing depth)."
        ),
    ),
    as_json: bool = typer.Option(
        False, "--json", help="One JSON document after two polls (implies --once)."
    ),
    interval: float = typer.Option(
        2.0, "--interval", "-i", parser=poll_interval(), help="Seconds between polls."
    ),
    timeout: float = typer.Option(
        DEFAULT_TIMEOUT,
        "--timeout",
        parser=seconds(),
        help="Seconds before an nsqd counts as down for a poll.",
    ),
) -> None:
    """Rank channels (or clients) by requeues, timeouts, time to drain or RDY saturation."""
    if sort not in SORT_KEYS:
        raise ConfigError(f"bad --sort {sort!r}: one of {', '.join(SORT_KEYS)}")
    if limit <= 0:
        raise ConfigError(f"bad -n {limit!r}: must be > 0")
    sel = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require="http")
    poller = StatsPoller(sel.lookupd, sel.nsqd_http, timeout=timeout)
    asyncio.run(
        run_top(
            StatsSession(poller),
            sort=sort,  # narrowed to SortKey by the SORT_KEYS check above
            clients=clients,
            limit=limit,
            interval=interval,
            once=once or as_json,
            as_json=as_json,
        )
    )
