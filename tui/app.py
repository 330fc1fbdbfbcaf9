"""``nsqctl dash``: the Textual app. It polls a :class:`ViewSource` in a worker and hands
each view to the visible screen; a slow cluster delays data, never key handling."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.worker import Worker, WorkerError

from nsqctl import admin
from nsqctl.cli.wording import cli_message
from nsqctl.errors import NsqctlError
from nsqctl.protocol.output_buffer import AUTO
from nsqctl.stats.gcpause import freeze_after_bursts
from nsqctl.stats.read import ClientScope
from nsqctl.stats.sources import ViewSource
from nsqctl.stats.view import ClusterView, TopicView
from nsqctl.tui.actions import (
    Action,
    PreparedAction,
    describe,
    measure,
    plan_action,
    read_only_refusal,
    send,
)
from nsqctl.tui.events import PartitionTracker
from nsqctl.tui.hotscreens import HotSpotsScreen, NodeScreen
from nsqctl.tui.modals import CommandLine, ConfirmScreen, HelpScreen, TypeNameScreen
from nsqctl.tui.nodejobs import NodeJobs
from nsqctl.tui.nsqdscreen import NsqdScreen
from nsqctl.tui.screens import ChannelScreen, MainScreen, TopicScreen, ViewScreen

if TYPE_CHECKING:
    from nsqctl.connection import ConnectionConfig


class DashApp(App[None]):
    TITLE = "nsqctl dash"
    confirm_above = admin.DEFAULT_CONFIRM_ABOVE
    """Above this many messages dropped an action asks for the topic name (the CLI's rule)."""
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help"),
        Binding("r", "refresh", "refresh"),
        Binding("p", "toggle_channel_pause", "pause/unpause ch"),
        Binding("e", "empty_channel", "empty ch"),
        Binding("t", "toggle_topic_pause", "pause/unpause topic"),
        Binding("n", "nodes", "nodes"),
        Binding("h", "hot_spots", "hot spots"),
        Binding("colon", "command_line", "go to", show=False),
    ]

    def __init__(
        self,
        source: ViewSource,
        interval: float = 2.0,
        drain_states: Callable[[], Mapping[str, str]] | None = None,
        read_only: str | None = None,
        connection: ConnectionConfig | None = None,
        nsqd_tcp: Sequence[str] = (),
        output_buffer: str = AUTO,
    ) -> None:
        """``drain_states`` tells the node screen which nsqd is being drained (nsqd HTTP
        address → a short state), read at every refresh; without it none is.
        ``read_only``, when given, names what set read-only (``--read-only``, a profile,
        a served session without ``--allow-actions``): every action is then refused with
        a notification, and nothing is sent. ``connection`` (TLS, AUTH, compression) and
        ``nsqd_tcp`` are how an action that connects to an nsqd over TCP (a borrow)
        connects, as the CLI's commands on the same cluster do; HTTP is not affected.
        ``output_buffer`` (``auto``, ``none`` or a duration) is the output buffering a
        borrow's consumer asks nsqd for on its channel, as ``peek --borrow`` does."""
        super().__init__()
        self.source = source
        self.interval = interval
        self.drain_states = drain_states
        self.read_only = read_only
        self.connection = connection
        self.nsqd_tcp = tuple(nsqd_tcp)
        self.output_buffer = output_buffer
        self._poller: Worker[None] | None = None
        self.view: ClusterView | None = None
        self.polls = 0
        self.focus_topics: tuple[str, ...] = ()
        self.client_scopes: tuple[ClientScope, ...] | None = ()
        """Whose clients the polls list (None: every topic's): what the screen shows."""
        self.tracker = PartitionTracker()
        self._wake = asyncio.Event()
        self.node_jobs = NodeJobs()
        """Drains and restores started from the node screens (they outlive the screen)."""

    def on_mount(self) -> None:
        # Each poll's model leaves the collector's reach, so its collections do not stall
        # key handling (bench/README.md, Dashboard).
        freeze_after_bursts()
        # Most of a big cluster's /stats is client connections, shown only for the open
        # topic or channel and on the hot-spots screen: the first poll lists none.
        self.source.show_clients(self.client_scopes)
        self.push_screen(MainScreen(self.tracker))
        self._poller = self.run_worker(self._poll_loop(), name="poll", exclusive=True)

    async def on_unmount(self) -> None:
        freeze_after_bursts(0)
        # A drain still running is cancelled and records it (as Ctrl-C on `node drain`)
        await self.node_jobs.stop()
        # Stop the poll before closing what it reads: a poll still in flight would send on
        # a closed HTTP client and end the app with an error instead of quietly.
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(WorkerError):
                await self._poller.wait()
        await self.source.aclose()

    async def _poll_loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                view = await self.source.refresh()
            except NsqctlError as exc:
                self.notify(cli_message(exc), severity="error", timeout=self.interval * 2)
            else:
                self.apply_view(view)
            # asyncio.timeout, never wait_for: on 3.11 wait_for returns, swallowing the
            # cancel, when it lands as the wait ends (a refresh asked, a screen shown:
            # CPython gh-86296), and the poll went on after the app's exit cancelled it,
            # the exit waiting for it for ever (on_unmount)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._wake.wait()

    def apply_view(self, view: ClusterView) -> None:
        self.view = view
        self.polls += 1
        self.tracker.observe(view)  # before rendering, so this poll's changes are marked
        # A poll can land before the first screen is composed (it renders on resume then)
        # or after the last one left while the app shuts down (nothing to render).
        if not self.screen_stack:
            return
        if isinstance(self.screen, ViewScreen) and self.screen.is_mounted:
            # A screen is mounted a moment before its widgets are, and while the app exits
            # they go first: a poll landing then finds none (it renders on resume instead)
            with contextlib.suppress(NoMatches):
                self.screen.refresh_view(view)

    def on_view_screen_shown(self, message: ViewScreen.Shown) -> None:
        """Ask for ISR/catch-up and the clients of what is on screen only, and at once
        when that needs more than the last poll asked."""
        focus = (message.topic,) if message.topic else ()
        if focus != self.focus_topics:
            self.focus_topics = focus
            self.source.focus(focus)
            if focus:
                self._wake.set()
        if message.clients != self.client_scopes:
            self.client_scopes = message.clients
            self.source.show_clients(message.clients)
            if message.clients is None or message.clients:
                self._wake.set()

    def on_view_screen_open_nsqd(self, message: ViewScreen.OpenNsqd) -> None:
        self.push_screen(NsqdScreen(message.address, self.drain_states, self.tracker))

    # ------------------------------------------------------------- actions

    def action_command_line(self) -> None:
        if not isinstance(self.screen, CommandLine):
            self.push_screen(CommandLine(), self.go_to)

    def go_to(self, name: str | None) -> None:
        """Open the screen of topic or nsqd ``name`` (as the last poll knows them): a
        topic first, then an nsqd by its HTTP address; anything else is said, not opened."""
        if not name:
            return
        view = self.view
        if view is not None and view.topic(name) is not None:
            self.push_screen(TopicScreen(name, self.tracker))
        elif view is not None and any(n.address == name for n in view.nodes):
            self.push_screen(NsqdScreen(name, self.drain_states, self.tracker))
        else:
            known = "" if view is not None else " (no poll has landed yet)"
            self.notify(f"no topic or nsqd named {name!r}{known}", severity="warning")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_refresh(self) -> None:
        self._wake.set()

    def action_nodes(self) -> None:
        if not isinstance(self.screen, NodeScreen):
            self.push_screen(NodeScreen(self.drain_states))

    def action_hot_spots(self) -> None:
        if not isinstance(self.screen, HotSpotsScreen):
            self.push_screen(HotSpotsScreen())

    def _target(self) -> tuple[TopicView | None, str | None]:
        """The topic and channel the current screen points at."""
        screen = self.screen
        if self.view is None:
            return None, None
        if isinstance(screen, ChannelScreen):
            return self.view.topic(screen.topic), screen.channel
        if isinstance(screen, TopicScreen):
            return self.view.topic(screen.topic), screen.selected_channel()
        if isinstance(screen, MainScreen):
            name = screen.selected_topic()
            return (self.view.topic(name) if name else None), None
        if isinstance(screen, HotSpotsScreen):
            picked = screen.selected()
            return (self.view.topic(picked[0]), picked[1]) if picked else (None, None)
        return None, None

    def _confirm_and_run(self, action: Action, topic: TopicView, channel: str | None) -> None:
        """Every dashboard action goes through here: refused at once when read-only, not
        offered or nowhere to send, else asked as the CLI asks: planned afresh and checked
        first (and measured, for an action that drops messages), in a worker, so keys are
        handled meanwhile, and refused in the CLI's words before any question."""
        if self.read_only is not None:
            what = describe(action, topic.name, channel)
            self.notify(read_only_refusal(self.read_only, what), severity="warning")
            return
        try:
            prepared = plan_action(action, topic, channel)
        except NsqctlError as exc:
            self.notify(cli_message(exc), severity="warning")
            return
        # one question at a time: a second key press while checking replaces the first
        self.run_worker(
            self._check_and_ask(prepared),
            name=f"check-{action}",
            group="check",
            exclusive=True,
        )

    async def _check_and_ask(self, prepared: PreparedAction) -> None:
        try:
            assert self.view is not None  # it was planned on one
            measured = await measure(prepared, self.view, self.confirm_above)
        except NsqctlError as exc:
            self.notify(cli_message(exc), severity="error", timeout=8)
            return
        self._ask(measured)

    def _ask(self, prepared: PreparedAction) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._run(prepared), name=f"action-{prepared.action}")
            elif prepared.ask.answer == "name":
                self.notify(
                    "aborted: the topic name was not typed back; nothing was changed",
                    severity="warning",
                )

        question = prepared.dialog_text()
        if prepared.ask.answer == "name":
            self.push_screen(TypeNameScreen(question, prepared.ask), answered)
        else:
            self.push_screen(ConfirmScreen(f"{question}\n{prepared.ask.prompt} (y/N)"), answered)

    async def _run(self, prepared: PreparedAction) -> None:
        try:
            assert self.view is not None  # it was planned on one
            count = await send(prepared, self.view)
        except NsqctlError as exc:
            self.notify(cli_message(exc), severity="error", timeout=8)
        else:
            self.notify(f"{prepared.what}: done on {count} nsqd")
        self._wake.set()

    def action_toggle_channel_pause(self) -> None:
        topic, channel = self._target()
        ch = topic.channel(channel) if topic and channel else None
        if topic is None or ch is None:
            self.notify("select a channel first (open a topic)", severity="warning")
            return
        self._confirm_and_run("unpause" if ch.paused else "pause", topic, ch.name)

    def action_empty_channel(self) -> None:
        topic, channel = self._target()
        if topic is None or channel is None:
            self.notify("select a channel first (open a topic)", severity="warning")
            return
        self._confirm_and_run("empty", topic, channel)

    def action_toggle_topic_pause(self) -> None:
        topic, _ = self._target()
        if topic is None:
            self.notify("select a topic first", severity="warning")
            return
        self._confirm_and_run("unpause" if topic.paused else "pause", topic, None)
