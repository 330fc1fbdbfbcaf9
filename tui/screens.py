"""The three levels an operator drills through: cluster → topic → channel.

Screens only render the latest :class:`ClusterView` handed to :meth:`refresh_view`; they
never fetch. They know their app only as a :class:`ViewHolder` (where the latest view is)
and tell it which topic they detail with a :class:`ViewScreen.Shown` message; actions go
back to the app, which asks for confirmation and runs them. The partition events (a new
leader, the ISR shrinking, a catch-up) come from the :class:`PartitionTracker` each screen
is given when it is made; the app feeds that tracker every poll.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from nsqctl import admin
from nsqctl.errors import NsqctlError
from nsqctl.stats.read import ClientScope
from nsqctl.stats.view import ClusterView, PartitionView, TopicView
from nsqctl.tui import moveaction, rows
from nsqctl.tui.events import PartitionChange, PartitionTracker
from nsqctl.tui.filterbox import FilterBox
from nsqctl.tui.format import num, per_sec, size
from nsqctl.tui.history import HistoryPanel
from nsqctl.tui.host import ActionHost, host_of, lookupds, refused
from nsqctl.tui.modals import ConfirmScreen
from nsqctl.tui.peekscreen import PeekScreen
from nsqctl.tui.rowtable import RowTable


@runtime_checkable
class ViewHolder(Protocol):
    """What a screen needs from its app: the latest view, if a poll has landed yet."""

    view: ClusterView | None


def _table(table_id: str, columns: tuple[str, ...]) -> RowTable:
    return RowTable(*columns, id=table_id)


def _show_events(box: Static, events: list[PartitionChange]) -> None:
    """Event lines in ``box``, which takes no room while there are none."""
    box.set_class(bool(events), "visible")
    box.update(rows.event_lines(events))


class ViewScreen(Screen[None]):
    """Base: re-render from the app's current view when shown and after every poll."""

    class Shown(Message):
        """A view screen came to the front; ``topic`` is the one it details (ISR wanted),
        ``clients`` whose client connections it shows (None: every topic's)."""

        def __init__(self, topic: str | None, clients: tuple[ClientScope, ...] | None = ()) -> None:
            super().__init__()
            self.topic = topic
            self.clients = clients

    class OpenNsqd(Message):
        """Enter on an nsqd: the app opens its screen (it holds what that screen needs)."""

        def __init__(self, address: str) -> None:
            super().__init__()
            self.address = address

    @property
    def detail_topic(self) -> str | None:
        return None

    @property
    def client_scopes(self) -> tuple[ClientScope, ...] | None:
        """Whose clients (and the RDY they add up to) this screen shows: those of the
        topic it details; ``None`` for every topic's."""
        return (self.detail_topic,) if self.detail_topic else ()

    def on_screen_resume(self) -> None:
        self.post_message(self.Shown(self.detail_topic, self.client_scopes))
        self.rerender()

    def rerender(self) -> None:
        """Render the app's latest view again (after a local change: filter, sort)."""
        holder = self.app
        if isinstance(holder, ViewHolder) and holder.view is not None:
            self.refresh_view(holder.view)

    def refresh_view(self, view: ClusterView) -> None:
        raise NotImplementedError


