"""One topic described for ``nsqctl lookup``: family, meta, partition leaders, nsqds and
channels."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import httpx

from nsqctl.admin.base import TIMEOUT, topic_not_found
from nsqctl.errors import NsqctlError
from nsqctl.lookup.client import LookupClient
from nsqctl.lookup.model import Topology
from nsqctl.protocol.names import validate_topic


def describe_topic(topo: Topology, channels: Sequence[str]) -> dict[str, Any]:
    """What ``nsqctl lookup`` shows: family, meta, partition leaders, nsqds, channels."""
    meta = topo.meta
    return {
        "topic": topo.topic,
        "family": "redesign" if topo.is_redesign else "original",
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
        "partition_count": topo.partition_num,
        "partitions": [
            {
                "partition": p.partition,
                "leader_tcp": str(p.leader.tcp_address),
                "leader_http": p.leader.http_key,
                "hostname": p.leader.hostname,
            }
            for p in topo.partition_infos
        ],
        "nsqds": [
            {
                "tcp": str(peer.tcp_address),
                "http": peer.http_key,
                "hostname": peer.hostname,
                "version": peer.version,
            }
            for peer in topo.producers
        ],
        "channels": sorted(set(channels) | set(topo.channels)),
        "lookupds": [
            {"address": s.address, "ok": s.ok, "error": s.error or None} for s in topo.sources
        ],
        "stale": topo.stale,
    }


async def lookup_topic(
    topic: str,
    lookupd_http: Sequence[str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """Look a topic up (read access, with meta) plus ``/channels``; unknown → error."""
    validate_topic(topic)
    async with LookupClient(list(lookupd_http), timeout=TIMEOUT, transport=transport) as lk:
        topo = await lk.lookup(topic, "r", metainfo=True)
        if topo.topic_not_found:
            raise topic_not_found(topic, [f"nsqlookupd {a}" for a in lk.addresses])
        channels: list[str] = []
        with contextlib.suppress(NsqctlError):
            channels = await lk.channels(topic)
    return describe_topic(topo, channels)
