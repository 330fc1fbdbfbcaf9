"""Model → table rows. Pure, so what a screen shows is decided here and nowhere else."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text

from nsqctl.cli.wording import cli_words
from nsqctl.stats.coverage import guessed_where, not_seen_words
from nsqctl.stats.rules import Severity
from nsqctl.stats.view import (
    ChannelView,
    ClusterView,
    NodeView,
    PartitionView,
    TopicView,
    deleted_words,
    isr_short,
)
from nsqctl.tui.events import PartitionChange, PartitionTracker
from nsqctl.tui.format import (
    SEVERITY_STYLE,
    STATE_STYLE,
    age,
    num,
    per_sec,
    severity_text,
    size,
    styled,
    trend_cell,
)
from nsqctl.tui.tables import Cell, Row

NODE_COLUMNS = ("nsqd", "version", "state", "health", "topics", "partitions", "leaders", "ms", "")
ORIGINAL_NODE_COLUMNS = (*NODE_COLUMNS[:5], "channels", "clients", *NODE_COLUMNS[7:])
"""The original family has no partitions or leaders: an nsqd holds whole topics."""
TOPIC_COLUMNS = (
    "topic",
    "parts",
    "depth",
    "depth trend",
    "msgs",
    "msg/s",
    "rate trend",
    "channels",
    "flags",
)
PARTITION_COLUMNS = (
    "part",
    "leader",
    "replicas",
    "isr",
    "catch-up",
    "write",
    "depth",
    "stored",
    "msgs",
    "msg/s",
)
CHANNEL_COLUMNS = (
    "channel",
    "depth",
    "depth size",
    "depth trend",
    "in-flight",
    "deferred",
    "requeued",
    "timed out",
    "msgs",
    "msg/s",
    "rate trend",
    "clients",
    "rdy",
    "state",
)
PENDING = "…"
"""ISR / catch-up not fetched yet: the poller asks for them once a topic is in focus; the
same for RDY, asked (with the clients) for the topic on screen."""
CLIENTS_NOTE = "consumers' RDY (starved/stalled) checked in an open topic and on hot spots (h)"
"""Said over the topics list while some topics were polled without their clients."""
CLIENT_COLUMNS = (
    "client",
    "host",
    "remote",
    "part",
    "nsqd",
    "rdy",
    "in-flight",
    "finished",
    "fin/s",
    "requeued",
    "timed out",
    "connected",
    "user agent",
    "flags",
    "state",
)

SORTS: dict[str, Callable[[TopicView], object]] = {
    "name": lambda t: t.name,
    "depth": lambda t: -t.depth,
    "rate": lambda t: -(t.rate or 0.0),
    "channels": lambda t: -len(t.channels),
}


def node_columns(view: ClusterView) -> tuple[str, ...]:
    """The nodes table's header in the family's words."""
    return NODE_COLUMNS if view.is_redesign else ORIGINAL_NODE_COLUMNS


def topic_columns(view: ClusterView) -> tuple[str, ...]:
    """The topics table's header: an original topic's copies are its nsqds, not parts."""
    return TOPIC_COLUMNS if view.is_redesign else ("topic", "nsqds", *TOPIC_COLUMNS[2:])


def partition_columns(topic: TopicView) -> tuple[str, ...]:
    """The topic screen's per-copy table: an original topic's rows are its nsqds."""
    return PARTITION_COLUMNS if topic.is_redesign else ("part", "nsqd", *PARTITION_COLUMNS[2:])


def copies_text(topic: TopicView) -> str:
    """How many partitions (redesign) or nsqds (original) hold the topic, in words."""
    if topic.is_redesign:
        return f"{len(topic.partitions)} partition(s)"
    return f"on {len(topic.partitions)} nsqd(s)"


def node_rows(view: ClusterView) -> list[Row]:
    redesign = view.is_redesign

    def row(n: NodeView) -> Row:
        s = n.stats
        down = s.state == "down"
        if redesign:
            middle = (str(n.partition_count), str(n.leader_count))
        else:
            channels = [c for t in s.topics for c in t.channels]
            middle = (str(len(channels)), str(sum(c.client_count for c in channels)))
        return (
            s.address,
            [
                Text(s.address, style=SEVERITY_STYLE[n.severity]),
                s.version or "-",
                styled(s.state, STATE_STYLE[s.state]),
                "-" if down else s.health,
                "-" if down else str(n.topic_count),
                "-" if down else middle[0],
                "-" if down else middle[1],
                "-" if down else f"{s.elapsed * 1000:.0f}",
                styled(s.error, "red") if s.error else "",
            ],
        )

    return [row(n) for n in view.nodes]


def lookupd_line(view: ClusterView) -> Text:
    """One line: every lookupd with its state, the leader marked, and cluster stability."""
    line = Text("lookupd ")
    if not view.lookupds:
        line.append("none (nsqd addresses given directly)", style="dim")
    for lk in view.lookupds:
        style = "green" if lk.ok else "bold red"
        if lk.ok and lk.etcd_error:
            style = "bold yellow"
        line.append(lk.address + (" (leader)" if lk.is_leader else ""), style=style)
        state = " up" if lk.ok else " DOWN"
        if lk.ok and lk.etcd_error:
            state = " up, NO ETCD (topology as it last knew it)"
        line.append(state + "  ", style=style)
    if view.cluster is not None:
        stable = view.cluster.stable
        line.append("cluster ", style="")
        line.append("stable" if stable else "UNSTABLE", style="green" if stable else "bold red")
    return line


def summary_line(view: ClusterView) -> Text:
    family = "redesign (partitioned)" if view.is_redesign else "original"
    up = sum(1 for n in view.nodes if n.stats.state != "down")
    text = Text(f"{family} · {up}/{len(view.nodes)} nsqd up · {len(view.topics)} topics")
    leaderless = sum(t.leaderless for t in view.topics if t.is_redesign and not t.deleted)
    if leaderless:
        text.append(f" · {leaderless} partitions without leader", style="bold red")
    deleted = sum(1 for t in view.topics if t.deleted)
    if deleted:
        text.append(
            f" · {deleted} deleted topics still held by an nsqd (nsqctl topic delete removes them)",
            style="bold yellow",
        )
    if view.nodes_down:
        text.append(f" · {view.nodes_down} nsqd down", style="bold red")
    not_seen = sum(1 for t in view.topics if t.not_seen and not t.unregistered)
    if not_seen:
        text.append(f" · {not_seen} topics not seen (their nsqds are down)", style="bold red")
    guessed = sum(1 for t in view.topics if t.unregistered)
    if guessed:
        text.append(
            f" · {guessed} topics not seen ({guessed_where('an nsqd')})",
            style="bold yellow",
        )
    for err in view.errors:
        text.append(f" · {err}", style="red")
    return text


def clients_note(view: ClusterView) -> str:
    """:data:`CLIENTS_NOTE` when the topics' severity lacks the RDY rules for some of them."""
    return "" if all(t.clients_listed for t in view.topics) else CLIENTS_NOTE


