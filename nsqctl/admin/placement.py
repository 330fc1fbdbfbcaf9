"""Where a topic lives (:class:`Placement`), found from a lookup or from the nsqds'
``/stats``: the input of every planner."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import httpx

from nsqctl.addresses import HostPort, resolve_endpoints
from nsqctl.admin.base import TIMEOUT, topic_not_found
from nsqctl.admin.requests import Node
from nsqctl.errors import AdminError, ConfigError, NsqctlError
from nsqctl.lookup.client import LookupClient
from nsqctl.lookup.topology import TopicMeta, Topology
from nsqctl.protocol.raw_message import Family

if TYPE_CHECKING:
    from nsqctl.stats.model import NodeStats


@dataclass(frozen=True)
class Placement:
    """Where one topic lives: the nsqds to act on and the lookupds that know it."""

    topic: str
    family: Family
    nsqds: tuple[Node, ...] = ()
    lookupds: tuple[str, ...] = ()
    meta: TopicMeta | None = None
    channels: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    unreachable: tuple[tuple[str, str], ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    """``(name, nsqd HTTP address)``: other names an operator may give a node (its TCP
    address as ``nsqctl lookup`` shows it, its hostname) from the lookup, and each nsqd
    HTTP address the caller gave that reaches a node kept under another spelling."""
    leaderless: tuple[int, ...] = ()
    """Redesign partitions the topic's meta counts that no lookupd names a leader for
    (every nsqd holding them down): not in ``nsqds``, and not measurable."""
    unlisted: tuple[str, ...] = ()
    """Of ``nsqds``, those given by the caller that answer and hold the topic but that no
    nsqlookupd lists: a consumer following the lookup would never reach them."""

    def resolve_node(self, name: str) -> str:
        """The nsqd HTTP address ``name`` stands for: an HTTP address of a node holding
        the topic is itself; else an alias (TCP address, hostname) naming exactly one.
        An unknown name comes back unchanged (the caller says who holds the topic)."""
        if any(n.address == name for n in self.nsqds):
            return name
        found = sorted({address for alias, address in self.aliases if alias == name})
        if len(found) > 1:
            raise ConfigError(
                f"{name} names several nsqds ({', '.join(found)}): give one's HTTP address",
                setting="node",
            )
        return found[0] if found else name


def placement_from_topology(topo: Topology, lookupds: Sequence[str]) -> Placement:
    """Nodes from a lookup: each partition's leader (redesign) or each producer (original)."""
    family: Family = "redesign" if topo.is_redesign else "original"
    nodes = tuple(
        Node(peer.http_key, "nsqd", part if family == "redesign" else None)
        for peer, part in topo.targets()
    )
    warnings = tuple(
        f"nsqlookupd {s.address} did not answer: {s.error}" for s in topo.sources if not s.ok
    )
    peers = [peer for peer, _ in topo.targets()]
    aliases = tuple(
        (alias, peer.http_key)
        for peer in peers
        for alias in {peer.key, peer.hostname} - {""}
        if alias != peer.http_key
    )
    return Placement(
        topo.topic,
        family,
        nodes,
        tuple(lookupds),
        topo.meta,
        topo.channels,
        warnings,
        aliases=aliases,
        leaderless=topo.leaderless_partitions if family == "redesign" else (),
    )


def placement_from_leaders(
    topic: str, family: Family, leaders: Iterable[tuple[str, int | None]]
) -> Placement:
    """A placement the caller already knows, e.g. from its last ``/stats`` poll: each
    ``(nsqd HTTP address, partition)`` leading a partition (on the original family every
    nsqd holding the topic, partition None). Nothing is asked."""
    nodes = tuple(Node(address, "nsqd", partition) for address, partition in leaders)
    return Placement(topic, family, nodes)


@dataclass(frozen=True)
class NsqdStats:
    """Several nsqds' ``/stats`` as the one reader (:mod:`nsqctl.stats.read`) gives them:
    the records of those that answered, and why each other one did not (the reader's
    message, which names the nsqd)."""

    nodes: dict[str, NodeStats] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def placement_from_stats(topic: str, stats: NsqdStats) -> Placement:
    """Nodes from nsqd ``/stats`` (no lookupd): nsqds holding the topic; leaders only on the
    redesign (its topics carry a partition and whether this nsqd leads it)."""
    nodes: list[Node] = []
    channels: set[str] = set()
    redesign = False
    for address, node in stats.nodes.items():
        for t in node.topics:
            if t.topic != topic:
                continue
            channels.update(c.name for c in t.channels)
            if t.partition is not None:
                redesign = True
                if t.is_leader:
                    nodes.append(Node(address, "nsqd", t.partition))
            else:
                nodes.append(Node(address, "nsqd"))
    return Placement(
        topic,
        "redesign" if redesign else "original",
        tuple(nodes),
        channels=tuple(sorted(c for c in channels if c)),
        unreachable=tuple(stats.errors.items()),
    )


