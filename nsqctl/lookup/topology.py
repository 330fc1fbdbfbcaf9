"""Pure data model of nsqlookupd answers for both server families, and how to merge them.

Shapes accepted by :func:`parse_lookup_response` (as read from nsqio/nsq v1.3.0 and
youzan/nsq ``nsqlookupd/http.go`` + ``internal/http_api/api_response.go``):

* unwrapped v1 (sent when the request carries exactly ``Accept: application/vnd.nsq;
  version=1.0``): ``{"channels": [...], "producers": [...]}``; the redesign adds
  ``"partitions": {"0": peer, ...}`` and, with ``metainfo`` on a cluster, ``"meta"``.
  Either may be JSON ``null`` (the redesign nulls them when cluster writes are disabled).
* wrapped legacy: ``{"status_code": 200, "status_txt": "OK", "data": {...}}``.
* errors: v1 ``{"message": "TOPIC_NOT_FOUND"}`` (HTTP 404) or wrapped with a non-200
  ``status_code`` (the redesign's legacy mode reports every error as 500 + ``status_txt``).

Every body is first decoded into the typed records of :mod:`nsqctl.lookup.wire`
(msgspec, loaded on the first answer): a body of the wrong shape is a
:class:`LookupDecodeError` naming the server and the field, and the values built here
only ever come from records of the right shape.

Merge rule (:func:`merge_answers`): producers are a union keyed by
``broadcast_address:tcp_port`` (the original client-library guideline). For a redesign
partition the leader reported by the *newest* answer wins: answers are ordered by
``(epoch, fetched_at)`` where ``epoch`` is ``None`` for plain HTTP lookups (the lookup
response carries no leadership epoch, see ``PeerInfo`` in youzan ``registration_db.go``),
so in practice "newest" means "received last". Callers that do know a leadership epoch may
set it on the answer; a known epoch beats an unknown one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from nsqctl.addresses import HostPort, parse_address
from nsqctl.lookup.errors import LookupDecodeError, LookupProtocolError

if TYPE_CHECKING:  # loaded when a body is decoded: msgspec is not needed to name an error
    from nsqctl.lookup.wire import (
        WireListLookup,
        WireLookup,
        WireLookupdNode,
        WireMeta,
        WireNodes,
        WirePeer,
    )

__all__ = [
    "MAX_PARTITION_ID",
    "LookupAnswer",
    "LookupDecodeError",
    "LookupProtocolError",
    "LookupdList",
    "LookupdNode",
    "PartitionInfo",
    "PartitionSlot",
    "Peer",
    "SourceStatus",
    "TopicMeta",
    "Topology",
    "answer_from_wire",
    "as_int",
    "as_str",
    "counted_partitions",
    "is_topic_not_found_text",
    "listing_from_wire",
    "merge_answers",
    "nodes_from_wire",
    "not_nsq_answer",
    "parse_listlookup",
    "parse_lookup_body",
    "parse_lookup_response",
    "parse_nodes_body",
]

# go-nsq ignores partition ids outside [0, 1024]; the server caps partition_num at 255.
MAX_PARTITION_ID = 1024

_NOT_FOUND_TEXTS = ("TOPIC_NOT_FOUND", "KEY NOT FOUND", "TOPIC HAS NO CHANNEL")


def not_nsq_answer(path: str, status: int, content_type: str, body: bytes) -> str | None:
    """Why an HTTP answer cannot have come from nsqlookupd or nsqd, or ``None``.

    Both servers answer every request they route, and the 404 of one they do not route,
    with a JSON body (or an empty one); a web server that is not NSQ answers an error page.
    Telling them apart keeps a wrong address from reading as "topic not found yet", which
    a consumer would wait on forever.
    """
    if 200 <= status < 300:
        return None
    text = body.strip()
    if not text:
        return None
    try:
        # not strict: youzan's nsqlookupd puts etcd's error, newline and all, into the
        # JSON string of its HTTP 500 unescaped; that is still nsqlookupd's answer
        json.loads(text, strict=False)
    except ValueError:
        kind = content_type.split(";")[0].strip() or "no content type"
        return f"{path} answered HTTP {status} ({kind}), not JSON"
    return None


def is_topic_not_found_text(text: str) -> bool:
    """True for the texts lookupds use when a topic is unknown (or not yet writable).

    Original: ``TOPIC_NOT_FOUND``. Redesign, ``access=w``: ``Key not found`` (topic absent
    from the cluster) or ``Topic has no channel, should init at least one...``.
    """
    upper = text.upper()
    return any(t in upper for t in _NOT_FOUND_TEXTS)


def as_int(value: Any, default: int = 0) -> int:
    """A JSON field as an int, however the server spelled it (number, bool or digits);
    ``default`` for anything else. Both families' HTTP APIs mix these for one field."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return default


