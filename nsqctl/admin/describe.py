"""One topic described for ``nsqctl lookup``: family, meta, every partition (leader,
replicas, ISR), nsqds and channels, and what could not be seen.

The lookupd's answer is checked against the nsqds themselves (one ``/stats`` poll of the
topic, plus the redesign's ``/coordinator/stats`` for the ISR): a lookupd lists a
partition only while a live nsqd registers it, and keeps listing a hung leader, so its
answer alone would leave out a partition with no live copy, or show a leader that does not
answer, and "no channels" when the nsqds holding them are down.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nsqctl.admin.base import TIMEOUT, topic_not_found
from nsqctl.errors import AdminError, NotFoundError, NsqctlError
from nsqctl.lookup.client import LookupClient
from nsqctl.lookup.topology import Topology, counted_partitions
from nsqctl.protocol.names import validate_topic

if TYPE_CHECKING:
    from nsqctl.stats.view import ClusterView, PartitionView


def unregistered(isr: Sequence[str]) -> list[str]:
    """The ISR members no nsqlookupd lists: the poller turns every member it can map to a
    registered (or given, answering) nsqd into its HTTP address, so one left as youzan's
    node id (``ip:rpc_port:tcp_port:n``) is an nsqd that is down or gone from the cluster,
    which the coordinator has not dropped from the ISR yet (or cannot: etcd down)."""
    from nsqctl.stats.parse import node_id_key

    return [n for n in isr if node_id_key(n) is not None]


def _partition(
    partition: int,
    topo: Topology,
    held: PartitionView | None,
    down: set[str],
    replicas: int | None,
) -> dict[str, Any]:
    from nsqctl.stats.view import isr_short, stale_copies

    leader = topo.partitions.get(partition)
    copies = None if held is None or not held.live else [held.leader, *held.replicas]
    # an old copy a move left is no replica: listed apart, so replicas match the meta's count
    old = [] if held is None or not held.live else list(stale_copies(held, replicas))
    return {
        "partition": partition,
        "leader_tcp": None if leader is None else str(leader.tcp_address),
        "leader_http": None if leader is None else leader.http_key,
        "hostname": None if leader is None else leader.hostname,
        "leader_answering": None if leader is None else leader.http_key not in down,
        # what the nsqds say: the lookupd may name a leader that does not take writes
        "leader_writable": None if held is None or not held.live else held.write_enabled,
        "live_copy": held is not None and held.live,
        "replicas": None if copies is None else [c for c in copies if c and c not in old],
        "old_copies": old,
        "isr": None if held is None or held.isr is None else list(held.isr),
        "isr_not_registered": None if held is None or held.isr is None else unregistered(held.isr),
        "isr_short": held is not None and isr_short(held, replicas),
        "catchup": None if held is None or held.catchup is None else list(held.catchup),
    }


def isr_member(member: str) -> str:
    """An ISR member as an operator reads it: an nsqd no nsqlookupd lists is named by its
    node id and TCP address and said to be not registered (a bare node id reads like one
    more live copy)."""
    from nsqctl.stats.parse import node_id_key

    tcp = node_id_key(member)
    return member if tcp is None else f"{member} (tcp {tcp}, not registered)"


def isr_members(p: dict[str, Any]) -> list[str]:
    """A partition's ISR (as :func:`describe_topic` gives it) in operator's words."""
    return [isr_member(m) for m in p["isr"] or ()]


def describe_topic(
    topo: Topology, channels: Sequence[str], view: ClusterView | None = None
) -> dict[str, Any]:
    """What ``nsqctl lookup`` shows: family, meta, every partition, nsqds, channels, and
    (with ``view``, the nsqds' own account) what could not be seen."""
    from nsqctl.stats.coverage import coverage, leader_silent_words

    meta = topo.meta
    held = view.topic(topo.topic) if view is not None else None
    by_partition = {p.partition: p for p in held.partitions} if held is not None else {}
    down = {n.address for n in view.nodes if n.stats.state == "down"} if view else set()
    redesign = topo.is_redesign or (held is not None and held.is_redesign)
    parts: list[dict[str, Any]] = []
    if redesign:
        seen = {*topo.partitions, *(p for p in by_partition if p is not None)}
        count = meta.partition_num if meta is not None and meta.valid else 0
        replicas = meta.replica if meta is not None and meta.valid else None
        parts = [
            _partition(p, topo, by_partition.get(p), down, replicas)
            for p in counted_partitions(count, seen)
        ]
    warnings = coverage(view, topo.topic).warnings("channels and copies") if view else []
    for p in parts:
        if p["leader_answering"] is False:
            warnings.append(f"partition {p['partition']}: {leader_silent_words(p['leader_http'])}")
        elif p["leader_writable"] is False and p["leader_http"] is not None:
            warnings.append(
                f"partition {p['partition']}: nsqlookupd names a leader, but no nsqd holding "
                "it takes writes (no writable leader)"
            )
        elif p["leader_writable"] is False:
            # an nsqd holds a copy nsqlookupd places nowhere: with no meta either, data an
            # nsqd kept of a topic deleted while it was down (youzan leaves it on disk)
            held_on = ", ".join(p["replicas"] or ()) or "an nsqd"
            known = meta is not None and meta.valid and meta.partition_num > 0
            unknown = "" if known else " and has no meta for the topic (deleted?)"
            remedy = "" if known else f": `topic_delete({topo.topic})` removes it"
            warnings.append(
                f"partition {p['partition']}: nsqlookupd names no leader{unknown}; the copy "
                f"on {held_on} takes no writes (no writable leader){remedy}"
            )
        if p["isr_short"]:
            warnings.append(
                f"partition {p['partition']}: ISR short: {len(p['isr'])} of "
                f"{meta.replica if meta else '?'} replicas in sync "
                f"({', '.join(isr_members(p))}): a copy is lost or behind"
            )
        for gone in p["isr_not_registered"] or ():
            warnings.append(
                f"partition {p['partition']}: its ISR names {isr_member(gone)}, an nsqd no "
                "nsqlookupd lists: it is down or gone from the cluster, and nsqlookupd has "
                "not dropped it from the ISR yet"
            )
    channels_seen = (
        {*channels, *topo.channels, *(c.name for c in held.channels)}
        if held
        else {
            *channels,
            *topo.channels,
        }
    )
    return {
        "topic": topo.topic,
        "family": "redesign" if redesign else "original",
        "meta": None
        if meta is None
        else {
            "partition_num": meta.partition_num,
            "replicas": meta.replica,
            "ordered": meta.ordered,
            "ext": meta.extend_support,
            "multi_part": meta.multi_part,
            "disable_channel_auto_create": meta.disable_channel_auto_create,
        },
        "partition_count": max(topo.partition_num, len(parts)),
        "partitions": parts,
        "nsqds": [
            {
                "tcp": str(peer.tcp_address),
                "http": peer.http_key,
                "hostname": peer.hostname,
                "version": peer.version,
                "answering": peer.http_key not in down,
            }
            for peer in topo.producers
        ],
        "channels": sorted(channels_seen),
        "lookupds": [
            {"address": s.address, "ok": s.ok, "error": s.error or None} for s in topo.sources
        ],
        "stale": topo.stale,
        "complete": not warnings,
        "warnings": warnings,
    }


async def lookup_topic(
    topic: str,
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str] = (),
) -> dict[str, Any]:
    """Look a topic up (read access, with meta) plus ``/channels``, checked against one
    poll of the nsqds; unknown → error (not when part of the cluster did not answer)."""
    # the stats model loads only when a lookup runs, not for every admin command's --help
    from nsqctl.stats.coverage import look_once, not_seen_warnings

    validate_topic(topic)
    async with LookupClient(list(lookupd_http), timeout=TIMEOUT) as lk:
        topo = await lk.lookup(topic, "r", metainfo=True)
        channels: list[str] = []
        if not topo.topic_not_found:
            with contextlib.suppress(NsqctlError):
                channels = await lk.channels(topic)
    view = await look_once(lookupd_http, nsqd_http, topic=topic)
    if topo.topic_not_found and view.topic(topic) is None:
        blind = await not_seen_warnings(lookupd_http, nsqd_http)
        if blind:  # not seen is not absent: never advise creating it
            raise AdminError(
                f"topic {topic!r} not found on the nsqlookupds and nsqds that answered; "
                + "; ".join(blind)
            )
        raise topic_not_found(topic, [f"nsqlookupd {a}" for a in lookupd_http])
    return describe_topic(topo, channels, view)


