"""Parse nsqd ``/stats``, ``/coordinator/stats`` and lookupd ``/cluster/stats`` (both families).

Pure functions over already-decoded JSON. Bodies may arrive wrapped in the v1
``{status_code, status_txt, data}`` envelope; :func:`unwrap_payload` from the lookup
package removes it, so every endpoint is handled the same way.

A big cluster's ``/stats`` lists tens of thousands of client connections per poll while the
dashboard shows one channel's at a time, so clients are parsed lazily (:class:`LazyClients`);
only RDY and in-flight, which the channel rules need, are read eagerly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, overload

from nsqctl.errors import NsqctlError, ProtocolError
from nsqctl.lookup.model import Peer, as_int, as_str, unwrap_payload
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

_loads: Callable[[bytes | str], Any]
try:  # much faster than the stdlib on multi-megabyte /stats bodies
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is a dependency; keep working without it
    _loads = json.loads


class StatsProtocolError(ProtocolError):
    """An nsqd or lookupd answered with something that is not the expected stats body."""


def decode(body: bytes | str) -> Any:
    """Decode a JSON body (raises ``ValueError`` on bad JSON, like :func:`json.loads`)."""
    return _loads(body)


def _int(value: Any) -> int:
    """:func:`as_int` with a fast path for the common case (already an int)."""
    return value if type(value) is int else as_int(value)


def _data(payload: Any, what: str) -> Mapping[str, Any]:
    data, status, text = unwrap_payload(payload)
    if status != 200:
        raise StatsProtocolError(f"{what} answered an error: {text or status}")
    if not isinstance(data, Mapping):
        raise StatsProtocolError(f"{what} sent a non-object body")
    return data


def _list(obj: Mapping[str, Any], key: str) -> list[Any]:
    value = obj.get(key)
    return value if isinstance(value, list) else []


def _objects(obj: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """The JSON objects listed under ``key`` (decoded JSON gives dicts: checked first)."""
    return [x for x in _list(obj, key) if type(x) is dict or isinstance(x, Mapping)]


def is_redesign_payload(data: Mapping[str, Any]) -> bool:
    """Redesign nsqd versions carry ``-HA.``; its topics carry ``topic_partition``."""
    if "HA" in as_str(data.get("version")):
        return True
    return any(isinstance(t, Mapping) and "topic_partition" in t for t in _list(data, "topics"))


def parse_client(obj: Mapping[str, Any]) -> ClientStats:
    timeout = obj.get("timeout_count")
    return ClientStats(
        client_id=as_str(obj.get("client_id")) or as_str(obj.get("name")),
        hostname=as_str(obj.get("hostname")),
        remote_address=as_str(obj.get("remote_address")),
        user_agent=as_str(obj.get("user_agent")),
        ready_count=_int(obj.get("ready_count")),
        in_flight_count=_int(obj.get("in_flight_count")),
        message_count=_int(obj.get("message_count")),
        finish_count=_int(obj.get("finish_count")),
        requeue_count=_int(obj.get("requeue_count")),
        timeout_count=None if timeout is None else _int(timeout),
        connect_ts=_int(obj.get("connect_ts")),
        tls=bool(obj.get("tls", False)),
        snappy=bool(obj.get("snappy", False)),
        deflate=bool(obj.get("deflate", False)),
        desired_tag=as_str(obj.get("desired_tag")),
        tls_version=as_str(obj.get("tls_version")),
        authed=bool(obj.get("authed", False)),
        auth_identity=as_str(obj.get("auth_identity")),
    )


class LazyClients(Sequence[ClientStats]):
    """A channel's clients as a sequence of :class:`ClientStats`, parsed on first access.

    ``loads`` holds every client's ``(ready_count, in_flight_count)``, read at once because
    the channel's starved/stalled rules and RDY total need them on every poll.
    """

    __slots__ = ("_parsed", "_raw", "loads")

    def __init__(self, raw: Sequence[Mapping[str, Any]]) -> None:
        self._raw = raw
        self._parsed: tuple[ClientStats, ...] | None = None
        self.loads = [(_int(c.get("ready_count")), _int(c.get("in_flight_count"))) for c in raw]

    def _all(self) -> tuple[ClientStats, ...]:
        if self._parsed is None:
            self._parsed = tuple(parse_client(c) for c in self._raw)
            self._raw = ()  # the records replace the decoded JSON
        return self._parsed

    def __len__(self) -> int:
        return len(self.loads)

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


def client_loads(clients: Sequence[ClientStats]) -> Sequence[tuple[int, int]]:
    """``(ready_count, in_flight_count)`` per client without parsing lazy clients."""
    if isinstance(clients, LazyClients):
        return clients.loads
    return [(c.ready_count, c.in_flight_count) for c in clients]


def parse_channel(obj: Mapping[str, Any]) -> ChannelStats:
    """On the redesign ``depth`` counts messages not yet confirmed (in flight included) and
    ``depth_size`` their bytes; the original's ``depth`` excludes in-flight messages.

    Asked without clients, both families send ``"clients": null`` (an empty list when
    asked with them and none is connected) and still count them: the original as
    ``client_count``, the redesign as ``client_num``.
    """
    get = obj.get  # a big cluster has tens of thousands of channel records per poll
    listed = type(get("clients")) is list
    clients: Sequence[ClientStats] = LazyClients(_objects(obj, "clients")) if listed else ()
    count = get("client_count")
    if count is None:
        count = get("client_num")
    depth_size = get("depth_size")
    name = get("channel_name")
    # Each counter is an int as decoded (_int, a call each, is for other spellings), and
    # the record is built from positional arguments, in ChannelStats' field order: matching
    # keywords by name is a large share of building one (bench/README.md, Dashboard).
    depth, backend, in_flight = get("depth"), get("backend_depth"), get("in_flight_count")
    deferred, msgs = get("deferred_count"), get("message_count")
    requeued, timed_out = get("requeue_count"), get("timeout_count")
    return ChannelStats(
        name if type(name) is str else as_str(name),
        depth if type(depth) is int else as_int(depth),
        backend if type(backend) is int else as_int(backend),
        in_flight if type(in_flight) is int else as_int(in_flight),
        deferred if type(deferred) is int else as_int(deferred),
        msgs if type(msgs) is int else as_int(msgs),
        requeued if type(requeued) is int else as_int(requeued),
        timed_out if type(timed_out) is int else as_int(timed_out),
        count if type(count) is int else as_int(count, len(clients)),  # client_count
        bool(get("paused", False)),
        bool(get("skipped", False)),
        clients,
        None if depth_size is None else _int(depth_size),  # depth_bytes
        listed,  # clients_listed
    )


def _partition(obj: Mapping[str, Any], redesign: bool) -> int | None:
    """A redesign copy's partition (sent as a string of digits); None on the original."""
    if not redesign:
        return None
    part = obj.get("topic_partition")
    return int(part) if type(part) is str and part.isdigit() else as_int(part, 0)