def as_str(value: Any) -> str:
    """A JSON field as text; ``""`` for a missing (``null``) one."""
    return value if isinstance(value, str) else ("" if value is None else str(value))


@dataclass(frozen=True)
class Peer:
    """One nsqd as a lookupd describes it. ``key`` (``broadcast_address:tcp_port``) is identity."""

    broadcast_address: str
    tcp_port: int
    http_port: int = 0
    hostname: str = ""
    version: str = ""
    id: str = ""
    distributed_id: str = ""
    remote_address: str = ""

    @property
    def key(self) -> str:
        return str(HostPort(self.broadcast_address, self.tcp_port))

    @property
    def tcp_address(self) -> HostPort:
        return HostPort(self.broadcast_address, self.tcp_port)

    @property
    def http_address(self) -> HostPort:
        return HostPort(self.broadcast_address, self.http_port)

    @property
    def http_key(self) -> str:
        return str(self.http_address)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, source: str = "", path: str = "") -> Peer:
        """A peer from a JSON object already decoded (``json.loads``); the same rules as
        the lookup client's own decoding (:mod:`nsqctl.lookup.wire`)."""
        import msgspec

        from nsqctl.lookup.wire import WirePeer

        try:
            wire = msgspec.convert(obj, WirePeer, strict=False)
        except msgspec.ValidationError as err:
            raise LookupDecodeError(
                f"nsqlookupd {source or '?'} answered {path or 'a peer'} with a wrong shape: "
                f"{err}; check that the address is an nsqlookupd of a supported version"
            ) from None
        return cls.from_wire(wire, source=source, path=path)

    @classmethod
    def from_wire(cls, wire: WirePeer, *, source: str = "", path: str = "") -> Peer:
        address = wire.broadcast_address or wire.hostname or ""
        if not address or wire.tcp_port is None:
            raise LookupDecodeError(
                f"nsqlookupd {source or '?'} answered {path or 'a peer'} with a peer that lacks "
                f"broadcast_address/tcp_port: {wire}"
            )
        return cls(
            broadcast_address=address,
            tcp_port=wire.tcp_port,
            http_port=wire.http_port or 0,
            hostname=wire.hostname or "",
            version=wire.version or "",
            id=wire.id or "",
            distributed_id=wire.distributed_id or "",
            remote_address=wire.remote_address or "",
        )

    @classmethod
    def from_address(cls, address: HostPort | str, *, http_port: int = 0) -> Peer:
        """A peer known only by its TCP address (direct nsqd configuration)."""
        hp = (
            address
            if isinstance(address, HostPort)
            else parse_address(address, example="127.0.0.1:4150")
        )
        return cls(broadcast_address=hp.host, tcp_port=hp.port, http_port=http_port)


@dataclass(frozen=True)
class PartitionInfo:
    """A redesign partition and the nsqd that leads it."""

    partition: int
    leader: Peer


@dataclass(frozen=True)
class PartitionSlot:
    """A partition the topic has, whether or not a live nsqd lists it.

    ``leader`` is None when the meta counts the partition but no lookupd answer names a
    leader for it: every nsqd holding a copy is down (or has not registered yet). Views
    show such a partition as having no leader instead of leaving it out.
    """

    partition: int
    leader: Peer | None

    @property
    def no_leader(self) -> bool:
        return self.leader is None


