"""Parse nsqd ``/stats``, ``/coordinator/stats`` and lookupd ``/cluster/stats`` (both families).

Bodies may arrive wrapped in the pre-v1 ``{status_code, status_txt, data}`` envelope, which
is removed the same way for every endpoint (:func:`nsqctl.answers.unwrapped`). The
coordinator answers and ``/info`` are decoded into the records of :mod:`nsqctl.nsqd_wire`
(:mod:`nsqctl.answers`): a wrong shape is an :class:`~nsqctl.errors.AnswerDecodeError`
naming the server and the field.

nsqd's ``/stats`` is decoded by msgspec straight into the records of :mod:`.wire` (a big
cluster's is tens of megabytes); a payload already decoded (a recording, a test) takes the
same path. A big cluster's ``/stats`` lists tens of thousands of client connections per
poll while the dashboard shows one channel's at a time, so clients are parsed lazily
(:class:`LazyClients`); only the RDY and in-flight totals the channel rules need are read
at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple, Protocol, TypeVar, overload

import msgspec

from nsqctl import answers
from nsqctl.answers import WireEnvelope
from nsqctl.errors import AnswerDecodeError, NsqctlError, ProtocolError
from nsqctl.lookup.topology import Peer
from nsqctl.nsqd_wire import (
    WireClusterStats,
    WireCoordinatorStats,
    WireNodeRef,
    WireNsqdInfo,
)
from nsqctl.stats import wire
from nsqctl.stats.gcpause import gc_paused
from nsqctl.stats.model import (
    ChannelStats,
    ClientStats,
    ClusterNodeLoad,
    ClusterStability,
    CoordInfo,
    NodeStats,
    TopicPartitionStats,
)
from nsqctl.stats.rules import STARVED_RATIO


class StatsProtocolError(ProtocolError):
    """An nsqd or lookupd answered with something that is not the expected stats body."""


class StatsDecodeError(StatsProtocolError, AnswerDecodeError):
    """An nsqd's ``/stats`` envelope held a ``data`` of the wrong shape; ``str()`` names the
    nsqd and the field. A :class:`StatsProtocolError`, as every bad ``/stats`` answer is."""


def decode(body: bytes | str) -> Any:
    """Decode a JSON body (raises ``ValueError`` on bad JSON, like :func:`json.loads`)."""
    return msgspec.json.decode(body)


def parse_client(obj: Mapping[str, Any]) -> ClientStats:
    """One client record of a decoded ``/stats`` payload."""
    return wire.CLIENT.decode(_encoded(obj))


class ClientLoad(Protocol):
    """What the channel rules read of a connection: a parsed :class:`ClientStats`, or only
    the two fields decoded on every poll (:class:`wire.WireClientLoad`)."""

    @property
    def ready_count(self) -> int: ...

    @property
    def in_flight_count(self) -> int: ...


class ClientTotals(NamedTuple):
    """What a channel's rules read of its clients on every poll: how many are listed,
    their RDY summed, and whether one of them is starved (:func:`is_starved`). A tuple:
    one is made per channel copy, tens of thousands per poll."""

    listed: int
    ready: int
    starved: bool

    @classmethod
    def of(cls, clients: Sequence[ClientLoad]) -> ClientTotals:
        # one pass per channel copy, tens of thousands per poll (bench/README.md,
        # Dashboard): rules.is_starved inlined (a call per client was a fifth of a
        # refresh's parse), the tuple made without NamedTuple's keyword layer
        ready = 0
        starved = False
        for c in clients:
            rdy = c.ready_count
            ready += rdy
            if rdy > 0 and c.in_flight_count >= STARVED_RATIO * rdy:
                starved = True
        return _new_tuple(cls, (len(clients), ready, starved))


_new_tuple = tuple.__new__


class BodyClients:
    """Where a decoded body's client lists are, for reading one channel's in full later:
    the body is decoded again (client lists kept as bytes, all else skipped) on the first
    read, then each channel's list on its own."""

    __slots__ = ("_address", "_body", "_topics")

    def __init__(self, body: bytes | str, address: str) -> None:
        self._body = body
        self._address = address
        self._topics: list[wire.RawTopic] | None = None

    def raw(self, topic: int, channel: int) -> msgspec.Raw:
        """The undecoded client list of the ``channel``-th channel of the ``topic``-th topic."""
        if self._topics is None:
            found = _inside(wire.RAW_NSQD_STATS.decode(self._body), self._address)
            self._topics = found.topics or []
            self._body = ""  # the lists are views into it: they keep what they need
        channels = self._topics[topic].channels or []
        return channels[channel].clients