async def fetch_stats(
    client: httpx.AsyncClient, nsqd_http: Sequence[str], topic: str | None = None
) -> NsqdStats:
    """Each nsqd's ``/stats`` (narrowed to ``topic`` when given), concurrently, through the
    one reader; an nsqd that cannot be read is kept with the reason, not raised."""
    # Loaded here, not at import: every admin command's start-up (and --help) would pay
    # for the stats parser otherwise.
    from nsqctl.stats.read import fetch_nsqd_stats

    async def one(address: str) -> NodeStats | str:
        try:
            return await fetch_nsqd_stats(client, address, topic=topic)
        except NsqctlError as err:
            return str(err)

    found = await asyncio.gather(*(one(a) for a in nsqd_http))
    stats = NsqdStats()
    for address, got in zip(nsqd_http, found, strict=True):
        if isinstance(got, str):
            stats.errors[address] = got
        else:
            stats.nodes[address] = got
    return stats


def _unseen(
    reach: Mapping[str, frozenset[HostPort]], names: Sequence[str], kept: Sequence[str]
) -> tuple[list[str], list[tuple[str, str]]]:
    """Each of ``names`` (nsqds' HTTP addresses) that reaches none of the endpoints of
    ``kept`` (the addresses already acted on) or of an earlier name kept, and each name dropped
    with the address it stands for. By what a name reaches, not its spelling: the same nsqd
    given as ``localhost:4151`` and listed (or given again) as ``127.0.0.1:4151`` is one
    nsqd, to be acted on once and not warned about; the dropped spelling is an alias of the
    kept one, so ``--node`` in that spelling still names it."""
    owners = {endpoint: address for address in kept for endpoint in reach[address]}
    found: list[str] = []
    aliases: list[tuple[str, str]] = []
    for name in names:
        met = sorted({owners[e] for e in reach[name] if e in owners})
        if not met:
            found.append(name)
            owners.update((e, name) for e in reach[name])
        aliases.extend((name, address) for address in met if address != name)
    return found, aliases


async def _given_not_listed(
    placement: Placement, nsqd_http: Sequence[str], client: httpx.AsyncClient
) -> Placement:
    """``placement`` with each nsqd given that nsqlookupd does not list. One that does not
    answer is :attr:`Placement.unreachable`: an original nsqlookupd forgets a dead nsqd at
    once, so one that was killed may hold the topic and would miss the change (the plan's
    preflight refuses it then). One that answers and holds the topic is acted on too, and
    a warning says so: an nsqd may run without registering, or have been taken off the
    lookup (a drain does that) and still hold the topic, and the operator named it; left
    out, it would miss the change while the command reported success."""
    listed = [n.address for n in placement.nsqds]
    reach = await resolve_endpoints([*listed, *nsqd_http])
    others, aliases = _unseen(reach, nsqd_http, listed)
    placement = replace(placement, aliases=(*placement.aliases, *aliases))
    if not others:
        return placement
    stats = await fetch_stats(client, others, placement.topic)
    holding = [a for a, node in stats.nodes.items() if node.topic(placement.topic) is not None]
    return replace(
        placement,
        nsqds=(*placement.nsqds, *(Node(a, "nsqd") for a in holding)),
        unlisted=(*placement.unlisted, *holding),
        warnings=(
            *placement.warnings,
            *(
                f"nsqd {a} holds {placement.topic} but no nsqlookupd lists it: it was given, "
                "so it is acted on too"
                for a in holding
            ),
        ),
        unreachable=(*placement.unreachable, *stats.errors.items()),
    )


async def locate_topic(
    topic: str,
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    client: httpx.AsyncClient,
) -> Placement:
    """Where ``topic`` lives, via lookupd when given (as nsqadmin), else the nsqds' /stats.

    Raises :class:`TopicNotFoundError` when nobody knows it.
    """
    if lookupd_http:
        async with LookupClient(list(lookupd_http), timeout=TIMEOUT) as lk:
            topo = await lk.lookup(topic, "r", metainfo=True)
        if topo.topic_not_found:
            raise topic_not_found(topic, [f"nsqlookupd {a}" for a in lookupd_http])
        placement = placement_from_topology(topo, lookupd_http)
        if placement.family == "original" and nsqd_http:
            placement = await _given_not_listed(placement, nsqd_http, client)
        return placement
    given, aliases = _unseen(await resolve_endpoints(nsqd_http), nsqd_http, ())
    placement = placement_from_stats(topic, await fetch_stats(client, given, topic))
    placement = replace(placement, aliases=tuple(aliases))
    if not placement.nsqds and not placement.unreachable:
        raise topic_not_found(topic, [f"nsqd {a}" for a in given])
    if not placement.nsqds:
        raise AdminError(
            "no nsqd answered: "
            + "; ".join(e for _, e in placement.unreachable)  # the reader's words name it
            + ": check the nsqd HTTP addresses (nsqd's HTTP port, default 4151)",
            setting="nsqd_http",
        )
    return placement