def counted_partitions(partition_num: int, seen: Iterable[int]) -> list[int]:
    """Every partition id a topic has: ``0 .. partition_num - 1`` (its meta's count) and
    any other id some server reports (a partition added since the count was read).

    The one rule for "which partitions exist", so a partition whose only copies are on
    dead nsqds counts in every view that lists partitions (lookup, stats, health).
    """
    return sorted(set(range(max(0, partition_num))) | set(seen))


def write_quorum(replicas: int) -> int:
    """In-sync copies a partition of ``replicas`` needs to take writes: more than
    ``replicas/2`` (youzan's ``IsISRReadyForWrite``, integer division)."""
    return max(1, replicas) // 2 + 1


@dataclass(frozen=True)
class TopicMeta:
    """Topic metadata from a redesign cluster lookup (``metainfo=true``)."""

    partition_num: int = 0
    replica: int = 0
    extend_support: bool = False
    ordered: bool = False
    multi_part: bool = False
    disable_channel_auto_create: bool = False

    @property
    def write_quorum(self) -> int:
        """In-sync copies each of this topic's partitions needs to take writes."""
        return write_quorum(self.replica)

    @property
    def valid(self) -> bool:
        """go-nsq treats ``partition_num <= 0`` as "no usable meta" (e.g. standalone nsqd)."""
        return self.partition_num > 0

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, source: str = "") -> TopicMeta:
        """Meta from a JSON object already decoded (``json.loads``)."""
        import msgspec

        from nsqctl.lookup.wire import WireMeta

        try:
            wire = msgspec.convert(obj, WireMeta, strict=False)
        except msgspec.ValidationError as err:
            raise LookupDecodeError(
                f"nsqlookupd {source or '?'} answered /lookup with a wrong shape: {err} "
                "(in its meta); check that the address is an nsqlookupd of a supported version"
            ) from None
        return cls.from_wire(wire)

    @classmethod
    def from_wire(cls, wire: WireMeta) -> TopicMeta:
        return cls(
            partition_num=wire.partition_num or 0,
            replica=wire.replica or 0,
            extend_support=bool(wire.extend_support),
            ordered=bool(wire.ordered),
            multi_part=bool(wire.multi_part),
            disable_channel_auto_create=bool(wire.disable_channel_auto_create),
        )


@dataclass(frozen=True)
class LookupAnswer:
    """One lookupd's parsed answer for one topic."""

    source: str = ""
    producers: tuple[Peer, ...] = ()
    partitions: Mapping[int, Peer] = field(default_factory=dict)
    channels: tuple[str, ...] = ()
    meta: TopicMeta | None = None
    has_partitions: bool = False  # the "partitions" key was present: a redesign lookupd
    topic_not_found: bool = False
    fetched_at: float = 0.0
    epoch: int | None = None


@dataclass(frozen=True)
class SourceStatus:
    """How one lookupd fared in the round that produced a topology."""

    address: str
    ok: bool
    error: str = ""
    topic_not_found: bool = False


@dataclass(frozen=True)
class LookupdNode:
    """One entry of a redesign ``/listlookup`` answer."""

    id: str
    host: str
    http_port: int
    tcp_port: int = 0
    rpc_port: int = 0
    epoch: int = 0
    is_leader: bool = False

    @property
    def http_address(self) -> HostPort:
        return HostPort(self.host, self.http_port)


@dataclass(frozen=True)
class LookupdList:
    nodes: tuple[LookupdNode, ...]
    leader: LookupdNode | None


