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
    ``depth_size`` their bytes; the original's ``depth`` excludes in-flight messages."""
    clients = LazyClients(_objects(obj, "clients"))
    depth_size = obj.get("depth_size")
    return ChannelStats(
        name=as_str(obj.get("channel_name")),
        depth=_int(obj.get("depth")),
        backend_depth=_int(obj.get("backend_depth")),
        in_flight_count=_int(obj.get("in_flight_count")),
        deferred_count=_int(obj.get("deferred_count")),
        message_count=_int(obj.get("message_count")),
        requeue_count=_int(obj.get("requeue_count")),
        timeout_count=_int(obj.get("timeout_count")),
        # the redesign has no client_count: count the listed clients instead
        client_count=as_int(obj.get("client_count"), len(clients)),
        paused=bool(obj.get("paused", False)),
        skipped=bool(obj.get("skipped", False)),
        clients=clients,
        depth_bytes=None if depth_size is None else _int(depth_size),
    )


def parse_topic(obj: Mapping[str, Any], node: str, redesign: bool) -> TopicPartitionStats:
    partition: int | None = None
    if redesign:
        partition = as_int(obj.get("topic_partition"), 0)
    return TopicPartitionStats(
        topic=as_str(obj.get("topic_name")),
        partition=partition,
        node=node,
        depth=_int(obj.get("depth")),
        backend_depth=_int(obj.get("backend_depth")),
        message_count=_int(obj.get("message_count")),
        paused=bool(obj.get("paused", False)),
        is_leader=bool(obj.get("is_leader", True)) if redesign else True,
        ordered=bool(obj.get("is_multi_ordered", False)),
        ext=bool(obj.get("is_ext", False)),
        depth_is_bytes=redesign,
        backend_start=_int(obj.get("backend_start")) if redesign else 0,
        channels=tuple(parse_channel(c) for c in _objects(obj, "channels")),
        message_bytes=None if obj.get("message_bytes") is None else _int(obj["message_bytes"]),
    )


def parse_nsqd_stats(
    payload: Any, address: str, *, fetched_at: float, elapsed: float = 0.0
) -> NodeStats:
    """One nsqd's ``/stats?format=json`` into a :class:`NodeStats` (state ``up`` or
    ``unhealthy`` when nsqd itself reports a health other than OK)."""
    data = _data(payload, f"nsqd {address} /stats")
    redesign = is_redesign_payload(data)
    health = as_str(data.get("health")) or "OK"
    topics = tuple(parse_topic(t, address, redesign) for t in _objects(data, "topics"))
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
    body: bytes | str, address: str, *, fetched_at: float, elapsed: float = 0.0
) -> NodeStats:
    """Decode and parse one ``/stats`` body: the whole per-node work of a poll."""
    with gc_paused():
        return parse_nsqd_stats(decode(body), address, fetched_at=fetched_at, elapsed=elapsed)


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
