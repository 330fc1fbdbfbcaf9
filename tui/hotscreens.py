"""The node screen (per-nsqd totals, partitions led, drain state) and the hot-spots screen
(channels or client connections ranked, with why each is flagged).

Like the drill-down screens they only render the view the app's poll produced; the
ranking and totals come from :mod:`nsqctl.stats.hotspots` and :mod:`nsqctl.stats.node_totals`
through :mod:`nsqctl.tui.hotrows`. Their look is in ``hotscreens.tcss``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static

from nsqctl.stats.hotspots import SORT_KEYS, HotSpot, SortKey
from nsqctl.stats.read import ClientScope
from nsqctl.stats.view import ClusterView
from nsqctl.tui import hotrows
from nsqctl.tui.rowtable import RowTable
from nsqctl.tui.screens import ChannelScreen, ViewScreen
from nsqctl.tui.tables import Row

DrainStates = Callable[[], Mapping[str, str]]


def _no_drains() -> Mapping[str, str]:
    return {}


class NodeScreen(ViewScreen):
    """One row per nsqd: what it holds and leads, and whether it is being drained."""

    CSS_PATH = "hotscreens.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,backspace", "app.pop_screen", "back")]

    def __init__(self, drain_states: DrainStates | None = None) -> None:
        super().__init__()
        self.drain_states = drain_states or _no_drains

    def compose(self) -> ComposeResult:
        yield Static(id="node-summary")
        yield Static(
            "nsqd nodes (totals of the partitions each leads)",
            id="node-totals-title",
            classes="section",
        )
        yield RowTable(*hotrows.NODE_SUMMARY_COLUMNS, id="node-totals")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#node-totals", RowTable).focus()

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        self.post_message(self.OpenNsqd(event.row_key))

    def refresh_view(self, view: ClusterView) -> None:
        self.query_one("#node-summary", Static).update(hotrows.node_summary_line(view))
        self.query_one("#node-totals-title", Static).update(hotrows.node_summary_title(view))
        totals = self.query_one("#node-totals", RowTable)
        totals.set_columns(hotrows.node_summary_columns(view))
        totals.set_rows(hotrows.node_summary_rows(view, self.drain_states()))


class HotSpotsScreen(ViewScreen):
    """Channels (``c``: client connections) ranked by the sort ``s`` cycles through;
    enter opens the channel of the selected row."""

    CSS_PATH = "hotscreens.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "back"),
        Binding("s", "sort", "sort"),
        Binding("c", "toggle_clients", "channels/clients"),
    ]

    def __init__(self, sort: SortKey = "requeue", clients: bool = False) -> None:
        super().__init__()
        self.sort: SortKey = sort
        self.clients = clients
        self._targets: dict[str, tuple[str, str]] = {}  # row key → (topic, channel)
        self._down = 0  # nsqds the last poll could not ask: the title says so

    @property
    def client_scopes(self) -> tuple[ClientScope, ...] | None:
        """Every topic's: starved, stalled and saturation need each channel's RDY."""
        return None

    def compose(self) -> ComposeResult:
        yield Static(id="hot-title", classes="section")
        yield RowTable(*hotrows.HOT_CHANNEL_COLUMNS, id="hot-channels")
        yield RowTable(*hotrows.HOT_CLIENT_COLUMNS, id="hot-clients")
        yield Footer()

    def on_mount(self) -> None:
        self._show_table()

    def _table(self) -> RowTable:
        return self.query_one("#hot-clients" if self.clients else "#hot-channels", RowTable)

    def _show_table(self) -> None:
        self.query_one("#hot-channels", RowTable).display = not self.clients
        self.query_one("#hot-clients", RowTable).display = self.clients
        self._table().focus()
        self._show_title()

    def _show_title(self) -> None:
        what = (
            f"client connections (the {hotrows.CLIENT_LIMIT} hottest)"
            if self.clients
            else "channels"
        )
        self.query_one("#hot-title", Static).update(hotrows.hot_title(what, self.sort, self._down))

    def refresh_view(self, view: ClusterView) -> None:
        if view.nodes_down != self._down:
            self._down = view.nodes_down
            self._show_title()
        if self.clients:
            # every connection of the cluster is parsed to rank them: off the UI thread,
            # so keys are handled meanwhile; a newer poll's ranking replaces an older one
            self.run_worker(self._rank_clients(view, self.sort), group="hot", exclusive=True)
            return
        self._apply(hotrows.channel_hot_rows(view, self.sort))

    async def _rank_clients(self, view: ClusterView, sort: SortKey) -> None:
        ranked = await asyncio.to_thread(hotrows.client_hot_rows, view, sort)
        if self.clients and sort == self.sort:  # not switched while it ran
            self._apply(ranked)

    def _apply(self, ranked: Sequence[tuple[Row, HotSpot]]) -> None:
        self._targets = {row[0]: (e.topic, e.channel) for row, e in ranked}
        self._table().set_rows([row for row, _ in ranked])

    def _again(self) -> None:
        self._show_table()
        self.on_screen_resume()  # re-render from the app's latest view

    def action_sort(self) -> None:
        self.sort = SORT_KEYS[(SORT_KEYS.index(self.sort) + 1) % len(SORT_KEYS)]
        self._again()

    def action_toggle_clients(self) -> None:
        self.clients = not self.clients
        self._again()

    def selected(self) -> tuple[str, str] | None:
        """``(topic, channel)`` of the row under the cursor."""
        key = self._table().selected_key
        return self._targets.get(key) if key is not None else None

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        target = self._targets.get(event.row_key)
        if target is not None:
            self.app.push_screen(ChannelScreen(*target))