@dataclass(frozen=True)
class Topology:
    """What a consumer/producer needs to know about where a topic lives.

    ``partitions`` maps partition id → leader (redesign only). ``stale`` means no lookupd
    answered this round and this is the last known topology. ``topic_not_found`` means every
    lookupd that answered said the topic does not exist (yet): not an error, callers wait.
    """

    topic: str
    producers: tuple[Peer, ...] = ()
    partitions: Mapping[int, Peer] = field(default_factory=dict)
    meta: TopicMeta | None = None
    channels: tuple[str, ...] = ()
    is_redesign: bool = False
    fetched_at: float = 0.0
    sources: tuple[SourceStatus, ...] = ()
    stale: bool = False
    topic_not_found: bool = False

    @property
    def is_empty(self) -> bool:
        return not self.producers and not self.partitions

    @property
    def partition_num(self) -> int:
        """Partition count for sharding: meta when valid, else the partitions seen."""
        if self.meta is not None and self.meta.valid:
            return self.meta.partition_num
        return len(self.partitions)

    @property
    def partition_infos(self) -> tuple[PartitionInfo, ...]:
        """The partitions a lookupd names a leader for (what a client can connect to)."""
        return tuple(PartitionInfo(p, self.partitions[p]) for p in sorted(self.partitions))

    @property
    def partition_slots(self) -> tuple[PartitionSlot, ...]:
        """Every partition the topic has (see :func:`counted_partitions`), with its leader
        or None: what a view lists, so a partition with no live copy is not left out."""
        count = self.meta.partition_num if self.meta is not None and self.meta.valid else 0
        return tuple(
            PartitionSlot(p, self.partitions.get(p))
            for p in counted_partitions(count, self.partitions)
        )

    @property
    def leaderless_partitions(self) -> tuple[int, ...]:
        """Partitions the meta counts that no lookupd names a leader for."""
        return tuple(s.partition for s in self.partition_slots if s.leader is None)

    def targets(self) -> list[tuple[Peer, int | None]]:
        """Connections to make: one per partition on the redesign, one per producer otherwise.

        A redesign answer without partition ids (old nsqd inside a redesign cluster) falls
        back to the producers with partition ``None``.
        """
        if self.partitions:
            return [(self.partitions[p], p) for p in sorted(self.partitions)]
        return [(peer, None) for peer in self.producers]

    def as_stale(self, sources: Sequence[SourceStatus] | None = None) -> Topology:
        return replace(
            self, stale=True, sources=tuple(sources) if sources is not None else self.sources
        )

    @classmethod
    def from_nsqd_addresses(
        cls, addresses: Iterable[HostPort | str], *, topic: str = ""
    ) -> Topology:
        """Topology for direct nsqd configuration (no lookupd): producers only, never stale."""
        peers: dict[str, Peer] = {}
        for addr in addresses:
            peer = Peer.from_address(addr)
            peers.setdefault(peer.key, peer)
        return cls(topic=topic, producers=tuple(peers.values()), fetched_at=time.time())


def parse_lookup_response(
    payload: Any,
    *,
    source: str = "",
    fetched_at: float | None = None,
    epoch: int | None = None,
    http_status: int = 200,
) -> LookupAnswer:
    """Parse one ``/lookup`` body already JSON-decoded (``json.loads``); see
    :func:`answer_from_wire`."""
    from nsqctl.lookup.wire import WireLookup, convert

    wire = convert(payload, WireLookup, source=source, path="/lookup")
    return answer_from_wire(
        wire, source=source, fetched_at=fetched_at, epoch=epoch, http_status=http_status
    )


def parse_lookup_body(
    content: bytes,
    *,
    source: str = "",
    fetched_at: float | None = None,
    epoch: int | None = None,
    http_status: int = 200,
) -> LookupAnswer:
    """Parse one ``/lookup`` body as received; see :func:`answer_from_wire`."""
    from nsqctl.lookup.wire import WireLookup, decode

    wire = decode(content, WireLookup, source=source, path="/lookup")
    return answer_from_wire(
        wire, source=source, fetched_at=fetched_at, epoch=epoch, http_status=http_status
    )