class ChannelClients:
    """The client list of one channel record (:func:`parse_channel`), as :class:`BodyClients`
    gives those of a body's channels."""

    __slots__ = ("_body",)

    def __init__(self, body: bytes) -> None:
        self._body = body

    def raw(self, topic: int, channel: int) -> msgspec.Raw:
        return wire.RAW_CHANNEL.decode(self._body).clients


ClientLists = BodyClients | ChannelClients


class LazyClients(Sequence[ClientStats]):
    """A channel's clients as a sequence of :class:`ClientStats`, parsed on first access.

    ``totals`` (count, RDY, starved) is known at once because the channel's rules need it
    on every poll; the connections themselves are read from the body when first asked for.
    """

    __slots__ = ("_at", "_lists", "_parsed", "totals")

    def __init__(self, totals: ClientTotals, lists: ClientLists, at: tuple[int, int]) -> None:
        self._lists: ClientLists | None = lists
        self._at = at  # (topic, channel): where in ``lists``
        self._parsed: tuple[ClientStats, ...] | None = None
        self.totals = totals

    def _all(self) -> tuple[ClientStats, ...]:
        if self._parsed is None:
            assert self._lists is not None
            raw = self._lists.raw(*self._at)
            self._parsed = tuple(wire.CLIENTS.decode(raw) or ())
            self._lists = None  # the records replace the body's bytes
        return self._parsed

    def __len__(self) -> int:
        return self.totals.listed

    @overload
    def __getitem__(self, index: int) -> ClientStats: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[ClientStats]: ...

    def __getitem__(self, index: int | slice) -> ClientStats | Sequence[ClientStats]:
        return self._all()[index]

    def __iter__(self) -> Iterator[ClientStats]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"LazyClients({len(self)} clients)"


def client_totals(clients: Sequence[ClientStats]) -> ClientTotals:
    """Count, RDY and starved of a channel's clients without parsing lazy ones."""
    if isinstance(clients, LazyClients):
        return clients.totals
    return ClientTotals.of(clients)


def _channel(w: wire.WireChannel, lists: ClientLists, at: tuple[int, int]) -> ChannelStats:
    """On the redesign ``depth`` counts messages not yet confirmed (in flight included) and
    ``depth_size`` their bytes; the original's ``depth`` excludes in-flight messages.

    Asked without clients, both families send ``"clients": null`` (an empty list when
    asked with them and none is connected) and still count them: the original as
    ``client_count``, the redesign as ``client_num``. The clients are read in full from
    ``lists`` (at ``at``) when they are shown.
    """
    loads = w.clients
    listed = loads is not None
    clients: Sequence[ClientStats] = (
        LazyClients(ClientTotals.of(loads), lists, at) if loads is not None else ()
    )
    count = w.client_count
    if count is None:
        count = w.client_num
    # positional, in ChannelStats' field order: matching keywords by name is a large share
    # of building one, and a big cluster has tens of thousands (bench/README.md, Dashboard)
    return ChannelStats(
        w.channel_name,
        w.depth,
        w.backend_depth,
        w.in_flight_count,
        w.deferred_count,
        w.message_count,
        w.requeue_count,
        w.timeout_count,
        len(clients) if count is None else count,  # client_count
        w.paused,
        w.skipped,
        clients,
        w.depth_size,  # depth_bytes
        listed,  # clients_listed
    )


