"""Model → rows for the node screen and the hot-spots screen. Pure, like :mod:`rows`."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text

from nsqctl.stats.hotspots import (
    ChannelHotSpot,
    ClientHotSpot,
    HotSpot,
    SortKey,
    rank_channels,
    rank_clients,
)
from nsqctl.stats.node_totals import NO_DRAIN, node_summaries
from nsqctl.stats.view import ClusterView
from nsqctl.tui.format import STATE_STYLE, num, per_sec, styled
from nsqctl.tui.rows import PENDING
from nsqctl.tui.tables import Cell, Row

NODE_SUMMARY_COLUMNS = (
    "nsqd",
    "state",
    "depth",
    "in-flight",
    "deferred",
    "topics",
    "partitions",
    "led",
    "drain",
    "",
)
ORIGINAL_NODE_SUMMARY_COLUMNS = (*NODE_SUMMARY_COLUMNS[:6], "copies", "", *NODE_SUMMARY_COLUMNS[8:])
"""An original nsqd holds copies of whole topics and leads nothing: no partitions."""


def node_summary_columns(view: ClusterView) -> tuple[str, ...]:
    """The node screen's header in the family's words."""
    return NODE_SUMMARY_COLUMNS if view.is_redesign else ORIGINAL_NODE_SUMMARY_COLUMNS


def node_summary_title(view: ClusterView) -> str:
    what = "the partitions each leads" if view.is_redesign else "the topics each holds"
    return f"nsqd nodes (totals of {what})"


HOT_CHANNEL_COLUMNS = (
    "channel",
    "depth",
    "clients",
    "req/s",
    "t-o/s",
    "drain",
    "in-flight/rdy",
    "reasons",
)
HOT_CLIENT_COLUMNS = (
    "channel",
    "client",
    "remote",
    "nsqd",
    "part",
    "req/s",
    "t-o/s",
    "drain",
    "in-flight/rdy",
    "reasons",
)
CLIENT_LIMIT = 200
"""Client rows shown: a big cluster has hundreds of thousands; the hottest are the point."""

REASON_STYLE: dict[str, str] = {
    "starved": "bold yellow",
    "stalled": "bold red",
    "orphan": "bold red",
    "poison": "bold red",
}


def node_summary_rows(
    view: ClusterView, drain_states: Mapping[str, str] | None = None
) -> list[Row]:
    rows: list[Row] = []
    for n in node_summaries(view, drain_states):
        down = n.state == "down"

        def count(value: int | None, down: bool = down) -> str:
            return "-" if down or value is None else num(value)

        drain: Cell = n.drain_state
        if n.drain_state != NO_DRAIN:
            drain = styled(n.drain_state, "bold cyan")
        rows.append(
            (
                n.address,
                [
                    n.address,
                    styled(n.state, STATE_STYLE[n.state]),
                    count(n.depth),
                    count(n.in_flight),
                    count(n.deferred),
                    count(n.topics),
                    count(n.partitions),
                    count(n.partitions_led),
                    drain,
                    styled(n.error, "red") if n.error else "",
                ],
            )
        )
    return rows


def node_summary_line(view: ClusterView) -> Text:
    summaries = node_summaries(view)
    up = [n for n in summaries if n.state != "down"]
    text = Text(
        f"{len(up)}/{len(summaries)} nsqd up · depth {num(sum(n.depth for n in up))} msgs"
        f" · in-flight {num(sum(n.in_flight for n in up))}"
        f" · deferred {num(sum(n.deferred for n in up))}"
    )
    if view.nodes_down:
        text.append(f" · {view.nodes_down} nsqd down", style="bold red")
    return text


def hot_title(what: str, sort: SortKey, down: int) -> Text:
    """The hot-spots screen's title line; a ranking that could not ask ``down`` nsqds says
    so, as the other screens' summary lines do (a channel on a down nsqd is not ranked)."""
    text = Text(f"hot spots: {what} by {sort} · s: sort · c: channels/clients")
    if down:
        text.append(f" · {down} nsqd down: their channels are not ranked", style="bold red")
    return text


def _drain(entry: HotSpot) -> str:
    return "never" if entry.time_to_drain is None else f"{entry.time_to_drain:.0f}s"


def _saturation(entry: HotSpot) -> str:
    share = "" if entry.saturation is None else f" {entry.saturation:.0%}"
    ready = PENDING if entry.ready is None else entry.ready
    return f"{entry.in_flight}/{ready}{share}"


def reasons_text(entry: HotSpot) -> Text:
    text = Text()
    for i, reason in enumerate(entry.reasons):
        text.append(("" if i == 0 else " ") + reason, style=REASON_STYLE[reason])
    return text


def _heat_cells(entry: HotSpot) -> list[Cell]:
    """The columns a channel row and a client row share: why it is hot."""
    return [
        per_sec(entry.requeue_rate),
        per_sec(entry.timeout_rate),
        _drain(entry),
        _saturation(entry),
        reasons_text(entry),
    ]


def channel_hot_rows(view: ClusterView, sort: SortKey) -> list[tuple[Row, ChannelHotSpot]]:
    """Every channel, hottest first; each row with its entry (the screen opens it)."""
    out: list[tuple[Row, ChannelHotSpot]] = []
    for e in rank_channels(view, sort):
        cells: list[Cell] = [e.key, num(e.depth), str(e.client_count), *_heat_cells(e)]
        out.append(((e.key, cells), e))
    return out


def client_hot_rows(
    view: ClusterView, sort: SortKey, limit: int = CLIENT_LIMIT
) -> list[tuple[Row, ClientHotSpot]]:
    out: list[tuple[Row, ClientHotSpot]] = []
    for e in rank_clients(view, sort, limit):
        cells: list[Cell] = [
            f"{e.topic}/{e.channel}",
            e.client_id,
            e.remote_address,
            e.node,
            "-" if e.partition is None else str(e.partition),
            *_heat_cells(e),
        ]
        out.append(((e.key, cells), e))
    return out
