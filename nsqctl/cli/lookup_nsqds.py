"""``nsqctl lookup`` with every nsqlookupd down: what the nsqds given say of the topic.

The topology (which copy leads a partition, the replica set, the ISR, the topic's meta) is
nsqlookupd's to tell; the nsqds' ``/stats`` tell only which partitions each holds and
their channels. So this answer names the copies found and the channels, claims no leader,
replica set or ISR (those are null in ``--json``), and says so in its warnings, with
``complete: false``, as ``topic list`` and ``stat`` do when they fall back to the nsqds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nsqctl.errors import NotFoundError, NsqctlError

#: the warning that says what a lookup from the nsqds alone cannot show
NO_TOPOLOGY = (
    "no nsqlookupd answered: shown is what the nsqds given hold; no partition leader, "
    "replica set, ISR or topic meta (nsqlookupd's to tell)"
)


async def lookup_from_nsqds(
    topic: str, lookupd_http: Sequence[str], nsqd_http: Sequence[str]
) -> dict[str, Any]:
    """``lookup``'s document from one ``/stats`` poll of ``nsqd_http`` (the lookupds are
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


def render_from_nsqds(info: dict[str, Any]) -> list[str]:
    """Human-readable lines for :func:`lookup_from_nsqds`: copies, never a leader."""
    lines = [f"topic     {info['topic']} ({info['family']}; from the nsqds alone)"]
    if info["partitions"]:
        lines.append("partitions (copies found; leader and ISR unknown)")
        lines.extend(
            f"  {p['partition']:>4}  on {', '.join(p['copies'])}" for p in info["partitions"]
        )
    lines.append(f"nsqds     {len(info['nsqds'])} holding it")
    for n in info["nsqds"]:
        version = f"  v{n['version']}" if n["version"] else ""
        lines.append(f"  http {n['http']}{version}")
    listed = ", ".join(info["channels"])
    lines.append(f"channels  {listed + '  (may be incomplete)' if listed else '(none seen)'}")
    lines.extend(f"warning   {w}" for w in info["warnings"])
    return lines
