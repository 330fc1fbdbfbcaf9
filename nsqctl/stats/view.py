"""From one (or two consecutive) :class:`ClusterSnapshot` to what an operator reads.

A topic is shown as partitions: one per redesign partition (leader's numbers, replicas
listed) or one per nsqd on the original family. Channel and client numbers are summed over
the partitions' leaders only, since redesign replicas repeat the leader's counters.

Depth here is always a message count: the channel depths plus, on the original family,
messages still held at topic level. On the redesign a channel's depth counts every message
not yet confirmed (in-flight ones too) and its bytes come as ``depth_bytes``; a partition's
own ``depth`` there is a byte offset, shown only as the bytes it stores (``stored_bytes``).

Replicas are the nsqds holding a partition besides its leader (from their ``/stats``); ISR
and catch-up come from ``/coordinator/stats``, which the poller asks only for the topics in
focus: ``None`` means not asked, ``()`` asked and empty.

A redesign topic's partitions are the ones its meta counts (nsqlookupd's partition count,
:func:`nsqctl.lookup.topology.counted_partitions`), not only those some nsqd reported: a
partition whose every copy is on an nsqd that is down is listed with no leader and
``live`` False (its counters unknown), so it is flagged instead of vanishing; with no meta
(no nsqlookupd answered), the partitions such an nsqd held when it last answered are
(the snapshot's ``unseen_partitions``). An original
topic whose every nsqd is down is kept the same way (the snapshot's ``unseen_topics``): a
topic with ``not_seen`` True, no copy, counters unknown, naming the nsqds that hold it
(``held_by``) and its channels as far as known (``unseen_channels``).

A redesign topic nsqlookupd answered as not found while an nsqd still holds a copy (the
snapshot's ``deleted_topics``) is ``deleted``: data a deleted topic left behind, whose
partitions have no leader by design, so a warning rather than an outage.

Per-client views are built only when read (:attr:`ChannelView.clients`): a poll of a big
cluster carries tens of thousands of connections, the dashboard shows one channel's.

A channel polled without its clients (the dashboard asks for the shown topic's only) keeps
its client count but not their RDY: its ``ready`` is None, ``clients_listed`` False, and
the rules that need RDY (starved, stalled) are not applied to it, so they do not raise its
severity either.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter, itemgetter

import msgspec

from nsqctl.lookup.topology import TopicMeta, counted_partitions
from nsqctl.stats.gcpause import gc_paused
from nsqctl.stats.history import EMPTY_DEPTH, EMPTY_RATE, History, Series
from nsqctl.stats.model import (
    ChannelStats,
    ClientStats,
    ClusterSnapshot,
    ClusterStability,
    CoordInfo,
    LookupdStatus,
    NodeState,
    NodeStats,
    TopicPartitionStats,
    UnseenTopic,
)
from nsqctl.stats.parse import LazyClients, client_totals
from nsqctl.stats.rules import (
    Severity,
    delta,
    is_growing,
    is_stalled,
    is_starved,
    rate,
    worst,
)


@dataclass(slots=True)
class ClientView:
    stats: ClientStats
    node: str
    partition: int | None
    starved: bool
    stalled: bool
    finish_rate: float | None


@dataclass(slots=True)
class ChannelPartView:
    """The channel on one partition (one nsqd on the original family).

    ``previous`` (the same channel one poll earlier) and ``dt`` are kept for the clients'
    finish rates, computed only if someone reads :attr:`ChannelView.clients`.
    """

    node: str
    partition: int | None
    stats: ChannelStats
    msg_rate: float | None
    timeout_delta: int | None
    requeue_delta: int | None
    previous: ChannelStats | None = None
    dt: float = 0.0

    def client_views(self) -> list[ClientView]:
        ch = self.stats
        before: dict[str, int] = (
            {c.remote_address: c.finish_count for c in self.previous.clients}
            if self.previous is not None
            else {}
        )
        return [
            ClientView(
                stats=cl,
                node=self.node,
                partition=self.partition,
                starved=is_starved(cl.ready_count, cl.in_flight_count),
                stalled=is_stalled(cl.ready_count, ch.depth),
                finish_rate=rate(cl.finish_count, before.get(cl.remote_address), self.dt),
            )
            for cl in ch.clients
        ]


@dataclass(frozen=True)
class ChannelView:
    topic: str
    name: str
    depth: int
    in_flight: int
    deferred: int
    requeued: int
    timed_out: int
    messages: int
    client_count: int
    ready: int | None  # None: polled without its clients (see clients_listed)
    paused: bool
    skipped: bool
    depth_bytes: int | None
    msg_rate: float | None
    requeue_delta: int | None
    timeout_delta: int | None
    starved: bool
    stalled: bool
    no_consumers: bool
    depth_growing: bool
    severity: Severity
    depth_history: tuple[float, ...] = ()
    rate_history: tuple[float, ...] = ()
    """The known samples of :attr:`depth_trend` and :attr:`rate_trend` (gaps left out)."""
    depth_trend: Series = EMPTY_DEPTH
    rate_trend: Series = EMPTY_RATE
    """The session's window of depth and rate, with its poll times and gaps."""
    clients_listed: bool = True
    """Every partition's nsqd listed the clients: ``ready``, ``starved`` and ``stalled``
    are known (False: ``ready`` is None, the two flags are False for want of data)."""
    requeue_rate: float | None = None
    timeout_rate: float | None = None
    """Per second, summed over the partitions (None: no partition's rate is known)."""
    interval: float = 0.0
    """Seconds between the last two polls (the partitions' mean: each nsqd is timed apart;
    0 when no partition was polled before)."""
    previous_depth: int | None = None
    """The depth one poll earlier, when every partition was polled then."""
    sources: tuple[tuple[_Copy, ChannelStats], ...] = field(default=(), repr=False, compare=False)
    """What :attr:`parts` is built from: a big topic has thousands of partitions, most
    screens read only the totals."""

    @cached_property
    def parts(self) -> tuple[ChannelPartView, ...]:
        """The channel on each partition, built on first read."""
        return tuple([_part_view(copy, ch) for copy, ch in self.sources])

    @cached_property
    def clients(self) -> tuple[ClientView, ...]:
        """Every connection on every partition, built on first read."""
        views = [cv for part in self.parts for cv in part.client_views()]
        views.sort(key=lambda c: (c.partition or 0, c.node, c.stats.remote_address))
        return tuple(views)