def _partition(w: wire.WireTopic, redesign: bool) -> int | None:
    """A redesign copy's partition (sent as a string of digits); None on the original."""
    if not redesign:
        return None
    return w.topic_partition or 0


def _topic(
    w: wire.WireTopic, node: str, redesign: bool, body: BodyClients, index: int
) -> TopicPartitionStats:
    """The ``index``-th topic record of ``body``."""
    # positional, in TopicPartitionStats' field order (see _channel: tens of thousands)
    return TopicPartitionStats(
        w.topic_name,
        _partition(w, redesign),
        node,
        w.depth,
        w.backend_depth,
        w.message_count,
        w.paused,
        w.is_leader if redesign else True,  # is_leader
        w.is_multi_ordered,  # ordered
        w.is_ext,  # ext
        redesign,  # depth_is_bytes
        w.backend_start if redesign else 0,
        tuple([_channel(c, body, (index, i)) for i, c in enumerate(w.channels or ())]),
        w.message_bytes,
    )


def _encoded(obj: Any) -> bytes:
    """An already decoded record as JSON again, for the same decoder as a body (tests,
    recordings)."""
    return msgspec.json.encode(obj)


def parse_channel(obj: Mapping[str, Any]) -> ChannelStats:
    """One channel record of a decoded ``/stats`` payload."""
    body = _encoded(obj)
    return _channel(wire.CHANNEL.decode(body), ChannelClients(body), (0, 0))


CopyKey = tuple[str, int | None]
"""A topic copy on one nsqd: topic and partition (None on the original family)."""


def _overlaid(base: TopicPartitionStats, top: TopicPartitionStats) -> TopicPartitionStats:
    """``top`` (the same copy read later, maybe narrowed to some channels) with the
    channels it lacks taken from ``base``."""
    names = {c.name for c in top.channels}
    kept = tuple(c for c in base.channels if c.name not in names)
    return replace(top, channels=top.channels + kept) if kept else top


def _completed(
    detail: TopicPartitionStats, w: wire.WireTopic, body: BodyClients, index: int
) -> TopicPartitionStats:
    """``detail`` with the channels it lacks parsed from ``w`` (the same copy, as the
    whole node's answer has it, its ``index``-th topic): only those are parsed."""
    names = {c.name for c in detail.channels}
    missing = tuple(
        _channel(c, body, (index, i))
        for i, c in enumerate(w.channels or ())
        if c.channel_name not in names
    )
    return replace(detail, channels=detail.channels + missing) if missing else detail


def _topics(
    records: list[wire.WireTopic],
    node: str,
    redesign: bool,
    body: BodyClients,
    details: Mapping[CopyKey, TopicPartitionStats],
) -> tuple[TopicPartitionStats, ...]:
    """The topic copies, each one in ``details`` taken from there (its channels there
    are not parsed again); a detailed copy that ``records`` lacks (made meanwhile) comes
    last."""
    if not details:
        return tuple([_topic(t, node, redesign, body, i) for i, t in enumerate(records)])
    detailed = {topic for topic, _ in details}
    left = dict(details)
    out: list[TopicPartitionStats] = []
    for i, w in enumerate(records):
        name = w.topic_name
        detail = left.pop((name, _partition(w, redesign)), None) if name in detailed else None
        out.append(
            _topic(w, node, redesign, body, i) if detail is None else _completed(detail, w, body, i)
        )
    out.extend(left.values())
    return tuple(out)


E = TypeVar("E", bound=WireEnvelope)


def _inside(stats: E, address: str) -> E:
    """``stats`` unwrapped from the pre-v1 envelope (:func:`nsqctl.answers.unwrapped`)."""
    found = answers.unwrapped(stats, type(stats), "nsqd", address, "/stats", StatsDecodeError)
    assert found is not None  # only None when given None
    return found


def _refuse_error(found: WireEnvelope, bare: bool, role: str, source: str, path: str) -> None:
    """:class:`StatsProtocolError` when ``found`` is an error answer: the pre-v1 envelope's
    status other than 200, or v1's ``{"message"}`` (``bare``: the body has nothing else)."""
    status = found.status_code if found.status_code is not None else 200
    if status != 200 or bare:
        why = found.status_txt or found.message or status
        raise StatsProtocolError(f"{role} {source} {path} answered an error: {why}")