class MainScreen(ViewScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "filter"),
        Binding("s", "sort", "sort"),
        Binding("escape", "clear_filter", "clear filter", show=False),
    ]
    DEFAULT_CSS = """
    #summary, #lookupds { height: 1; padding: 0 1; }
    #nodes { height: auto; max-height: 12; }
    #topics { height: 1fr; }
    #last-event { height: 1; padding: 0 1; display: none; }
    #last-event.visible { display: block; }
    .section { height: 1; padding: 0 1; background: $boost; text-style: bold; }
    """

    def __init__(self, tracker: PartitionTracker | None = None) -> None:
        super().__init__()
        self.filter_text = ""
        self.sort = "name"
        self.tracker = tracker or PartitionTracker()

    def compose(self) -> ComposeResult:
        yield Static(id="summary")
        yield Static(id="lookupds")
        yield Static(id="last-event")
        yield Static("nsqd nodes", classes="section")
        yield _table("nodes", rows.NODE_COLUMNS)
        yield Static(id="topics-title", classes="section")
        yield FilterBox("filter topics…", id="filter", table_id="topics")
        yield _table("topics", rows.TOPIC_COLUMNS)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#topics", RowTable).focus()
        self._title()

    def _title(self, note: str = "") -> None:
        shown = f" · filter: {self.filter_text!r}" if self.filter_text else ""
        note = f" · {note}" if note else ""
        self.query_one("#topics-title", Static).update(f"topics (sort: {self.sort}){shown}{note}")

    def refresh_view(self, view: ClusterView) -> None:
        self.query_one("#summary", Static).update(rows.summary_line(view))
        self.query_one("#lookupds", Static).update(rows.lookupd_line(view))
        nodes = self.query_one("#nodes", RowTable)
        nodes.set_columns(rows.node_columns(view))
        nodes.set_rows(rows.node_rows(view))
        topics = self.query_one("#topics", RowTable)
        topics.set_columns(rows.topic_columns(view))
        topics.set_rows(rows.topic_rows(view, self.filter_text, self.sort))
        _show_events(self.query_one("#last-event", Static), self.tracker.recent(count=1))
        self._title(rows.clients_note(view))

    def action_filter(self) -> None:
        self.query_one("#filter", FilterBox).open()

    def action_clear_filter(self) -> None:
        self.query_one("#filter", FilterBox).clear()

    def action_sort(self) -> None:
        order = list(rows.SORTS)
        self.sort = order[(order.index(self.sort) + 1) % len(order)]
        self.on_screen_resume()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.on_screen_resume()

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        if event.table.id == "topics":
            self.app.push_screen(TopicScreen(event.row_key, self.tracker))
        elif event.table.id == "nodes":
            self.post_message(self.OpenNsqd(event.row_key))

    def selected_topic(self) -> str | None:
        return self.query_one("#topics", RowTable).selected_key