def topic_flags(t: TopicView) -> str:
    if t.not_seen:
        return not_seen_words(t.held_by, t.held_by_guessed, t.unregistered)
    flags = []
    if t.ordered:
        flags.append("ordered")
    if t.ext:
        flags.append("ext")
    if t.paused:
        flags.append("PAUSED")
    if t.deleted:  # its copies have no leader by design (deleted_note says more)
        flags.append("DELETED")
    elif t.leaderless:
        flags.append(f"NO LEADER×{t.leaderless}")
    if t.out_of_sync:
        flags.append(f"out of ISR×{t.out_of_sync}")
    if t.short_of_isr:
        flags.append(f"ISR short×{t.short_of_isr}")
    if t.depth_growing:
        flags.append("growing")
    return " ".join(flags)


def matches(name: str, filter_text: str) -> bool:
    """The ``/`` filter: a case-insensitive substring of the name."""
    return filter_text.lower() in name.lower()


def topic_rows(view: ClusterView, filter_text: str = "", sort: str = "name") -> list[Row]:
    topics = [t for t in view.topics if matches(t.name, filter_text)]
    topics.sort(key=SORTS[sort])  # type: ignore[arg-type]
    return [_not_seen_row(t) if t.not_seen else _topic_row(t) for t in topics]


def _not_seen_row(t: TopicView) -> Row:
    """A topic no answering nsqd holds: its nsqds and channels as far as known, its
    numbers unknown."""
    return (
        t.name,
        [
            severity_text(t.name, t.severity),
            "?" if t.held_by_guessed else str(len(t.held_by)),
            "?",
            trend_cell(t.depth_trend),
            "?",
            "?",
            trend_cell(t.rate_trend),
            str(len(t.unseen_channels)) if t.unseen_channels else "?",
            severity_text(topic_flags(t), t.severity),
        ],
    )


def deleted_note(t: TopicView) -> str:
    """The topic screen's line for a deleted topic's data an nsqd still holds: what it is
    and the command that removes it, as ``check`` and ``stat`` say it."""
    return cli_words(deleted_words(t))


def not_seen_summary(t: TopicView) -> str:
    """The topic screen's line for a topic no answering nsqd holds."""
    known = ", ".join(t.unseen_channels) or "unknown"
    return (
        f"topic {t.name} · {topic_flags(t)} · its numbers are unknown until one of its "
        f"nsqds answers · channels: {known}"
    )


def _topic_row(t: TopicView) -> Row:
    return (
        t.name,
        [
            severity_text(t.name, t.severity),
            str(len(t.partitions)),
            severity_text(num(t.depth), "warn" if t.depth_growing else "ok"),
            trend_cell(t.depth_trend),
            num(t.messages),
            per_sec(t.rate),
            trend_cell(t.rate_trend),
            str(len(t.channels)),
            severity_text(topic_flags(t), t.severity),
        ],
    )


def _nodes(nodes: tuple[str, ...] | None, redesign: bool) -> str:
    """A node list cell: pending until asked (redesign only), ``-`` when empty."""
    if nodes is None:
        return PENDING if redesign else "-"
    return ", ".join(nodes) or "-"


