"""One nsqd's screen: its totals (the node screen's row for it) and every topic copy or
partition it holds, from the view the app's poll produced; enter opens a topic's screen.

Reached with enter on an nsqd (the main screen's nodes table, the node screen) or the ``:``
command line. It asks for nothing the poll does not already fetch. ``d`` drains the nsqd
and ``u`` restores it, as ``nsqctl node drain|restore`` do (:mod:`nsqctl.tui.drainaction`),
``c`` cancels a drain running here; the job's progress shows under the totals, and goes on
when the screen is left (the app reports its end).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static

from nsqctl.admin.drain.records import read_drains
from nsqctl.admin.drain.run import DrainPlan
from nsqctl.errors import NsqctlError
from nsqctl.stats.coverage import not_seen_words
from nsqctl.stats.model import NodeStats, TopicPartitionStats
from nsqctl.stats.parse import node_id_key
from nsqctl.stats.view import ClusterView
from nsqctl.tui import drainaction, hotrows
from nsqctl.tui.events import PartitionTracker
from nsqctl.tui.format import num
from nsqctl.tui.host import ActionHost, host_of, lookupds, refused
from nsqctl.tui.modals import ConfirmScreen, NoticeScreen
from nsqctl.tui.nodejobs import NodeJob
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


def placed_rows(view: ClusterView, address: str) -> list[Row]:
    """What the rest of the cluster places on an nsqd that does not answer, its numbers
    unknown: a redesign partition whose ISR or catch-up list (from the partition's leader)
    lists it; an original topic no answering nsqd holds, on it (see
    :attr:`nsqctl.stats.view.TopicView.held_by`). A partition's leader is only ever an nsqd
    that answered (its ``is_leader`` row), so no leadership of this one can be shown."""
    found: list[Row] = []
    for t in view.topics:
        if t.not_seen and address in t.held_by:
            seen = str(len(t.unseen_channels)) if t.unseen_channels else "?"
            words = not_seen_words(t.held_by, t.held_by_guessed, t.unregistered)
            found.append((f"{t.name}#-", (t.name, "-", "-", "?", "?", seen, words)))
            continue
        for p in t.partitions if t.is_redesign else ():
            if address in (p.isr or ()):
                where = "in its ISR"
            elif address in (p.catchup or ()):
                where = "in its catch-up list"
            else:
                continue
            found.append((f"{t.name}#{p.label}", (t.name, p.label, "no", "?", "?", "?", where)))
    return found


def unmatched_node_ids(view: ClusterView) -> list[str]:
    """The ISR and catch-up members still named by a youzan node id: the poller turns a node
    id into an HTTP address only for an nsqd whose TCP address it learnt (nsqlookupd lists
    it, or it answered ``/info``), so an nsqd down since the poll began stays an id."""
    named = {
        n
        for t in view.topics
        if t.is_redesign
        for p in t.partitions
        for n in (*(p.isr or ()), *(p.catchup or ()))
    }
    return sorted(n for n in named if node_id_key(n) is not None)


def unknown_holdings_title(view: ClusterView, address: str, placed: bool) -> str:
    """The title over what a down nsqd holds: unknown, and where the rows come from
    (``placed``: :func:`placed_rows` found some). ISR members not matched to an nsqd may be
    this one, so then "places no topic on it" would be false: the ids are named instead. A
    redesign partition's ISR is asked only while its topic is open, so a copy in the
    others' ISRs cannot be shown: said."""
    unmatched = unmatched_node_ids(view)
    maybe = (
        f"nsqds by node id that could not be matched ({', '.join(unmatched)}): one may be this one"
        if unmatched
        else ""
    )
    if placed:
        others = "below, what the rest of the cluster places on it"
        others += f"; ISRs also name {maybe}" if maybe else ""
    else:
        others = f"ISRs name {maybe}" if maybe else "the rest of the cluster places no topic on it"
    if any(p.isr is None for t in view.topics if t.is_redesign for p in t.partitions):
        others += " (ISRs are asked only for an open topic: its copies in others are not shown)"
    return f"held by nsqd {address}: unknown, it does not answer; {others}"


class NsqdScreen(ViewScreen):
    """One nsqd: its totals, then what it holds; enter on a row opens that topic."""

    CSS_PATH = "hotscreens.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "back"),
        Binding("d", "drain", "drain"),
        Binding("u", "restore", "restore"),
        Binding("c", "cancel_job", "cancel drain"),
    ]

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
        yield Static(id="node-job")
        yield Static(f"held by nsqd {self.address}", id="held-title", classes="section")
        yield RowTable(*NSQD_TOPIC_COLUMNS, id="nsqd-topics")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#nsqd-topics", RowTable).focus()
        self.show_job()
        self.set_interval(0.5, self.show_job)

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
        title = self.query_one("#held-title", Static)
        listed = nsqd_topic_rows(node)
        if node.state == "down":  # what it holds is unknown: say so, and what others say
            listed = placed_rows(view, self.address)
            title.update(unknown_holdings_title(view, self.address, bool(listed)))
        else:
            title.update(f"held by nsqd {self.address}")
        totals = self.query_one("#node-totals-one", RowTable)
        totals.set_columns(hotrows.node_summary_columns(view))
        drains = self.drain_states() if self.drain_states else None
        rows = hotrows.node_summary_rows(view, drains)
        totals.set_rows([r for r in rows if r[0] == self.address])
        self._topics = {key: cells[0] for key, cells in listed if isinstance(cells[0], str)}
        topics.set_rows(listed)

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        topic = self._topics.get(event.row_key)
        if event.table.id == "nsqd-topics" and topic is not None:
            self.app.push_screen(TopicScreen(topic, self.tracker))

    # ------------------------------------------------------------- drain / restore

    @property
    def host(self) -> ActionHost | None:
        return host_of(self.app)

    def job(self) -> NodeJob | None:
        host = self.host
        return host.node_jobs.get(self.address) if host is not None else None

    def show_job(self) -> None:
        """The drain or restore of this nsqd started here: its progress while it runs,
        the last lines it said, then how it ended."""
        box = self.query_one("#node-job", Static)
        job = self.job()
        box.set_class(job is not None, "visible")
        if job is None:
            return
        progress, lines, outcome = job.snapshot()
        text = Text()
        state = "running" if job.running else ("failed" if job.failed else "done")
        text.append(f"{job.kind} of {self.address}: {state}", style="bold")
        if progress:
            text.append(f"\n{progress}")
        for line in lines:
            text.append(f"\n  {line}", style="dim")
        if outcome:
            text.append(f"\n{outcome}", style="bold red" if job.failed else "bold green")
        box.update(text)

    def action_drain(self) -> None:
        host = self.host
        if refused(self.app, host, f"drain nsqd {self.address}") or host is None:
            return
        if host.node_jobs.running(self.address) is not None:
            busy = f"a job on {self.address} runs already: c cancels it"
            self.app.notify(busy, severity="warning")
            return
        self.run_worker(self._plan_drain(host), group="plan-drain", exclusive=True)

    async def _plan_drain(self, host: ActionHost) -> None:
        try:
            plan = await drainaction.plan_in_thread(lookupds(host), self.address)
        except NsqctlError as exc:
            self.app.notify(f"drain {self.address}: {exc}", severity="error", timeout=10)
            return
        if plan.blocked:  # refused as the CLI refuses it: nothing to answer
            self.app.push_screen(NoticeScreen(drainaction.refused_text(plan)))
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._start_drain(host, plan)

        self.app.push_screen(ConfirmScreen(drainaction.drain_question(plan)), answered)

    def _start_drain(self, host: ActionHost, plan: DrainPlan) -> None:
        if host.node_jobs.running(self.address) is not None:
            return  # a second yes on a stale dialog
        job = NodeJob("drain", self.address)
        cancelled = drainaction.drain_cancelled(self.address)
        host.node_jobs.start(self.app, job, drainaction.drain_work(plan), cancelled)
        self.show_job()

    def action_restore(self) -> None:
        host = self.host
        if refused(self.app, host, f"restore nsqd {self.address}") or host is None:
            return
        running = host.node_jobs.running(self.address)
        if running is not None and running.kind == "restore":
            self.app.notify(f"a restore of {self.address} runs already", severity="warning")
            return
        record = read_drains().get(self.address)
        if record is None:
            self.app.notify(
                f"no drain of {self.address} is recorded on this machine: nothing to restore",
                severity="warning",
            )
            return

        def answered(yes: bool | None) -> None:
            drain = host.node_jobs.running(self.address)
            if not yes or (drain is not None and drain.kind == "restore"):
                return
            job = NodeJob("restore", self.address)
            work = drainaction.restore_work(lookupds(host), self.address, drain)
            host.node_jobs.start(
                self.app, job, work, f"the restore of {self.address} was cancelled"
            )
            self.show_job()

        self.app.push_screen(ConfirmScreen(drainaction.restore_question(record)), answered)

    def action_cancel_job(self) -> None:
        job = self.job()
        if job is None or not job.running:
            self.app.notify(f"no drain or restore of {self.address} runs here", severity="warning")
            return
        job.cancel()
        self.app.notify(f"cancelling the {job.kind} of {self.address}…")
