"""What the redesign cluster says about a topic's partitions: the lookupd leader, the
registered nsqds with youzan's node ids (the move API takes ids, operators see addresses),
and each partition's leader, ISR and catch-up."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import httpx

from nsqctl.admin.base import (
    NSQ_V1,
    TIMEOUT,
    FamilyUnsupportedError,
    topic_not_found,
)
from nsqctl.admin.leader import find_leader
from nsqctl.errors import AdminError, ConfigError, NsqctlError
from nsqctl.lookup.client import LookupClient
from nsqctl.lookup.topology import Peer, TopicMeta, parse_nodes_body


class NotRedesignError(FamilyUnsupportedError):
    """The cluster is the original NSQ, which has no partitions to operate on."""


@dataclass(frozen=True)
class NsqdNode:
    """A registered nsqd: the address operators see and the node id nsqlookupd uses."""

    http: str
    tcp: str
    node_id: str


@dataclass(frozen=True)
class PartitionState:
    """One partition as its leader reports it; nodes are nsqd HTTP addresses."""

    partition: int
    leader: str | None
    isr: tuple[str, ...] = ()
    catchup: tuple[str, ...] = ()


@dataclass(frozen=True)
class TopicState:
    """A redesign topic's meta and partitions, from the lookupd leader and the leaders."""

    topic: str
    meta: TopicMeta
    partitions: dict[int, PartitionState] = field(default_factory=dict)

    @property
    def allow_multi(self) -> bool:
        """Several partitions of the topic may share an nsqd (ordered or multi-part)."""
        return self.meta.ordered or self.meta.multi_part

    def describe(self, part: int) -> str:
        p = self.partitions.get(part)
        if p is None:
            return f"partition {part}: no leader reported"
        isr = ", ".join(p.isr) or "?"
        catchup = f", catching up: {', '.join(p.catchup)}" if p.catchup else ""
        return f"partition {part}: leader {p.leader or '-'}, ISR [{isr}]{catchup}"


def quorum(replicas: int) -> int:
    """In-sync copies a partition of ``replicas`` needs to take writes: more than
    ``replicas/2`` (youzan's ``IsISRReadyForWrite``, integer division)."""
    return max(1, replicas) // 2 + 1


def absent_copies(
    p: PartitionState, up: Collection[str], node: str | None = None
) -> tuple[str, str]:
    """The copies of ``p`` (``node`` aside) on nsqds not ``up`` (registered now), in words
    (`` (X in its ISR is down)``, or "" for none), and the advice for a partition short of
    in-sync copies: bring them back, or, with none down, add an nsqd (or lower its
    replicas). Each is named as an operator knows it (a youzan node id as its TCP address).

    A down copy counts in its ISR (youzan cannot drop it, too few would remain) or in its
    catch-up list, where youzan puts a copy that failed and a leader it elected another in
    place of: either one, back and caught up, is the copy the partition misses, so it is
    named rather than an nsqd asked for that the cluster already has."""
    # loaded here, not at import: every command's --help would pay for the stats parser
    from nsqctl.stats.parse import node_id_key

    where = (("ISR", p.isr), ("catch-up list", [a for a in p.catchup if a not in p.isr]))
    down = [
        (kind, [node_id_key(a) or a for a in members if a != node and a not in up])
        for kind, members in where
    ]
    down = [(kind, names) for kind, names in down if names]
    if not down:
        return "", "add an nsqd (or lower its replicas) first"
    named = "; ".join(f"{', '.join(names)} in its {kind} is down" for kind, names in down)
    return f" ({named})", f"bring {', '.join(n for _, names in down for n in names)} back first"


async def redesign_leader(client: httpx.AsyncClient, lookupd_http: Sequence[str], what: str) -> str:
    """The lookupd leader; a one-line error on an original cluster or without ``lookupd_http``."""
    if not lookupd_http:
        raise ConfigError(f"{what} needs `lookupd_http`: the redesign's nsqlookupd leader does it")
    leader = await find_leader(client, lookupd_http)
    if leader is None:
        raise NotRedesignError(
            f"{what} needs a redesign (youzan) cluster: nsqlookupd {lookupd_http[0]} is the "
            "original NSQ, whose topics have no partitions"
        )
    return leader


async def _config(client: httpx.AsyncClient, address: str, option: str) -> str:
    """One nsqd option from ``GET /config/OPTION`` (only the non-secret ones we ask for)."""
    resp = await client.get(f"http://{address}/config/{option}", headers=NSQ_V1)
    if resp.status_code != 200:
        raise AdminError(f"nsqd {address} did not tell its {option} (HTTP {resp.status_code})")
    from nsqctl import answers

    if not answers.is_json(resp.content):
        return resp.text.strip()
    path = f"/config/{option}"
    value = answers.decode_value(resp.content, str | int, role="nsqd", source=address, path=path)
    return str(value).strip()


