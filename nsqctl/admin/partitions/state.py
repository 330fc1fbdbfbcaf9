"""What the redesign cluster says about a topic's partitions: the lookupd leader, the
registered nsqds with youzan's node ids (the move API takes ids, operators see addresses),
and each partition's leader, ISR and catch-up."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from nsqctl.admin.base import (
    NSQ_V1,
    TIMEOUT,
    FamilyUnsupportedError,
    topic_not_found,
)
from nsqctl.admin.leader import EtcdUnreadable, leader_or_etcd_down
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


def absent_copies(
    topic: str,
    p: PartitionState,
    up: Mapping[str, NsqdNode],
    need: int,
    node: str | None = None,
    *,
    etcd_down: bool = False,
) -> tuple[str, str]:
    """The copies of ``p`` (``node`` aside) it misses to take writes without ``node``, in
    words (`` (X in its ISR is down)``, or "" for none), and the advice for a partition
    short of in-sync copies: wait for the copies catching up, bring the down ones back, or,
    with neither, add an nsqd (or, above one replica, lower them). ``up``: the nsqds
    registered now, by HTTP address; ``need``: the in-sync copies it takes writes with.
    Each copy is named as an operator knows it: its TCP address (a youzan node id, of an
    nsqd no lookupd lists, too).

    youzan's catch-up list holds the copies nsqlookupd has assigned to the partition that
    are not in sync yet: a new copy (a move's target, or the nsqd its topic check found to
    replace a lost one) and a failed ISR member it took out of the ISR. Each syncs from the
    leader and joins the ISR once caught up (``handleRequestJoinISR``). So a catch-up copy
    that is up and has a copy to sync from (a leader, or an in-sync copy up to elect) is
    the copy the partition is waiting for, not a missing nsqd; one that is down comes back
    into the list when brought back. Only with no catch-up copy, and none down, does the
    partition need an nsqd the cluster lacks (nsqlookupd already assigns any free one).

    ``etcd_down``: nsqlookupd cannot read etcd, so it changes no ISR until etcd is back: a
    copy catching up cannot join, a lost one cannot be dropped or replaced. Then the advice
    is etcd first, with the absent copies if any."""
    # loaded here, not at import: every command's --help would pay for the stats parser
    from nsqctl.stats.parse import node_id_key

    def name(a: str) -> str:
        return up[a].tcp if a in up else node_id_key(a) or a

    others = [a for a in p.isr if a != node]
    pending = [a for a in p.catchup if a not in p.isr and a != node]
    source = any(a in up for a in (p.leader, *p.isr) if a)  # node included: it is up now
    catching = [name(a) for a in pending if a in up] if source else []
    absent = [
        (kind, [a for a in members if a not in up])
        for kind, members in (("ISR", others), ("catch-up list", pending))
    ]
    split = [
        (kind, [name(a) for a in ms if not is_hung(a, up)], [name(a) for a in ms if is_hung(a, up)])
        for kind, ms in absent
    ]
    down = [n for _, gone, _ in split for n in gone]
    hung = [n for _, _, stopped in split for n in stopped]
    said = [
        f"{', '.join(names)} in its {kind} is {state}"
        for kind, gone, stopped in split
        for state, names in (("down", gone), (HUNG, stopped))
        if names
    ]
    if catching:
        said.append(f"{', '.join(catching)} in its catch-up list is catching up")
    named = f" ({'; '.join(said)})" if said else ""
    # what brings the partition back to ``need``: the absent copies, else a new nsqd
    brought = ([f"bring {', '.join(down)} back"] if down else []) + (
        [f"resume {', '.join(hung)} (or bring {them(hung)} back if crashed)"] if hung else []
    )
    # fewer replicas need fewer nsqds, but a partition of one replica has no fewer
    lower = " (or lower its replicas with `topic_update`)" if need > 1 else ""
    more = " and ".join(brought) or f"add an nsqd{lower}"
    if etcd_down:
        also = f" and {more}" if down or hung else ""
        return named, (
            f"bring etcd back{also} first: nsqlookupd can change no ISR while etcd is down "
            "(neither drop a lost copy nor let a caught-up one join)"
        )
    tail = f" ({stop_for_good(hung)})" if hung else ""
    if not catching:
        return named, f"{more} first{tail}"
    waited = ", ".join(catching)
    joins = "it joins" if len(catching) == 1 else "they join"
    watch = f" (`lookup({topic})` shows when {joins} the ISR)"
    if len(catching) >= need - sum(1 for a in others if a in up):
        return named, f"wait for {waited} to catch up first{watch}"
    return named, f"wait for {waited} to catch up and {more} first{watch}{tail}"


HUNG = "registered but not answering (stopped, or crashed and not yet dropped)"
"""How an ISR member is named that nsqlookupd lists but that does not answer: stopped (a
SIGSTOP, a stalled VM), or crashed with its etcd lease not yet expired, so still listed.
The advice covers both: resume it, or bring it back."""


def them(names: Sequence[str]) -> str:
    return "it" if len(names) == 1 else "them"


def is_hung(address: str, up: Mapping[str, NsqdNode]) -> bool:
    """``address`` (an HTTP address or a youzan node id) is an nsqd nsqlookupd lists that
    did not answer (``up`` a :class:`RegisteredNsqds`; a plain mapping knows of none)."""
    if not isinstance(up, RegisteredNsqds):
        return False
    from nsqctl.stats.parse import node_id_key  # the stats parser, at run time only

    return up.silent_http(node_id_key(address) or address) is not None


def stop_for_good(names: Sequence[str]) -> str:
    """The other way out for ISR members that hang. youzan's nsqlookupd counts an nsqd by
    its etcd lease, which a stopped process no longer renews: the coordinator has lost it
    already, moves it to the catch-up list while enough in-sync copies remain and copies
    its partitions to other nsqds after its migrate wait. Resumed, it syncs and rejoins;
    stopped for good, that repair goes on without it; a crashed one is the same, once
    its lease has expired."""
    it = them(names)
    return (
        f"or stop {it} for good, or wait for nsqlookupd to drop {it}: it then repairs the "
        f"partition without {it}"
    )


async def redesign_leader(client: httpx.AsyncClient, lookupd_http: Sequence[str], what: str) -> str:
    """The lookupd leader; a one-line error on an original cluster or without ``lookupd_http``."""
    found = await redesign_leader_or_etcd_down(client, lookupd_http, what)
    if isinstance(found, EtcdUnreadable):
        raise found.error()
    return found


async def redesign_leader_or_etcd_down(
    client: httpx.AsyncClient, lookupd_http: Sequence[str], what: str
) -> str | EtcdUnreadable:
    """:func:`redesign_leader`, or what nsqlookupd answered when it cannot read etcd (for
    what can be asked of a non-leader nsqlookupd's memory and the partition leaders)."""
    if not lookupd_http:
        raise ConfigError(f"{what} needs `lookupd_http`: the redesign's nsqlookupd leader does it")
    leader = await leader_or_etcd_down(client, lookupd_http)
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


class RegisteredNsqds(dict[str, NsqdNode]):
    """The nsqds registered with the lookupd leader that answered, by HTTP address: those
    an operation can involve. ``silent``: ``(http, tcp)`` of each it lists that did not
    answer now (hung, or gone since nsqlookupd last heard of it), so that a refusal can
    say that rather than that nsqlookupd does not list it."""

    silent: tuple[tuple[str, str], ...] = ()

    def silent_http(self, address: str) -> str | None:
        """The HTTP address of the silent nsqd at ``address`` (HTTP or TCP); None if none."""
        return next((http for http, tcp in self.silent if address in (http, tcp)), None)


async def registered_nsqds(client: httpx.AsyncClient, leader: str) -> RegisteredNsqds:
    """Every nsqd registered with the lookupd leader that answers, by HTTP address, with
    its node id (``broadcast_address:rpc_port:tcp_port:id``, youzan's ``GenNsqdNodeID``);
    the others in ``silent``."""
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

    listed = [p for p in peers if p.http_port > 0]
    found = await asyncio.gather(*(one(p) for p in listed))
    nodes = RegisteredNsqds({n.http: n for n in found if n is not None})
    nodes.silent = tuple(
        (p.http_key, p.key) for p, n in zip(listed, found, strict=True) if n is None
    )
    return nodes


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