def _status(wire: WireLookup | None) -> tuple[int, str]:
    """``(status_code, status_txt)`` of a decoded body: the envelope's, v1's error
    (``{"message"}`` alone) as status 0, else 200."""
    import msgspec

    if wire is None:
        return 200, "OK"
    if wire.status_code is not None:
        return wire.status_code, wire.status_txt or ""
    bare = (
        wire.producers is None
        and wire.channels is None
        and wire.partitions is msgspec.UNSET
        and wire.meta is None
    )
    if wire.message is not None and bare:
        return 0, wire.message
    return 200, "OK"


def answer_from_wire(
    wire: WireLookup | None,
    *,
    source: str = "",
    fetched_at: float | None = None,
    epoch: int | None = None,
    http_status: int = 200,
) -> LookupAnswer:
    """One ``/lookup`` answer from either server family, decoded (``None``: an empty body).

    A not-found error becomes an answer with ``topic_not_found=True``; any other error or
    a malformed body raises :class:`LookupProtocolError` (:class:`LookupDecodeError` for
    a field of the wrong shape, naming it).
    """
    import msgspec

    when = time.time() if fetched_at is None else fetched_at
    status, text = _status(wire)
    if http_status == 404 or status == 404 or (status != 200 and is_topic_not_found_text(text)):
        return LookupAnswer(source=source, topic_not_found=True, fetched_at=when, epoch=epoch)
    if status != 200 or http_status >= 400:
        raise LookupProtocolError(
            f"nsqlookupd {source or '?'} answered an error: {text or status or http_status}"
        )
    if wire is None:
        raise LookupProtocolError(f"nsqlookupd {source or '?'} sent a non-object lookup body")
    # One Peer per distinct node: a redesign answer names each leader once per partition
    # it leads, and building a frozen dataclass is most of the cost of an answer.
    made: dict[tuple[Any, ...], Peer] = {}

    def peer_of(peer: WirePeer, path: str) -> Peer:
        key = msgspec.structs.astuple(peer)
        found = made.get(key)
        if found is None:
            found = made[key] = Peer.from_wire(peer, source=source, path=path)
        return found

    producers = tuple(
        peer_of(p, f"/lookup $.producers[{i}]") for i, p in enumerate(wire.producers or ())
    )
    has_partitions = wire.partitions is not msgspec.UNSET
    partitions: dict[int, Peer] = {}
    for pid_text, peer in (wire.partitions or {}).items():
        pid = as_int(pid_text, -1)
        if not 0 <= pid <= MAX_PARTITION_ID or peer is None:
            continue  # go-nsq skips these too
        partitions[pid] = peer_of(peer, f"/lookup $.partitions.{pid}")
    meta = TopicMeta.from_wire(wire.meta) if wire.meta is not None else None
    channels = tuple(wire.channels or ())
    # A redesign cluster lookupd answers 200 for a topic it does not know (never created,
    # or deleted): zero meta and nobody holding it.
    unknown = meta is not None and not meta.valid and not producers and not partitions
    return LookupAnswer(
        source=source,
        producers=producers,
        partitions=partitions,
        channels=channels,
        meta=meta,
        has_partitions=has_partitions,
        topic_not_found=unknown,
        fetched_at=when,
        epoch=epoch,
    )


def parse_nodes_body(content: bytes, *, source: str) -> list[Peer] | None:
    """The nsqds a ``/nodes`` body (as received) lists; ``None`` when the body is not JSON
    at all (another server's error page: callers asking several lookupds skip it), and
    :class:`LookupDecodeError` naming the field for JSON of the wrong shape."""
    from nsqctl.lookup.wire import WireNodes, decode, is_json

    try:
        wire = decode(content, WireNodes, source=source, path="/nodes")
    except LookupDecodeError:
        if is_json(content):
            raise
        return None
    return nodes_from_wire(wire, source=source)


def nodes_from_wire(wire: WireNodes | None, *, source: str) -> list[Peer]:
    """The nsqds a decoded ``/nodes`` answer lists (none for a wrapped error)."""
    if wire is None or (wire.status_code or 200) != 200:
        return []
    return [
        Peer.from_wire(p, source=source, path=f"/nodes $.producers[{i}]")
        for i, p in enumerate(wire.producers or ())
    ]