def parse_topic(obj: Mapping[str, Any], node: str, redesign: bool) -> TopicPartitionStats:
    get = obj.get
    message_bytes = get("message_bytes")
    # positional, in TopicPartitionStats' field order (see parse_channel: tens of thousands)
    return TopicPartitionStats(
        as_str(get("topic_name")),
        _partition(obj, redesign),
        node,
        _int(get("depth")),
        _int(get("backend_depth")),
        _int(get("message_count")),
        bool(get("paused", False)),
        bool(get("is_leader", True)) if redesign else True,  # is_leader
        bool(get("is_multi_ordered", False)),  # ordered
        bool(get("is_ext", False)),  # ext
        redesign,  # depth_is_bytes
        _int(get("backend_start")) if redesign else 0,
        tuple([parse_channel(c) for c in _objects(obj, "channels")]),
        None if message_bytes is None else _int(message_bytes),
    )


CopyKey = tuple[str, int | None]
"""A topic copy on one nsqd: topic and partition (None on the original family)."""


def _overlaid(base: TopicPartitionStats, top: TopicPartitionStats) -> TopicPartitionStats:
    """``top`` (the same copy read later, maybe narrowed to some channels) with the
    channels it lacks taken from ``base``."""
    names = {c.name for c in top.channels}
    kept = tuple(c for c in base.channels if c.name not in names)
    return replace(top, channels=top.channels + kept) if kept else top


def _completed(detail: TopicPartitionStats, obj: Mapping[str, Any]) -> TopicPartitionStats:
    """``detail`` with the channels it lacks parsed from ``obj`` (the same copy, as the
    whole node's answer has it): only those are parsed."""
    names = {c.name for c in detail.channels}
    missing = tuple(
        parse_channel(c)
        for c in _objects(obj, "channels")
        if as_str(c.get("channel_name")) not in names
    )
    return replace(detail, channels=detail.channels + missing) if missing else detail