# ------------------------------------------------------------- every nsqlookupd down
# The topology (which copy leads a partition, the replica set, the ISR, the topic's meta)
# is nsqlookupd's to tell; the nsqds' ``/stats`` tell only which partitions each holds and
# their channels. So this answer names the copies found and the channels, claims no leader,
# replica set or ISR (null), and says so in its warnings, with ``complete: false``, as
# :func:`list_topics` and ``stat`` do when they fall back to the nsqds.

#: the warning that says what a lookup from the nsqds alone cannot show
NO_TOPOLOGY = (
    "no nsqlookupd answered: shown is what the nsqds given hold; no partition leader, "
    "replica set, ISR or topic meta (nsqlookupd's to tell)"
)


async def lookup_from_nsqds(
    topic: str, lookupd_http: Sequence[str], nsqd_http: Sequence[str]
) -> dict[str, Any]:
    """:func:`lookup_topic`'s document from one ``/stats`` poll of ``nsqd_http`` (the lookupds are
    asked again only to name them in the warnings). No nsqd answering is an error, and so
    is a topic none of them holds: that it is absent cannot be told without nsqlookupd."""
    from nsqctl.stats.coverage import coverage, look_once

    view = await look_once(lookupd_http, nsqd_http, topic=topic)
    answering = [n for n in view.nodes if n.stats.state != "down"]
    if not answering:
        why = "; ".join(f"{n.address}: {n.stats.error or 'down'}" for n in view.nodes)
        raise NsqctlError(f"no nsqlookupd and no nsqd answered ({why})")
    held = view.topic(topic)
    if held is None:
        raise NotFoundError(
            f"topic {topic!r} is on none of the nsqds that answered "
            f"({', '.join(n.address for n in answering)}); with no nsqlookupd answering, "
            "it may live on nsqds not given"
        )
    copies: dict[int | None, list[str]] = {}
    versions: dict[str, str] = {}
    for node in answering:
        for part in node.stats.topics:
            if part.topic == topic:
                copies.setdefault(part.partition, []).append(node.address)
                versions[node.address] = node.stats.version
    seen = coverage(view, topic)
    warnings = [NO_TOPOLOGY, *seen.warnings("this answer")]
    partitions = [
        {
            "partition": p,
            "copies": sorted(on),
            "leader_tcp": None,
            "leader_http": None,
            "replicas": None,
            "isr": None,
        }
        for p, on in sorted(copies.items(), key=lambda kv: kv[0] or 0)
        if p is not None
    ]
    return {
        "topic": topic,
        "family": "redesign" if held.is_redesign else "original",
        "source": "nsqds",
        "meta": None,
        "partition_count": None,
        "partitions": partitions,
        "nsqds": [{"http": a, "version": versions[a], "answering": True} for a in sorted(versions)],
        "channels": sorted(c.name for c in held.channels),
        "lookupds": [
            {"address": lk.address, "ok": lk.ok, "error": lk.error or None} for lk in view.lookupds
        ],
        "stale": False,
        "complete": False,
        "warnings": warnings,
    }