def _lookupd_node(wire: WireLookupdNode | None, leader_id: str) -> LookupdNode | None:
    if wire is None:
        return None
    host = wire.NodeIP or wire.NodeIp or ""
    if not host or wire.HttpPort is None:
        return None
    node_id = wire.ID or ""
    return LookupdNode(
        id=node_id,
        host=host,
        http_port=wire.HttpPort,
        tcp_port=wire.TcpPort or 0,
        rpc_port=wire.RpcPort or 0,
        epoch=wire.Epoch or 0,
        is_leader=bool(node_id) and node_id == leader_id,
    )


def parse_listlookup(payload: Any, *, source: str = "") -> LookupdList | None:
    """Parse a redesign ``/listlookup`` body already JSON-decoded; see
    :func:`listing_from_wire`."""
    from nsqctl.lookup.wire import WireListLookup, convert

    return listing_from_wire(convert(payload, WireListLookup, source=source, path="/listlookup"))


def listing_from_wire(wire: WireListLookup | None) -> LookupdList | None:
    """A redesign ``/listlookup`` answer; ``None`` when it lists nothing usable.

    A redesign lookupd without a coordinator answers ``null`` (or an empty v1 body); an
    original lookupd answers 404, which the client handles before calling this.
    """
    if wire is None:
        return None
    if wire.status_code is not None and wire.status_code != 200:
        raise LookupProtocolError(
            f"/listlookup answered an error: {wire.status_txt or wire.status_code}"
        )
    raw_leader = wire.lookupdleader
    leader_id = (raw_leader.ID or "") if raw_leader is not None else ""
    nodes = tuple(n for n in (_lookupd_node(o, leader_id) for o in (wire.lookupdnodes or ())) if n)
    if not nodes:
        return None
    leader = next((n for n in nodes if n.is_leader), None)
    if leader is None and raw_leader is not None:
        leader = _lookupd_node(raw_leader, leader_id)
    return LookupdList(nodes=nodes, leader=leader)


def _age_key(answer: LookupAnswer) -> tuple[bool, int, float]:
    return (answer.epoch is not None, answer.epoch or 0, answer.fetched_at)


def merge_answers(
    answers: Iterable[LookupAnswer],
    *,
    topic: str = "",
    sources: Sequence[SourceStatus] = (),
) -> Topology:
    """Union several lookupds' answers into one :class:`Topology` (rule in the module doc).

    Partition leaders are also added to ``producers`` so the producer set is always a
    superset of the nodes one must connect to.
    """
    ordered = sorted(answers, key=_age_key)  # stable: equal keys keep caller order
    producers: dict[str, Peer] = {}
    partitions: dict[int, Peer] = {}
    channels: dict[str, None] = {}
    meta: TopicMeta | None = None
    is_redesign = False
    found = [a for a in ordered if not a.topic_not_found]
    for ans in found:
        is_redesign = is_redesign or ans.has_partitions or ans.meta is not None
        for peer in ans.producers:
            producers[peer.key] = peer  # newer answers overwrite details of the same node
        for pid, peer in ans.partitions.items():
            partitions[pid] = peer
        for ch in ans.channels:
            channels.setdefault(ch, None)
        if ans.meta is not None and (ans.meta.valid or meta is None or not meta.valid):
            meta = ans.meta
    for peer in partitions.values():
        producers.setdefault(peer.key, peer)
    return Topology(
        topic=topic,
        producers=tuple(producers[k] for k in sorted(producers)),
        partitions=dict(sorted(partitions.items())),
        meta=meta,
        channels=tuple(sorted(channels)),
        is_redesign=is_redesign,
        fetched_at=max((a.fetched_at for a in ordered), default=time.time()),
        sources=tuple(sources),
        stale=False,
        topic_not_found=bool(ordered) and not found,
    )
