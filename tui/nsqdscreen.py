"""One nsqd's screen: its totals (the node screen's row for it) and every topic copy or
partition it holds, from the view the app's poll produced; enter opens a topic's screen.

Reached with enter on an nsqd (the main screen's nodes table, the node screen) or the ``:``
command line. It asks for nothing the poll does not already fetch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static

from nsqctl.stats.model import NodeStats, TopicPartitionStats
from nsqctl.stats.view import ClusterView
from nsqctl.tui import hotrows
from nsqctl.tui.events import PartitionTracker
from nsqctl.tui.format import num
from nsqctl.tui.rowtable import RowTable
from nsqctl.tui.screens import TopicScreen, ViewScreen
from nsqctl.tui.tables import Row

NSQD_TOPIC_COLUMNS = ("topic", "partition", "leader", "depth", "msgs", "channels", "state")


def _copy_row(t: TopicPartitionStats, redesign: bool) -> Row:
    part = "-" if t.partition is None else str(t.partition)
    leader = ("yes" if t.is_leader else "no") if redesign else "-"
    paused = [c.name for c in t.channels if c.paused]
    state = "PAUSED" if t.paused else (f"paused: {', '.join(paused)}" if paused else "")
    cells = (t.topic, part, leader, num(t.depth), num(t.message_count), str(len(t.channels)))
    return f"{t.topic}#{part}", (*cells, state)


def nsqd_topic_rows(node: NodeStats) -> list[Row]:
    """One row per topic copy (original) or partition (redesign) the nsqd holds."""
    ordered = sorted(node.topics, key=lambda t: (t.topic, t.partition or 0))
    return [_copy_row(t, node.is_redesign) for t in ordered]


class NsqdScreen(ViewScreen):
    """One nsqd: its totals, then what it holds; enter on a row opens that topic."""

    CSS_PATH = "hotscreens.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,backspace", "app.pop_screen", "back")]

    def __init__(
        self,
        address: str,
        drain_states: Callable[[], Mapping[str, str]] | None = None,
        tracker: PartitionTracker | None = None,
    ) -> None:
        super().__init__()
        self.address = address
        self.drain_states = drain_states
        self.tracker = tracker or PartitionTracker()
        self._topics: dict[str, str] = {}  # row key → topic

    def compose(self) -> ComposeResult:
        yield Static(id="node-summary")
        yield RowTable(*hotrows.NODE_SUMMARY_COLUMNS, id="node-totals-one")
        yield Static(f"held by nsqd {self.address}", classes="section")
        yield RowTable(*NSQD_TOPIC_COLUMNS, id="nsqd-topics")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#nsqd-topics", RowTable).focus()

    def refresh_view(self, view: ClusterView) -> None:
        summary = self.query_one("#node-summary", Static)
        node = next((n.stats for n in view.nodes if n.address == self.address), None)
        topics = self.query_one("#nsqd-topics", RowTable)
        if node is None:
            summary.update(Text(f"nsqd {self.address}: not in the cluster now", "bold red"))
            topics.set_rows([])
            return
        state = f" · {node.state}" + (f": {node.error}" if node.error else "")
        summary.update(Text(f"nsqd {self.address} {node.version}{state}", style="bold"))
        totals = self.query_one("#node-totals-one", RowTable)
        totals.set_columns(hotrows.node_summary_columns(view))
        drains = self.drain_states() if self.drain_states else None
        rows = hotrows.node_summary_rows(view, drains)
        totals.set_rows([r for r in rows if r[0] == self.address])
        listed = nsqd_topic_rows(node)
        self._topics = {key: cells[0] for key, cells in listed if isinstance(cells[0], str)}
        topics.set_rows(listed)

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        topic = self._topics.get(event.row_key)
        if event.table.id == "nsqd-topics" and topic is not None:
            self.app.push_screen(TopicScreen(topic, self.tracker))