class PartitionView(msgspec.Struct, gc=False):
    """One partition (one nsqd's copy of the topic on the original family).

    A msgspec record, not frozen: a big cluster has tens of thousands per poll, and
    msgspec builds one in C (a frozen dataclass costs several times a plain one, a slots
    dataclass about three times msgspec's). Treat it as read-only.

    ``leader`` is the nsqd whose copy takes writes (youzan reports ``is_leader`` as "writes
    enabled"), so a partition nsqlookupd has not enabled yet shows no leader.
    """

    topic: str
    partition: int | None
    leader: str | None
    replicas: tuple[str, ...]
    isr: tuple[str, ...] | None
    catchup: tuple[str, ...] | None
    write_enabled: bool
    depth: int
    stored_bytes: int | None
    messages: int
    rate: float | None
    paused: bool
    channels: tuple[ChannelStats, ...]
    holder_messages: tuple[tuple[str, int], ...] = ()
    """``(nsqd, message_count)`` of every copy: how far a catching-up replica has come."""
    live: bool = True
    """A copy was seen on an nsqd that answered. False: the topic's meta counts the
    partition but every nsqd holding it is down or not answering, so nothing about it is
    known (its counters read 0) but that it has no leader."""
    listed_leader: str | None = None
    """With no leader seen: the nsqd nsqlookupd lists as its leader, if any (one that
    does not answer, or not enabled for writes yet)."""

    @property
    def no_leader(self) -> bool:
        return self.leader is None

    @property
    def copies(self) -> int:
        """Copies seen on nsqds that answered (leader and replicas)."""
        return (self.leader is not None) + len(self.replicas)

    @property
    def out_of_sync(self) -> tuple[str, ...]:
        """nsqds holding the partition that are not in its ISR (unknown ISR: none)."""
        if self.isr is None:
            return ()
        return tuple(n for n in (self.leader, *self.replicas) if n and n not in self.isr)

    @property
    def label(self) -> str:
        return "-" if self.partition is None else str(self.partition)