def _decoded(body: bytes | str) -> wire.WireNsqdStats:
    """The body as records; a top level that is no JSON object is a protocol error."""
    try:
        return wire.NSQD_STATS.decode(body)
    except msgspec.ValidationError as exc:
        if " - at `$" in str(exc):  # a field that does not fit: the message names it
            raise
        raise StatsProtocolError("nsqd sent a non-object /stats body") from exc


def _node(
    body: bytes | str,
    address: str,
    *,
    fetched_at: float,
    elapsed: float = 0.0,
    details: Mapping[CopyKey, TopicPartitionStats] | None = None,
) -> NodeStats:
    stats = _inside(_decoded(body), address)
    bare = stats.message is not None and stats.topics is None and not stats.version
    _refuse_error(stats, bare, "nsqd", address, "/stats")
    topics = stats.topics or []
    # Redesign versions carry ``-HA.``; its topics carry ``topic_partition``.
    redesign = "HA" in stats.version or any(t.topic_partition is not None for t in topics)
    health = stats.health or "OK"
    return NodeStats(
        address=address,
        fetched_at=fetched_at,
        state="up" if health == "OK" else "unhealthy",
        version=stats.version,
        health=health,
        start_time=stats.start_time,
        is_redesign=redesign,
        elapsed=elapsed,
        topics=_topics(topics, address, redesign, BodyClients(body, address), details or {}),
    )


def parse_nsqd_stats(
    payload: Any,
    address: str,
    *,
    fetched_at: float,
    elapsed: float = 0.0,
    details: Mapping[CopyKey, TopicPartitionStats] | None = None,
) -> NodeStats:
    """One nsqd's decoded ``/stats?format=json`` into a :class:`NodeStats` (state ``up``
    or ``unhealthy`` when nsqd itself reports a health other than OK). ``details``: topic
    copies from narrower answers of the same nsqd, used instead of this payload's, which
    gives only the channels they lack."""
    if not isinstance(payload, Mapping):
        raise StatsProtocolError(f"nsqd {address} /stats sent a non-object body")
    return _node(
        _encoded(payload), address, fetched_at=fetched_at, elapsed=elapsed, details=details
    )


def parse_nsqd_body(
    body: bytes | str,
    address: str,
    *,
    fetched_at: float,
    elapsed: float = 0.0,
    details: Sequence[bytes | str] = (),
) -> NodeStats:
    """Decode and parse one ``/stats`` body: the whole per-node work of a poll.

    ``details`` are the same nsqd's answers narrowed to a topic or one of its channels with
    the clients listed (the dashboard asks the whole node without clients, and what it
    shows with them): their copies' channels replace the body's, in place. A detail that
    is not a stats body is left out, so that topic stays as the body has it (its clients
    not listed).
    """
    with gc_paused():
        copies: dict[CopyKey, TopicPartitionStats] = {}
        for detail in details:
            try:
                narrow = _node(detail, address, fetched_at=fetched_at)
            except (ValueError, StatsProtocolError):  # bad JSON, an error envelope
                continue
            for t in narrow.topics:
                key = (t.topic, t.partition)
                copies[key] = _overlaid(copies[key], t) if key in copies else t
        return _node(body, address, fetched_at=fetched_at, elapsed=elapsed, details=copies)


def _answer(payload: Any, kind: type[E], role: str, source: str, path: str) -> E:
    """A decoded answer body as ``kind``: :class:`AnswerDecodeError` naming the field for
    a wrong shape, :class:`StatsProtocolError` for an error answer (pre-v1 envelope's
    status, or v1's ``{"message"}``)."""
    found = answers.convert(payload, kind, role=role, source=source, path=path)
    if found is None:
        return kind()
    bare = isinstance(payload, Mapping) and set(payload) == {"message"}
    _refuse_error(found, bare, role, source, path)
    return found