async def registered_nsqds(client: httpx.AsyncClient, leader: str) -> dict[str, NsqdNode]:
    """Every nsqd registered with the lookupd leader, by HTTP address, with its node id
    (``broadcast_address:rpc_port:tcp_port:id``, youzan's ``GenNsqdNodeID``)."""
    try:
        resp = await client.get(f"http://{leader}/nodes", headers=NSQ_V1)
    except httpx.HTTPError as err:
        raise AdminError(f"nsqlookupd {leader} /nodes failed: {err}") from None
    peers = parse_nodes_body(resp.content, source=leader)
    if peers is None:
        raise AdminError(f"nsqlookupd {leader} /nodes failed: the answer is not JSON")

    async def one(peer: Peer) -> NsqdNode | None:
        try:
            rpc, ident = await asyncio.gather(
                _config(client, peer.http_key, "rpc_port"), _config(client, peer.http_key, "id")
            )
        except (httpx.HTTPError, NsqctlError):
            return None  # unreachable now, or an odd answer: not a valid target anyway
        node_id = f"{peer.broadcast_address}:{rpc}:{peer.tcp_port}:{ident}"
        return NsqdNode(peer.http_key, peer.key, node_id)

    found = await asyncio.gather(*(one(p) for p in peers if p.http_port > 0))
    return {n.http: n for n in found if n is not None}


def _http_of(node_id: str, nodes: dict[str, NsqdNode]) -> str:
    """A node id as the nsqd's HTTP address (the id itself when no registered nsqd has it)."""
    for n in nodes.values():
        if n.node_id == node_id:
            return n.http
    parts = node_id.split(":")
    if len(parts) == 4:
        for n in nodes.values():
            if n.tcp == f"{parts[0]}:{parts[2]}":
                return n.http
    return node_id


async def _coordinator(
    client: httpx.AsyncClient, nsqd: str, topic: str
) -> dict[int, tuple[tuple[str, ...], tuple[str, ...]]]:
    """partition → (ISR ids, catch-up ids) from one nsqd's ``/coordinator/stats?topic=``."""
    from nsqctl.stats.parse import parse_coordinator_stats  # the stats model, at run time only

    with contextlib.suppress(httpx.HTTPError, ValueError, NsqctlError):
        resp = await client.get(f"http://{nsqd}/coordinator/stats", params={"topic": topic})
        if resp.status_code == 200:
            infos = parse_coordinator_stats(resp.json(), nsqd)
            return {i.partition: (i.isr, i.catchup) for i in infos if i.topic == topic}
    return {}


async def leader_load_factors(client: httpx.AsyncClient, leader: str) -> dict[str, float]:
    """nsqd HTTP address → youzan's leader load factor (``/cluster/stats`` of the lookupd
    leader): a new leader is the in-sync copy with the least. {} when not told."""
    from nsqctl.stats.parse import parse_cluster_stats  # the stats model, at run time only

    with contextlib.suppress(httpx.HTTPError, ValueError, NsqctlError):
        resp = await client.get(f"http://{leader}/cluster/stats", headers=NSQ_V1)
        if resp.status_code == 200:
            return {
                n.address: n.leader_load_factor
                for n in parse_cluster_stats(resp.json(), leader).nodes
            }
    return {}


async def topic_state(
    client: httpx.AsyncClient,
    leader: str,
    topic: str,
    nodes: dict[str, NsqdNode],
) -> TopicState:
    """Meta and partition leaders from the lookupd leader, ISR and catch-up from each
    partition's leader. Raises :class:`TopicNotFoundError` for an unknown topic.

    The lookup is ``consistent``: each partition on the leader nsqlookupd knows from etcd.
    Without it, a partition is listed on any nsqd still registered for it, which right
    after an election may be the previous leader (seen: a leader move read as going back
    to the old leader)."""
    async with LookupClient([leader], timeout=TIMEOUT) as lk:
        topo = await lk.lookup(topic, "r", metainfo=True, consistent=True)
    if topo.topic_not_found or topo.meta is None:
        raise topic_not_found(topic, [f"nsqlookupd {leader}"])
    leaders = {p.partition: p.leader.http_key for p in topo.partition_infos}
    coords = await asyncio.gather(*(_coordinator(client, a, topic) for a in leaders.values()))
    parts: dict[int, PartitionState] = {}
    for (part, address), coord in zip(leaders.items(), coords, strict=True):
        isr, catchup = coord.get(part, ((), ()))
        parts[part] = PartitionState(
            part,
            address,
            tuple(_http_of(n, nodes) for n in isr),
            tuple(_http_of(n, nodes) for n in catchup),
        )
    return TopicState(topic, topo.meta, dict(sorted(parts.items())))