@dataclass(frozen=True)
class TopicView:
    name: str
    partitions: tuple[PartitionView, ...]
    channels: tuple[ChannelView, ...]
    depth: int
    messages: int
    rate: float | None
    ordered: bool
    ext: bool
    paused: bool
    is_redesign: bool
    depth_growing: bool
    severity: Severity
    depth_history: tuple[float, ...] = ()
    rate_history: tuple[float, ...] = ()
    """The known samples of :attr:`depth_trend` and :attr:`rate_trend` (gaps left out)."""
    depth_trend: Series = EMPTY_DEPTH
    rate_trend: Series = EMPTY_RATE
    """The session's window of depth and rate, with its poll times and gaps."""
    clients_listed: bool = True
    """Every channel's clients were listed, so its severity includes starved/stalled."""
    replicas_configured: int | None = None
    """Copies per partition the topic was created with (nsqlookupd's meta; None: unknown,
    and on the original family)."""
    not_seen: bool = False
    """Original family: the topic exists but no nsqd that answered this poll holds it
    (every nsqd holding it is down or not answering): its counters are unknown, not 0."""
    held_by: tuple[str, ...] = ()
    """With ``not_seen``: the nsqds that hold it, none of which answered (the nsqds that
    did not answer when nothing says which: see :class:`nsqctl.stats.model.UnseenTopic`)."""
    held_by_guessed: bool = False
    """``held_by`` are the nsqds that did not answer, one of which holds it."""
    unregistered: bool = False
    """With ``not_seen``: nsqlookupd lists it with no producer, so ``held_by`` is a guess
    and it may be a registration left behind, on no nsqd at all (see
    :class:`nsqctl.stats.model.UnseenTopic`); a warning, not an outage."""
    unseen_channels: tuple[str, ...] = ()
    """With ``not_seen``: its channels as far as known (their counters unknown too)."""
    deleted: bool = False
    """Redesign: nsqlookupd has no such topic (it answered not found: no meta); the copies
    here are data a deleted topic left behind on an nsqd that was down during the delete
    (the snapshot's ``deleted_topics``), none of them leading (a copy still leading is a
    delete under way, shown as it is). Its partitions have no leader, and never will: a
    warning, not an outage (:func:`deleted_words` says what removes them)."""

    @property
    def unseen(self) -> int:
        """Partitions no nsqd that answered holds a copy of (see :attr:`PartitionView.live`)."""
        return sum(1 for p in self.partitions if not p.live)

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every nsqd holding the topic (leaders and replicas): where admin calls go."""
        seen: dict[str, None] = {}
        for p in self.partitions:
            for n in (p.leader, *p.replicas):
                if n:
                    seen.setdefault(n, None)
        return tuple(seen)

    @property
    def leaderless(self) -> int:
        return sum(1 for p in self.partitions if p.no_leader)

    @property
    def out_of_sync(self) -> int:
        """Partitions with a copy outside the ISR that is no old copy (:func:`stale_copies`)
        (known only for topics in focus)."""
        replicas = self.replicas_configured
        return sum(1 for p in self.partitions if behind(p, replicas))

    @property
    def short_of_isr(self) -> int:
        """Partitions whose ISR is shorter than the replicas (see :func:`isr_short`)."""
        return sum(1 for p in self.partitions if isr_short(p, self.replicas_configured))

    def channel(self, name: str) -> ChannelView | None:
        return next((c for c in self.channels if c.name == name), None)


def deleted_words(topic: TopicView) -> str:
    """What a :attr:`TopicView.deleted` topic's copies are and what removes them, in the
    library's words (an action as `topic_delete(T)`: the CLI spells it as its command):
    every view that flags it says the same."""
    held: dict[str, list[str]] = {}
    for p in topic.partitions:
        for node in (p.leader, *p.replicas):
            if node:
                held.setdefault(node, []).append(p.label)
    where = " and ".join(
        f"{node} still holds partition{'s' if len(parts) > 1 else ''} {', '.join(parts)}"
        for node, parts in held.items()
    )
    return (
        f"topic {topic.name} was deleted (nsqlookupd has no meta for it) but "
        f"{where or 'an nsqd still holds it'}: `topic_delete({topic.name})` removes it"
    )


def isr_short(p: PartitionView, replicas: int | None) -> bool:
    """The partition's ISR (when asked) has fewer nsqds than the topic's ``replicas``: a
    copy is lost or behind, though every copy still seen may be in sync (a dead replica
    leaves the ISR and the nsqds' copies together)."""
    return p.isr is not None and replicas is not None and len(p.isr) < replicas


def stale_copies(p: PartitionView, replicas: int | None) -> tuple[str, ...]:
    """Copies beside a full ISR (``replicas`` in sync) in neither the ISR nor the catch-up
    list: what a move or a drain leaves on the nsqd it moved from. youzan's nsqd drops a
    partition "not related" to it (neither leader, ISR nor catch-up) when nsqlookupd next
    sends it the partition's meta, so such a copy is on its way out, not a replica behind.
    Beside a short ISR, a copy outside it is a replica it lacks, so none is stale."""
    if p.isr is None or p.catchup is None or replicas is None or len(p.isr) < replicas:
        return ()
    return tuple(n for n in p.out_of_sync if n not in p.catchup)


def behind(p: PartitionView, replicas: int | None) -> tuple[str, ...]:
    """The copies outside the ISR that are replicas (catching up or dropped), not old
    copies (:func:`stale_copies`)."""
    old = stale_copies(p, replicas)
    return tuple(n for n in p.out_of_sync if n not in old)


def stale_words(stale: Sequence[str]) -> str:
    """:func:`stale_copies` in the words every view uses: named, never warned about."""
    plural = "ies" if len(stale) > 1 else "y"
    return f"old cop{plural} on {', '.join(stale)}, removed by nsqlookupd later"


def isr_lacking(p: PartitionView, replicas: int | None) -> bool:
    """The partition lacks an in-sync copy it needs: its ISR (when asked) is shorter than
    the topic's ``replicas`` (:func:`isr_short`); with ``replicas`` unknown, a copy is
    outside the ISR. A full ISR beside a copy still catching up (a move under way) or an
    old copy a move left lacks nothing."""
    if p.isr is None:
        return False
    if replicas is None:
        return bool(p.out_of_sync)
    return len(p.isr) < replicas


@dataclass(frozen=True)
class NodeView:
    stats: NodeStats
    topic_count: int
    partition_count: int
    leader_count: int
    severity: Severity

    @property
    def address(self) -> str:
        return self.stats.address


@dataclass(frozen=True)
class ClusterView:
    taken_at: float
    nodes: tuple[NodeView, ...]
    lookupds: tuple[LookupdStatus, ...]
    topics: tuple[TopicView, ...]
    cluster: ClusterStability | None
    is_redesign: bool
    errors: tuple[str, ...] = ()

    def topic(self, name: str) -> TopicView | None:
        return next((t for t in self.topics if t.name == name), None)

    @property
    def nodes_down(self) -> int:
        return sum(1 for n in self.nodes if n.stats.state == "down")


# ------------------------------------------------------------------ previous-sample index

_Key = tuple[str, str, int | None]  # node, topic, partition


@dataclass
class _Prev:
    """Counters of the previous snapshot keyed for O(1) lookup: per topic copy its message
    count and its channels by name (one lookup per copy, not one per channel)."""

    fetched: dict[str, float]
    topic: dict[_Key, TopicPartitionStats]

    @classmethod
    def index(cls, snap: ClusterSnapshot | None, skip: set[str] | None = None) -> _Prev:
        """``skip``: nodes whose previous counters are not comparable (restarted)."""
        prev = cls({}, {})
        if snap is None:
            return prev
        for node in snap.nodes:
            if node.state == "down" or (skip and node.address in skip):
                continue
            prev.fetched[node.address] = node.fetched_at
            for t in node.topics:
                prev.topic[(node.address, t.topic, t.partition)] = t
        return prev


def _sum_opt(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


# ------------------------------------------------------------------ building


def _group_partitions(
    nodes: Iterable[NodeStats],
) -> dict[str, dict[tuple[int | None, str], list[TopicPartitionStats]]]:
    """topic → (partition, group key) → rows. Original: one group per nsqd (partition None)."""
    topics: dict[str, dict[tuple[int | None, str], list[TopicPartitionStats]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for node in nodes:
        if node.state == "down":
            continue
        for t in node.topics:
            group = "" if t.partition is not None else node.address
            topics[t.topic][(t.partition, group)].append(t)
    return topics


def _coord_info(
    reports: list[CoordInfo], leader: str | None, holders: Iterable[str]
) -> CoordInfo | None:
    """The leader's report when there is one (followers may lag behind it), else the one
    naming most ISR members, from a node that holds the partition if possible."""
    if not reports:
        return None
    by_node = {r.reported_by: r for r in reports}
    if leader in by_node:
        return by_node[leader]
    held = [by_node[h] for h in holders if h in by_node] or reports
    return max(held, key=lambda r: len(r.isr))


class _Copy(msgspec.Struct, gc=False):
    """The copy of a partition a view counts (its leader's) with what it is compared to."""

    stats: TopicPartitionStats
    dt: float  # seconds since the previous poll of its nsqd
    before: dict[str, ChannelStats]  # the previous poll's channels of the copy, by name


def _partition_view(
    rows: list[TopicPartitionStats],
    coord: dict[tuple[str, int], list[CoordInfo]],
    prev: _Prev,
    dts: dict[str, float],
) -> tuple[PartitionView, _Copy]:
    # one row per copy: a big cluster has tens of thousands of partitions, most with one
    # to three copies, so no generator is made for them
    leader_row = None
    for r in rows:
        if r.is_leader:
            leader_row = r
            break
    main = leader_row or rows[0]
    leader = leader_row.node if leader_row else None
    info = None
    if coord and main.partition is not None:
        reports = coord.get((main.topic, main.partition))
        if reports:
            info = _coord_info(reports, leader, [r.node for r in rows])
    key = (main.node, main.topic, main.partition)
    dt = dts.get(main.node, 0.0)
    before = prev.topic.get(key)
    depth = sum(map(_DEPTH, main.channels))
    if not main.depth_is_bytes:
        depth += main.depth
    if len(rows) == 1:  # the usual copy: one, its own leader (no list made for it)
        replicas: tuple[str, ...] = () if leader_row is not None else (main.node,)
        holders: tuple[tuple[str, int], ...] = ((main.node, main.message_count),)
    else:
        replicas = tuple([r.node for r in rows if r is not leader_row])
        holders = tuple([(r.node, r.message_count) for r in rows])
    # positional, in PartitionView's field order (tens of thousands per poll: see parse)
    view = PartitionView(
        main.topic,
        main.partition,
        leader,
        replicas,
        info.isr if info else None,
        info.catchup if info else None,
        leader_row is not None,  # write_enabled
        depth,
        max(0, main.depth - main.backend_start) if main.depth_is_bytes else None,
        main.message_count,
        rate(main.message_count, before.message_count, dt) if before is not None else None,
        main.paused,
        main.channels,
        holders,  # holder_messages
    )
    channels = {ch.name: ch for ch in before.channels} if before is not None else {}
    return view, _Copy(main, dt, channels)


def _unseen_partition(
    topic: str, partition: int, coord: dict[tuple[str, int], list[CoordInfo]]
) -> PartitionView:
    """A partition the meta counts that no nsqd which answered holds: no leader, no copy,
    counters unknown (0). The ISR a surviving nsqd reports for it is kept."""
    reports = coord.get((topic, partition))
    info = _coord_info(reports, None, ()) if reports else None
    return PartitionView(
        topic,
        partition,
        None,
        (),
        info.isr if info else None,
        info.catchup if info else None,
        False,
        0,
        None,
        0,
        None,
        False,
        (),
        live=False,
    )


def _changes(
    ch: ChannelStats, before: ChannelStats, dt: float
) -> tuple[float | None, int | None, int | None]:
    """A channel copy's message rate, requeue delta and timeout delta since ``before``."""
    return (
        rate(ch.message_count, before.message_count, dt),
        delta(ch.requeue_count, before.requeue_count),
        delta(ch.timeout_count, before.timeout_count),
    )


def _part_view(copy: _Copy, ch: ChannelStats) -> ChannelPartView:
    before = copy.before.get(ch.name)
    r = rd = td = None
    if before is not None:
        r, rd, td = _changes(ch, before, copy.dt)
    tp = copy.stats
    return ChannelPartView(tp.node, tp.partition, ch, r, td, rd, before, copy.dt)


_DEPTH = attrgetter("depth")
_LIVE = attrgetter("live")
_RATE = attrgetter("rate")
_LEADER = attrgetter("leader")
_MESSAGE_TOTAL = attrgetter("messages")
_CHANNEL = itemgetter(1)

# A channel of a big topic has a copy on each of thousands of partitions, tens of thousands
# a poll: each part of its view below is one plain loop over the copies keeping its sums
# in locals (quicker than a C pass per field: bench/README.md, Dashboard), and no
# per-partition view is made (see ChannelView.parts).


@dataclass(slots=True)
class _Totals:
    """A channel's counters summed over its copies."""

    depth: int
    in_flight: int
    deferred: int
    requeued: int
    timed_out: int
    messages: int
    counted: int  # the connections nsqd counts, listed or not
    paused: bool
    skipped: bool
    depth_bytes: int | None  # None when a copy does not report it

    @classmethod
    def of(cls, chs: Iterable[ChannelStats]) -> _Totals:
        depth = in_flight = deferred = requeued = timed_out = messages = counted = 0
        depth_bytes: int | None = 0
        paused = skipped = False
        for ch in chs:
            depth += ch.depth
            in_flight += ch.in_flight_count
            deferred += ch.deferred_count
            requeued += ch.requeue_count
            timed_out += ch.timeout_count
            messages += ch.message_count
            counted += ch.client_count
            if ch.paused:
                paused = True
            if ch.skipped:
                skipped = True
            if depth_bytes is not None:
                depth_bytes = None if ch.depth_bytes is None else depth_bytes + ch.depth_bytes
        return cls(
            depth,
            in_flight,
            deferred,
            requeued,
            timed_out,
            messages,
            counted,
            paused,
            skipped,
            depth_bytes,
        )


@dataclass(slots=True)
class _ClientTotals:
    """A channel's listed connections over its copies. RDY (``ready``) and ``stalled``
    need every copy's list (``all_listed``); a starved connection on one copy is one."""

    listed: int
    ready: int
    starved: bool
    all_listed: bool

    @classmethod
    def of(cls, chs: Iterable[ChannelStats]) -> _ClientTotals:
        listed = ready = 0
        starved = False
        all_listed = True
        for ch in chs:
            if not ch.clients_listed:
                all_listed = False
                continue
            clients = ch.clients
            # client_totals without its call (a copy per partition, tens of thousands)
            totals = clients.totals if type(clients) is LazyClients else client_totals(clients)
            listed += totals.listed
            ready += totals.ready
            if totals.starved:
                starved = True
        return cls(listed, ready, starved, all_listed)


@dataclass(slots=True)
class _Changes:
    """A channel's changes since the previous poll, summed over the copies polled then:
    :func:`rules.rate` and :func:`rules.delta` inlined (unknown without a previous poll
    or when a counter went back, an nsqd restarted: that copy is left out of the sum)."""

    msg_rate: float | None
    requeue_delta: int | None
    timeout_delta: int | None
    requeue_rate: float | None
    timeout_rate: float | None
    rates_known: bool
    """Every copy's message rate is known: their sum is the channel's rate, not a dip."""
    previous_depth: int | None  # None unless every copy was polled then
    interval: float  # the copies' mean seconds since their previous poll (0: none known)

    @classmethod
    def of(cls, name: str, parts: Iterable[tuple[_Copy, ChannelStats]]) -> _Changes:
        msg_rate: float | None = None
        req_delta: int | None = None
        to_delta: int | None = None
        req_rate: float | None = None
        to_rate: float | None = None
        before_depth: int | None = 0
        timed = 0
        dt_sum = 0.0
        rates_known = True
        for copy, ch in parts:
            before = copy.before.get(name)
            if before is None:
                before_depth = None
                rates_known = False
                continue
            dt = copy.dt
            if dt > 0:
                timed += 1
                dt_sum += dt
                count = ch.message_count - before.message_count
                if count >= 0:
                    msg_rate = count / dt if msg_rate is None else msg_rate + count / dt
                else:
                    rates_known = False
            else:
                rates_known = False
            rd = ch.requeue_count - before.requeue_count
            if rd >= 0:
                req_delta = rd if req_delta is None else req_delta + rd
                if dt > 0:
                    req_rate = rd / dt if req_rate is None else req_rate + rd / dt
            td = ch.timeout_count - before.timeout_count
            if td >= 0:
                to_delta = td if to_delta is None else to_delta + td
                if dt > 0:
                    to_rate = td / dt if to_rate is None else to_rate + td / dt
            if before_depth is not None:
                before_depth += before.depth
        return cls(
            msg_rate,
            req_delta,
            to_delta,
            req_rate,
            to_rate,
            rates_known,
            before_depth,
            dt_sum / timed if timed else 0.0,
        )


def _channel_view(
    topic: str,
    name: str,
    parts: list[tuple[_Copy, ChannelStats]],
    history: History | None,
    gap: bool = False,
) -> ChannelView:
    totals = _Totals.of(map(_CHANNEL, parts))
    changes = _Changes.of(name, parts)
    clients = _ClientTotals.of(map(_CHANNEL, parts))
    depth_trend, rate_trend = EMPTY_DEPTH, EMPTY_RATE
    if history is not None:
        # a rate summed over some partitions only would be a dip, not the channel's rate
        depth_trend, rate_trend = _record(
            history,
            ("channel", topic, name),
            None if gap else totals.depth,
            changes.msg_rate if changes.rates_known and not gap else None,
        )
    depth_hist = depth_trend.known()
    growing = is_growing(depth_hist)
    # RDY 0 (stalled) needs every partition's clients
    all_listed = clients.all_listed
    stalled = all_listed and clients.listed > 0 and is_stalled(clients.ready, totals.depth)
    client_count = max(totals.counted, clients.listed)
    no_consumers = client_count == 0 and totals.depth > 0
    warn = clients.starved or growing or no_consumers or (changes.timeout_delta or 0) > 0
    return ChannelView(
        topic=topic,
        name=name,
        depth=totals.depth,
        in_flight=totals.in_flight,
        deferred=totals.deferred,
        requeued=totals.requeued,
        timed_out=totals.timed_out,
        messages=totals.messages,
        client_count=client_count,
        ready=clients.ready if all_listed else None,
        paused=totals.paused,
        skipped=totals.skipped,
        depth_bytes=totals.depth_bytes,
        msg_rate=changes.msg_rate,
        requeue_delta=changes.requeue_delta,
        timeout_delta=changes.timeout_delta,
        starved=clients.starved,
        stalled=stalled,
        no_consumers=no_consumers,
        depth_growing=growing,
        severity=worst("crit" if stalled else "ok", "warn" if warn else "ok"),
        depth_history=depth_hist,
        rate_history=rate_trend.known(),
        depth_trend=depth_trend,
        rate_trend=rate_trend,
        clients_listed=all_listed,
        requeue_rate=changes.requeue_rate,
        timeout_rate=changes.timeout_rate,
        interval=changes.interval,
        previous_depth=changes.previous_depth if parts else None,
        sources=tuple(parts),
    )


def _record(
    history: History, key: tuple[str, ...], depth: float | None, msg_rate: float | None
) -> tuple[Series, Series]:
    """This poll's depth and rate samples of ``key`` (None: a gap) and the series so far."""
    return (
        history.record((*key, "depth"), depth, EMPTY_DEPTH.unit),
        history.record((*key, "rate"), msg_rate, EMPTY_RATE.unit),
    )


def _topic_view(
    name: str,
    groups: dict[tuple[int | None, str], list[TopicPartitionStats]],
    coord: dict[tuple[str, int], list[CoordInfo]],
    prev: _Prev,
    dts: dict[str, float],
    history: History | None,
    meta: TopicMeta | None = None,
    unanswered: bool = False,
    listed: Mapping[int, str] | None = None,
    remembered: tuple[int, ...] = (),
    deleted: bool = False,
) -> TopicView:
    """``unanswered``: an nsqd holding a copy of the topic did not answer this poll, so
    its totals are partial (a gap in the history, not a dip). ``remembered``: redesign
    partitions an nsqd now down held when it last answered (the snapshot's
    ``unseen_partitions``), listed with no live copy like those the meta counts.
    ``deleted``: see :attr:`TopicView.deleted`."""
    partitions: list[PartitionView] = []
    copies: list[_Copy] = []
    for gkey in sorted(groups, key=lambda k: (k[0] if k[0] is not None else -1, k[1])):
        pv, copy = _partition_view(groups[gkey], coord, prev, dts)
        partitions.append(pv)
        copies.append(copy)
    known = meta.partition_num if meta is not None and meta.valid else 0
    if known or remembered:
        seen = {p.partition for p in partitions if p.partition is not None}
        unseen = [p for p in counted_partitions(known, {*seen, *remembered}) if p not in seen]
        if unseen:
            partitions.extend(_unseen_partition(name, p, coord) for p in unseen)
            partitions.sort(key=lambda p: -1 if p.partition is None else p.partition)
    if listed:
        partitions = [
            msgspec.structs.replace(p, listed_leader=listed.get(p.partition))
            if p.leader is None and p.partition is not None
            else p
            for p in partitions
        ]
    mains = [c.stats for c in copies]
    by_channel: dict[str, list[tuple[_Copy, ChannelStats]]] = defaultdict(list)
    for copy in copies:
        for ch in copy.stats.channels:
            by_channel[ch.name].append((copy, ch))
    # a partition no answering nsqd holds reads 0: the totals lack it
    # (each pass over the partitions in C: a big topic has thousands)
    gap = unanswered or not all(map(_LIVE, partitions))
    channels = tuple(
        _channel_view(name, ch_name, by_channel[ch_name], history, gap)
        for ch_name in sorted(by_channel)
    )
    depth = sum(map(_DEPTH, partitions))
    rates = list(map(_RATE, partitions))
    topic_rate = _sum_opt(rates)
    depth_trend, rate_trend = EMPTY_DEPTH, EMPTY_RATE
    if history is not None:
        rates_known = None not in rates
        depth_trend, rate_trend = _record(
            history,
            ("topic", name),
            None if gap else depth,
            topic_rate if rates_known and not gap else None,
        )
    depth_hist = depth_trend.known()
    growing = is_growing(depth_hist)
    redesign = meta is not None or bool(remembered) or any(m.partition is not None for m in mains)
    replicas = meta.replica if meta is not None and meta.valid else None
    no_leader = None in map(_LEADER, partitions)  # PartitionView.no_leader
    # a copy still leading is a delete under way (nsqlookupd tells the nsqds after the
    # meta is gone): only copies nothing leads are left behind
    deleted = deleted and redesign and not any(map(_LEADER, partitions))
    # only a partition whose ISR was asked can lack an in-sync copy
    lacking = any(isr_lacking(p, replicas) for p in partitions if p.isr is not None)
    severity = worst(
        # a deleted topic's copies have no leader by design: data to remove, no outage
        ("warn" if deleted else "crit") if no_leader else "ok",
        *(c.severity for c in channels),
        "warn" if growing or lacking else "ok",
    )
    return TopicView(
        name=name,
        partitions=tuple(partitions),
        channels=channels,
        depth=depth,
        messages=sum(map(_MESSAGE_TOTAL, partitions)),
        rate=topic_rate,
        ordered=any(m.ordered for m in mains) or (meta is not None and meta.ordered),
        ext=any(m.ext for m in mains) or (meta is not None and meta.extend_support),
        paused=any(m.paused for m in mains),
        is_redesign=redesign,
        depth_growing=growing,
        severity=severity,
        depth_history=depth_hist,
        rate_history=rate_trend.known(),
        depth_trend=depth_trend,
        rate_trend=rate_trend,
        clients_listed=all(c.clients_listed for c in channels),
        replicas_configured=replicas,
        deleted=deleted,
    )


def _not_seen_topic(name: str, unseen: UnseenTopic) -> TopicView:
    """An original topic no answering nsqd holds: listed, flagged (crit, as a partition
    with no live copy is; warn when it may be a registration left behind), and nothing
    about its numbers guessed. Its history gets a gap, since
    :meth:`History.end` gives every series not recorded this poll one."""
    return TopicView(
        name=name,
        partitions=(),
        channels=(),
        depth=0,
        messages=0,
        rate=None,
        ordered=False,
        ext=False,
        paused=False,
        is_redesign=False,
        depth_growing=False,
        severity="warn" if unseen.unregistered else "crit",
        not_seen=True,
        held_by=unseen.holders,
        held_by_guessed=unseen.guessed,
        unregistered=unseen.unregistered,
        unseen_channels=unseen.channels,
    )


_NODE_SEVERITY: dict[NodeState, Severity] = {
    "up": "ok",
    "slow": "warn",
    "unhealthy": "warn",
    "down": "crit",
}


def _node_view(node: NodeStats) -> NodeView:
    severity = _NODE_SEVERITY[node.state]
    return NodeView(
        stats=node,
        topic_count=len({t.topic for t in node.topics}),
        partition_count=len(node.topics),
        leader_count=sum(1 for t in node.topics if t.is_leader),
        severity=severity,
    )


def _coord_index(infos: Iterable[CoordInfo]) -> dict[tuple[str, int], list[CoordInfo]]:
    """Every nsqd's report per partition; :func:`_coord_info` picks one."""
    out: dict[tuple[str, int], list[CoordInfo]] = defaultdict(list)
    for info in infos:
        out[(info.topic, info.partition)].append(info)
    return out


def build_view(
    snapshot: ClusterSnapshot,
    previous: ClusterSnapshot | None = None,
    history: History | None = None,
) -> ClusterView:
    """Derive topics, channels, clients, rates and flags.

    Rates need ``previous`` (the snapshot one interval earlier). ``history``, when given,
    takes this poll's samples (depth and rate per topic and channel) and the series are
    attached (:attr:`TopicView.depth_trend`...).
    """
    with gc_paused():
        return _build_view(snapshot, previous, history)


def _restarted(snapshot: ClusterSnapshot, previous: ClusterSnapshot | None) -> set[str]:
    """nsqds whose start time changed since ``previous``: their counters began again, so
    nothing of theirs is compared with the previous poll (a rate across a restart)."""
    if previous is None:
        return set()
    started = {n.address: n.start_time for n in previous.nodes if n.state != "down"}
    return {
        n.address
        for n in snapshot.nodes
        if n.state != "down"
        and n.start_time
        and started.get(n.address, n.start_time) != n.start_time
    }


def _build_view(
    snapshot: ClusterSnapshot, previous: ClusterSnapshot | None, history: History | None
) -> ClusterView:
    prev = _Prev.index(previous, _restarted(snapshot, previous))
    dts = {
        n.address: n.fetched_at - prev.fetched.get(n.address, 0.0)
        for n in snapshot.nodes
        if n.state != "down"
    }
    coord = _coord_index(snapshot.coordinator)
    grouped = _group_partitions(snapshot.nodes)
    metas = snapshot.topic_meta
    unanswered: set[str] = set()
    if history is not None:
        history.begin(snapshot.taken_at)
        unanswered = history.unanswered(snapshot.nodes)
    # a topic whose every copy is on nsqds that did not answer is still listed, from its
    # meta or from what those nsqds last said they held
    remembered = snapshot.unseen_partitions
    names = sorted(set(grouped) | {t for t, m in metas.items() if m.valid} | set(remembered))
    # and so is an original topic whose every nsqd is down (see the poller)
    lost = {t: u for t, u in snapshot.unseen_topics.items() if t not in grouped and t not in metas}
    names = sorted({*names, *lost})
    topics = tuple(
        _not_seen_topic(name, lost[name])
        if name in lost
        else _topic_view(
            name,
            grouped.get(name, {}),
            coord,
            prev,
            dts,
            history,
            metas.get(name),
            name in unanswered,
            snapshot.listed_leaders.get(name),
            remembered.get(name, ()),
            name in snapshot.deleted_topics,
        )
        for name in names
    )
    if history is not None:
        history.end()
    return ClusterView(
        taken_at=snapshot.taken_at,
        nodes=tuple(_node_view(n) for n in sorted(snapshot.nodes, key=lambda n: n.address)),
        lookupds=snapshot.lookupds,
        topics=topics,
        cluster=snapshot.cluster,
        is_redesign=any(n.is_redesign for n in snapshot.nodes),
        errors=snapshot.errors,
    )