class TopicScreen(ViewScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "back", "back"),
        Binding("slash", "filter", "filter"),
        Binding("m", "move_leader", "move leader"),
        Binding("v", "peek", "peek ch"),
    ]
    DEFAULT_CSS = """
    #topic-summary { height: auto; padding: 0 1; }
    #partitions { height: auto; max-height: 50%; }
    #events { height: auto; max-height: 6; padding: 0 1; display: none; }
    #events.visible { display: block; }
    #channels { height: 1fr; }
    .section { height: 1; padding: 0 1; background: $boost; text-style: bold; }
    """

    def __init__(self, topic: str, tracker: PartitionTracker | None = None) -> None:
        super().__init__()
        self.topic = topic
        self.tracker = tracker or PartitionTracker()
        self.filter_text = ""

    @property
    def detail_topic(self) -> str | None:
        return self.topic

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="topic-summary")
            yield HistoryPanel(id="history")
            yield Static("partitions", id="partitions-title", classes="section")
            yield _table("partitions", rows.PARTITION_COLUMNS)
            yield Static(id="events")
            yield Static("channels", id="channels-title", classes="section")
            yield FilterBox("filter channels…", id="channel-filter", table_id="channels")
            yield _table("channels", rows.CHANNEL_COLUMNS)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#channels", RowTable).focus()

    def refresh_view(self, view: ClusterView) -> None:
        summary = self.query_one("#topic-summary", Static)
        topic = view.topic(self.topic)
        if topic is None:
            summary.update(Text(f"topic {self.topic}: not reported by any nsqd now", "bold red"))
            self.query_one("#partitions", RowTable).set_rows([])
            self.query_one("#channels", RowTable).set_rows([])
            return
        if topic.not_seen:  # nothing to show but that it exists, where, and its channels
            summary.update(Text(rows.not_seen_summary(topic), "bold red"))
            self.query_one("#partitions", RowTable).set_rows([])
            self.query_one("#channels", RowTable).set_rows([])
            return
        text = Text(f"topic {topic.name}", style="bold")
        text.append(
            f" · {rows.copies_text(topic)} · depth {num(topic.depth)} msgs"
            f" · {per_sec(topic.rate)} msg/s"
        )
        flags = rows.topic_flags(topic)
        if flags:
            text.append(f" · {flags}", style="bold yellow")
        if topic.deleted:
            text.append(f"\n{rows.deleted_note(topic)}", style="bold yellow")
        summary.update(text)
        self.query_one("#history", HistoryPanel).show(topic.depth_trend, topic.rate_trend)
        self.query_one("#partitions-title", Static).update(
            "partitions" if topic.is_redesign else "nsqds holding it"
        )
        copies = self.query_one("#partitions", RowTable)
        copies.set_columns(rows.partition_columns(topic))
        copies.set_rows(rows.partition_rows(topic, self.tracker, view.taken_at))
        _show_events(self.query_one("#events", Static), self.tracker.recent(self.topic))
        channels = self.query_one("#channels", RowTable)
        channels.set_rows(rows.channel_rows(topic, self.filter_text))
        shown = f" · filter: {self.filter_text!r}" if self.filter_text else ""
        self.query_one("#channels-title", Static).update(f"channels{shown}")

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        if event.table.id == "channels":
            self.app.push_screen(ChannelScreen(self.topic, event.row_key))

    def action_filter(self) -> None:
        self.query_one("#channel-filter", FilterBox).open()

    def action_back(self) -> None:
        """Escape closes the channel filter first (clearing it), then leaves the topic."""
        box = self.query_one("#channel-filter", FilterBox)
        if box.shown or self.filter_text:
            box.clear()
            return
        self.app.pop_screen()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.rerender()

    def selected_channel(self) -> str | None:
        return self.query_one("#channels", RowTable).selected_key

    def action_peek(self) -> None:
        open_peek(self, self.topic, self.selected_channel())

    def selected_partition(self, topic: TopicView) -> PartitionView | None:
        """The partition under the partitions table's cursor (its first row unless moved)."""
        table = self.query_one("#partitions", RowTable)
        key = table.selected_key
        return next((p for p in topic.partitions if key and key.startswith(f"{p.label}@")), None)

    def action_move_leader(self) -> None:
        """``m``: move the selected partition's leader, as ``nsqctl topic move`` does."""
        host = host_of(self.app)
        topic = host.view.topic(self.topic) if host and host.view else None
        part = self.selected_partition(topic) if topic else None
        label = part.label if part else "?"
        if refused(self.app, host, f"move the leader of {self.topic} partition {label}"):
            return
        assert host is not None and host.view is not None
        if topic is None or not topic.is_redesign or part is None or part.partition is None:
            self.app.notify(
                "only a redesign topic's partitions have leaders to move: select a partition",
                severity="warning",
            )
            return
        number, view = part.partition, host.view
        choices = moveaction.candidates(view, part)
        if not choices:
            self.app.notify("no other nsqd to move the leader to", severity="warning")
            return
        title = f"move the leader of {self.topic} partition {number} (now {part.leader}) to:"

        def picked(target: str | None) -> None:
            if target:
                self.run_worker(self._plan_move(host, number, target), group="plan-move")

        self.app.push_screen(moveaction.TargetScreen(title, choices), picked)

    async def _plan_move(self, host: ActionHost, partition: int, target: str) -> None:
        what = moveaction.move_what(self.topic, partition, target)
        try:
            plan = await admin.plan_move(lookupds(host), self.topic, partition, target)
        except NsqctlError as exc:
            self.app.notify(f"{what}: {exc}", severity="error", timeout=10)
            return

        def answered(yes: bool | None) -> None:
            if yes:  # the app's worker: the move goes on when this screen is left
                self.app.run_worker(self._apply_move(plan, what), name="move", group="move")

        self.app.push_screen(ConfirmScreen(moveaction.move_question(plan, what)), answered)

    async def _apply_move(self, plan: admin.PartitionPlan, what: str) -> None:
        app = self.app

        def step(line: str) -> None:
            app.notify(line, timeout=5)

        try:
            report = await admin.apply_plan(plan, progress=step)
            for warning in report.warnings:
                app.notify(f"warning: {warning}", severity="warning", timeout=10)
            report.raise_for_failures()
        except NsqctlError as exc:
            app.notify(f"{what}: {exc}", severity="error", timeout=10)
        else:
            app.notify(f"{what}: done", timeout=10)