def _catchup(p: PartitionView, redesign: bool) -> Cell:
    """Catch-up nodes with how far each has come (its messages of the leader's)."""
    if not p.catchup:
        return _nodes(p.catchup, redesign)
    counts = dict(p.holder_messages)
    lead = counts.get(p.leader or "", p.messages)
    parts = []
    for node in p.catchup:
        have = counts.get(node)
        parts.append(node if have is None else f"{node} {num(have)}/{num(lead)}")
    return styled(", ".join(parts), "bold cyan")


def partition_rows(
    topic: TopicView, tracker: PartitionTracker | None = None, now: float = 0.0
) -> list[Row]:
    """One row per partition; with ``tracker``, a recently changed leader and a recently
    shrunk ISR are marked (reverse video) for :data:`nsqctl.tui.events.HIGHLIGHT_SECONDS`."""
    rows: list[Row] = []
    for p in topic.partitions:
        isr = _nodes(p.isr, topic.is_redesign)
        moved = tracker is not None and tracker.leader_changed(topic.name, p.partition, now)
        shrunk = tracker is not None and tracker.isr_shrunk(topic.name, p.partition, now)
        leader: Cell = p.leader or styled(
            "NO LEADER" if p.live else "NO LEADER (no live copy)", "bold red"
        )
        if topic.deleted and not p.leader:  # none by design: data left behind
            leader = styled("none (topic deleted)", "bold yellow")
        if moved and p.leader:
            leader = styled(p.leader, "bold reverse green")
        short = isr_short(p, topic.replicas_configured)
        if short:
            isr += f" (short: {len(p.isr or ())} of {topic.replicas_configured})"
        isr_cell: Cell = styled(isr, "bold yellow") if p.out_of_sync or short else isr
        if shrunk:
            isr_cell = styled(isr, "bold reverse yellow")
        rows.append(
            (
                f"{p.label}@{p.leader or ','.join(p.replicas)}",
                [
                    p.label,
                    leader,
                    ", ".join(p.replicas) or "-",
                    isr_cell,
                    _catchup(p, topic.is_redesign),
                    "yes" if p.write_enabled else styled("no", "bold red"),
                    num(p.depth) if p.live else "?",
                    size(p.stored_bytes),
                    num(p.messages) if p.live else "?",
                    per_sec(p.rate),
                ],
            )
        )
    return rows


def event_lines(events: list[PartitionChange]) -> Text:
    """The recent partition events, newest last, one per line."""
    text = Text()
    for i, event in enumerate(events):
        style = "bold red" if event.kind == "no-leader" else "bold yellow"
        if event.kind in ("isr-joined", "catch-up"):
            style = "cyan"
        text.append(("\n" if i else "") + event.line(), style=style)
    return text


def channel_state(c: ChannelView) -> str:
    parts = []
    if c.paused:
        parts.append("PAUSED")
    if c.skipped:
        parts.append("SKIPPED")
    if c.stalled:
        parts.append("STALLED")
    if c.starved:
        parts.append("starved")
    if c.no_consumers:
        parts.append("no consumers")
    if c.depth_growing:
        parts.append("growing")
    if c.timeout_delta:
        parts.append(f"+{c.timeout_delta} timeouts")
    return " ".join(parts) or "ok"


def channel_rows(topic: TopicView, filter_text: str = "") -> list[Row]:
    return [
        (
            c.name,
            [
                severity_text(c.name, c.severity),
                num(c.depth),
                size(c.depth_bytes),
                trend_cell(c.depth_trend),
                num(c.in_flight),
                num(c.deferred),
                num(c.requeued),
                severity_text(num(c.timed_out), "warn" if c.timeout_delta else "ok"),
                num(c.messages),
                per_sec(c.msg_rate),
                trend_cell(c.rate_trend),
                str(c.client_count),
                PENDING if c.ready is None else str(c.ready),
                severity_text(channel_state(c), c.severity),
            ],
        )
        for c in topic.channels
        if matches(c.name, filter_text)
    ]


def client_rows(channel: ChannelView, now: float) -> list[Row]:
    rows: list[Row] = []
    for cv in channel.clients:
        s = cv.stats
        flags = " ".join(
            f for f, on in (("tls", s.tls), ("snappy", s.snappy), ("deflate", s.deflate)) if on
        )
        state = "STALLED" if cv.stalled else "starved" if cv.starved else "ok"
        sev: Severity = "crit" if cv.stalled else "warn" if cv.starved else "ok"
        rows.append(
            (
                f"{cv.node}/{cv.partition}/{s.remote_address}",
                [
                    s.client_id,
                    s.hostname,
                    s.remote_address,
                    "-" if cv.partition is None else str(cv.partition),
                    cv.node,
                    str(s.ready_count),
                    str(s.in_flight_count),
                    num(s.finish_count),
                    per_sec(cv.finish_rate),
                    num(s.requeue_count),
                    "-" if s.timeout_count is None else num(s.timeout_count),
                    age(now - s.connect_ts) if s.connect_ts else "-",
                    s.user_agent,
                    flags or "-",
                    severity_text(state, sev),
                ],
            )
        )
    return rows
