"""Where a topic lives (:class:`Placement`), found from a lookup or from the nsqds'
``/stats``: the input of every planner."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from nsqctl.admin.base import NSQ_V1, TIMEOUT, topic_not_found, unwrap_response
from nsqctl.admin.requests import Node, error_text
from nsqctl.errors import AdminError, ConfigError
from nsqctl.httpclient import describe_http_error
from nsqctl.lookup.client import LookupClient
from nsqctl.lookup.model import TopicMeta, Topology
from nsqctl.protocol.message import Family


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
    address as ``nsqctl lookup`` shows it, its hostname), from the lookup."""

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
    )


def placement_from_leaders(
    topic: str, family: Family, leaders: Iterable[tuple[str, int | None]]
) -> Placement:
    """A placement the caller already knows, e.g. from its last ``/stats`` poll: each
    ``(nsqd HTTP address, partition)`` leading a partition (on the original family every
    nsqd holding the topic, partition None). Nothing is asked."""
    nodes = tuple(Node(address, "nsqd", partition) for address, partition in leaders)
    return Placement(topic, family, nodes)


def placement_from_stats(topic: str, stats: dict[str, dict[str, Any] | str]) -> Placement:
    """Nodes from nsqd ``/stats`` (no lookupd): nsqds holding the topic; leaders only on the
    redesign (its topics carry ``topic_partition`` and ``is_leader``)."""
    nodes: list[Node] = []
    unreachable: list[tuple[str, str]] = []
    channels: set[str] = set()
    redesign = False
    for address, body in stats.items():
        if isinstance(body, str):
            unreachable.append((address, body))
            continue
        for t in body.get("topics") or []:
            if t.get("topic_name") != topic:
                continue
            channels.update(c.get("channel_name", "") for c in t.get("channels") or [])
            if "topic_partition" in t:
                redesign = True
                if t.get("is_leader", True):
                    nodes.append(Node(address, "nsqd", int(t["topic_partition"])))
            else:
                nodes.append(Node(address, "nsqd"))
    return Placement(
        topic,
        "redesign" if redesign else "original",
        tuple(nodes),
        channels=tuple(sorted(c for c in channels if c)),
        unreachable=tuple(unreachable),
    )


async def fetch_stats(
    client: httpx.AsyncClient, nsqd_http: Sequence[str], topic: str | None = None
) -> dict[str, dict[str, Any] | str]:
    """``/stats?format=json`` from each nsqd; an error string for those that fail."""

    async def one(address: str) -> dict[str, Any] | str:
        params = {"format": "json", **({"topic": topic} if topic else {})}
        try:
            resp = await client.get(f"http://{address}/stats", params=params, headers=NSQ_V1)
        except httpx.HTTPError as err:
            return describe_http_error(err)
        if resp.status_code != 200:
            return error_text(resp)
        try:
            return unwrap_response(resp.json())
        except ValueError:
            return "answered non-JSON: is this nsqd's HTTP port (default 4151)?"

    found = await asyncio.gather(*(one(a) for a in nsqd_http))
    return dict(zip(nsqd_http, found, strict=True))


async def locate_topic(
    topic: str,
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    client: httpx.AsyncClient,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Placement:
    """Where ``topic`` lives, via lookupd when given (as nsqadmin), else the nsqds' /stats.

    Raises :class:`TopicNotFoundError` when nobody knows it.
    """
    if lookupd_http:
        async with LookupClient(list(lookupd_http), timeout=TIMEOUT, transport=transport) as lk:
            topo = await lk.lookup(topic, "r", metainfo=True)
        if topo.topic_not_found:
            raise topic_not_found(topic, [f"nsqlookupd {a}" for a in lookupd_http])
        return placement_from_topology(topo, lookupd_http)
    placement = placement_from_stats(topic, await fetch_stats(client, nsqd_http, topic))
    if not placement.nsqds and not placement.unreachable:
        raise topic_not_found(topic, [f"nsqd {a}" for a in nsqd_http])
    if not placement.nsqds:
        raise AdminError(
            "no nsqd answered: "
            + "; ".join(f"{a} ({e})" for a, e in placement.unreachable)
            + ": check the --nsqd-http addresses (nsqd's HTTP port, default 4151)"
        )
    return placement