CLIENTS_TITLE = "client connections"


def open_peek(screen: ViewScreen, topic: str, channel: str | None) -> None:
    """``v``: the channel's next messages (:mod:`nsqctl.tui.peekscreen`)."""
    host = host_of(screen.app)
    found = host.view.topic(topic) if host and host.view else None
    if found is None or channel is None:
        screen.app.notify("select a channel first (open a topic)", severity="warning")
        return
    screen.app.push_screen(PeekScreen(topic, channel, found.is_redesign))


class ChannelScreen(ViewScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "back"),
        Binding("v", "peek", "peek"),
    ]
    DEFAULT_CSS = """
    #channel-summary { height: auto; padding: 0 1; }
    #clients { height: 1fr; }
    .section { height: 1; padding: 0 1; background: $boost; text-style: bold; }
    """

    def __init__(self, topic: str, channel: str) -> None:
        super().__init__()
        self.topic = topic
        self.channel = channel

    @property
    def detail_topic(self) -> str | None:
        return self.topic

    @property
    def client_scopes(self) -> tuple[ClientScope, ...] | None:
        """The channel's only: the topic's other channels are not shown here."""
        return ((self.topic, self.channel),)

    def action_peek(self) -> None:
        open_peek(self, self.topic, self.channel)

    def compose(self) -> ComposeResult:
        yield Static(id="channel-summary")
        yield HistoryPanel(id="history")
        yield Static(CLIENTS_TITLE, id="clients-title", classes="section")
        yield _table("clients", rows.CLIENT_COLUMNS)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#clients", RowTable).focus()

    def refresh_view(self, view: ClusterView) -> None:
        summary = self.query_one("#channel-summary", Static)
        topic = view.topic(self.topic)
        channel = topic.channel(self.channel) if topic else None
        if channel is None:
            summary.update(
                Text(f"channel {self.topic}/{self.channel}: not reported now", "bold red")
            )
            self.query_one("#clients", RowTable).set_rows([])
            return
        text = Text(f"channel {self.topic}/{channel.name}", style="bold")
        depth_size = "" if channel.depth_bytes is None else f" ({size(channel.depth_bytes)})"
        ready = rows.PENDING if channel.ready is None else str(channel.ready)
        text.append(
            f" · depth {num(channel.depth)} msgs{depth_size}"
            f" · in-flight {channel.in_flight} · rdy {ready}"
            f" · {per_sec(channel.msg_rate)} msg/s"
            f" · requeued {num(channel.requeued)} · timed out {num(channel.timed_out)}"
        )
        text.append(f" · {rows.channel_state(channel)}", style="bold yellow")
        summary.update(text)
        self.query_one("#history", HistoryPanel).show(channel.depth_trend, channel.rate_trend)
        title = CLIENTS_TITLE if channel.clients_listed else f"{CLIENTS_TITLE} {rows.PENDING}"
        self.query_one("#clients-title", Static).update(title)
        self.query_one("#clients", RowTable).set_rows(rows.client_rows(channel, view.taken_at))