def _node_ids(items: Sequence[WireNodeRef | None] | None) -> tuple[str, ...]:
    return tuple((i.node_id or i.hostname or "") for i in items or () if i is not None)


def parse_coordinator_stats(payload: Any, reported_by: str) -> tuple[CoordInfo, ...]:
    """Redesign nsqd ``/coordinator/stats?topic=T``: ``topic_coord_stats``, one entry per
    partition of T this nsqd holds (none at all when no ``topic`` is given)."""
    data = _answer(payload, WireCoordinatorStats, "nsqd", reported_by, "/coordinator/stats")
    return tuple(
        CoordInfo(
            topic=item.name or "",
            partition=item.partition or 0,
            reported_by=item.node or reported_by,
            isr=_node_ids(item.isr_stats),
            catchup=_node_ids(item.catchup_stats),
        )
        for item in data.topic_coord_stats or ()
        if item is not None
    )


def node_id_key(node_id: str) -> str | None:
    """``broadcast_address:tcp_port`` of a redesign node id (``ip:rpc_port:tcp_port:n``, see
    ``GenNsqdNodeID`` in youzan's consistence/common.go); None when it is not one."""
    parts = node_id.split(":")
    if len(parts) != 4 or not parts[2].isdigit():
        return None
    return f"{parts[0]}:{parts[2]}"


def resolve_node_ids(
    infos: Sequence[CoordInfo], tcp_to_http: Mapping[str, str]
) -> tuple[CoordInfo, ...]:
    """ISR and catch-up node ids as nsqd HTTP addresses, so they read like the leader and
    replica columns; an id with no known nsqd stays as it is."""

    def addr(node_id: str) -> str:
        key = node_id_key(node_id)
        return tcp_to_http.get(key, node_id) if key else node_id

    return tuple(
        replace(
            info,
            isr=tuple(addr(n) for n in info.isr),
            catchup=tuple(addr(n) for n in info.catchup),
        )
        for info in infos
    )


def parse_cluster_stats(payload: Any, source: str = "") -> ClusterStability:
    """Redesign lookupd leader ``/cluster/stats``: ``stable`` and per-node load factors."""
    data = _answer(payload, WireClusterStats, "nsqlookupd", source, "/cluster/stats")
    nodes = tuple(
        ClusterNodeLoad(
            address=f"{item.broadcast_address or item.hostname or ''}:{item.http_port or 0}",
            hostname=item.hostname or "",
            leader_load_factor=item.leader_load_factor or 0.0,
            node_load_factor=item.node_load_factor or 0.0,
        )
        for item in data.node_stat_list or ()
        if item is not None
    )
    return ClusterStability(stable=bool(data.stable), nodes=nodes)


def nsqd_tcp_to_http(producers: list[dict[str, Any]]) -> dict[str, str]:
    """``broadcast_address:tcp_port`` → ``broadcast_address:http_port`` for every nsqd in
    lookupd ``/nodes`` (or an nsqd's own ``/info``), in the order listed."""
    out: dict[str, str] = {}
    for obj in producers:
        try:
            peer = Peer.from_json(obj)
        except NsqctlError:
            continue
        if peer.http_port > 0:
            out.setdefault(peer.key, peer.http_key)
    return out


def parse_nsqd_info(payload: Any, address: str) -> str:
    """An nsqd's own ``/info``: its ``broadcast_address:tcp_port``."""
    data = _answer(payload, WireNsqdInfo, "nsqd", address, "/info")
    if not data.broadcast_address or data.tcp_port is None:
        raise StatsProtocolError(f"nsqd {address} /info lacks broadcast_address/tcp_port")
    return f"{data.broadcast_address}:{data.tcp_port}"


def nsqd_http_addresses(producers: list[dict[str, Any]]) -> list[str]:
    """nsqd HTTP addresses (``broadcast_address:http_port``) from lookupd ``/nodes``."""
    return list(dict.fromkeys(nsqd_tcp_to_http(producers).values()))