def _topics(
    objs: list[Mapping[str, Any]],
    node: str,
    redesign: bool,
    details: Mapping[CopyKey, TopicPartitionStats],
) -> tuple[TopicPartitionStats, ...]:
    """The topic copies, each one in ``details`` taken from there (its channels there
    are not parsed again); a detailed copy that ``objs`` lacks (made meanwhile) comes last."""
    if not details:
        return tuple(parse_topic(t, node, redesign) for t in objs)
    detailed = {topic for topic, _ in details}
    left = dict(details)
    out: list[TopicPartitionStats] = []
    for obj in objs:
        name = as_str(obj.get("topic_name"))
        detail = left.pop((name, _partition(obj, redesign)), None) if name in detailed else None
        out.append(parse_topic(obj, node, redesign) if detail is None else _completed(detail, obj))
    out.extend(left.values())
    return tuple(out)


def parse_nsqd_stats(
    payload: Any,
    address: str,
    *,
    fetched_at: float,
    elapsed: float = 0.0,
    details: Mapping[CopyKey, TopicPartitionStats] | None = None,
) -> NodeStats:
    """One nsqd's ``/stats?format=json`` into a :class:`NodeStats` (state ``up`` or
    ``unhealthy`` when nsqd itself reports a health other than OK). ``details``: topic
    copies from narrower answers of the same nsqd, used instead of this payload's, which
    gives only the channels they lack."""
    data = _data(payload, f"nsqd {address} /stats")
    redesign = is_redesign_payload(data)
    health = as_str(data.get("health")) or "OK"
    topics = _topics(_objects(data, "topics"), address, redesign, details or {})
    return NodeStats(
        address=address,
        fetched_at=fetched_at,
        state="up" if health == "OK" else "unhealthy",
        version=as_str(data.get("version")),
        health=health,
        start_time=as_int(data.get("start_time")),
        is_redesign=redesign,
        elapsed=elapsed,
        topics=topics,
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
                narrow = parse_nsqd_stats(decode(detail), address, fetched_at=fetched_at)
            except (ValueError, StatsProtocolError):  # bad JSON, an error envelope
                continue
            for t in narrow.topics:
                key = (t.topic, t.partition)
                copies[key] = _overlaid(copies[key], t) if key in copies else t
        return parse_nsqd_stats(
            decode(body), address, fetched_at=fetched_at, elapsed=elapsed, details=copies
        )


def _node_ids(items: Any) -> tuple[str, ...]:
    if not isinstance(items, list):
        return ()  # the server sends null for an empty list
    return tuple(
        as_str(i.get("node_id")) or as_str(i.get("hostname"))
        for i in items
        if isinstance(i, Mapping)
    )


def parse_coordinator_stats(payload: Any, reported_by: str) -> tuple[CoordInfo, ...]:
    """Redesign nsqd ``/coordinator/stats?topic=T``: ``topic_coord_stats``, one entry per
    partition of T this nsqd holds (none at all when no ``topic`` is given)."""
    data = _data(payload, f"nsqd {reported_by} /coordinator/stats")
    return tuple(
        CoordInfo(
            topic=as_str(item.get("name")),
            partition=as_int(item.get("partition")),
            reported_by=as_str(item.get("node")) or reported_by,
            isr=_node_ids(item.get("isr_stats")),
            catchup=_node_ids(item.get("catchup_stats")),
        )
        for item in _list(data, "topic_coord_stats")
        if isinstance(item, Mapping)
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


def parse_cluster_stats(payload: Any) -> ClusterStability:
    """Redesign lookupd leader ``/cluster/stats``: ``stable`` and per-node load factors."""
    data = _data(payload, "nsqlookupd /cluster/stats")
    nodes = []
    for item in _list(data, "node_stat_list"):
        if not isinstance(item, Mapping):
            continue
        host = as_str(item.get("broadcast_address")) or as_str(item.get("hostname"))
        nodes.append(
            ClusterNodeLoad(
                address=f"{host}:{as_int(item.get('http_port'))}",
                hostname=as_str(item.get("hostname")),
                leader_load_factor=float(item.get("leader_load_factor") or 0.0),
                node_load_factor=float(item.get("node_load_factor") or 0.0),
            )
        )
    return ClusterStability(stable=bool(data.get("stable", False)), nodes=tuple(nodes))


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
    data = _data(payload, f"nsqd {address} /info")
    host, port = as_str(data.get("broadcast_address")), as_int(data.get("tcp_port"))
    if not host or port <= 0:
        raise StatsProtocolError(f"nsqd {address} /info lacks broadcast_address/tcp_port")
    return f"{host}:{port}"


def nsqd_http_addresses(producers: list[dict[str, Any]]) -> list[str]:
    """nsqd HTTP addresses (``broadcast_address:http_port``) from lookupd ``/nodes``."""
    return list(dict.fromkeys(nsqd_tcp_to_http(producers).values()))
