"""Partitions that keep the redesign's nsqlookupd from taking a partition operation.

youzan's nsqlookupd refuses every expand and every move with "the cluster is unstable"
until a full topic check of EVERY topic passes (its ``checkTopics``); a meta update it
takes all the same (``ChangeTopicMetaParam`` does not ask whether the cluster is stable). A
partition whose leader is lost fails that check until an election finds an in-sync copy
to lead; with no copy left on an nsqd that answers, none can, and the cluster stays
unstable however long one waits: only bringing one of its nsqds back ends it. That is
the one cause a plan can see up front and know to be lasting. A partition still being
elected, an ISR short of its replicas (nsqlookupd migrates a copy after a while), or a
topic check not run yet all pass on their own: those are waited for, not refused.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from nsqctl.admin.base import TIMEOUT
from nsqctl.errors import NsqctlError
from nsqctl.lookup.client import LookupClient

if TYPE_CHECKING:
    from nsqctl.stats.view import ClusterView

#: Topics looked up at once: every topic of the cluster is asked about.
LOOKUPS_AT_ONCE = 8


async def leaderless_partitions(leader: str) -> dict[str, set[int]]:
    """topic → the partitions its meta counts that the lookupd ``leader`` names no leader
    for (a consistent lookup: from etcd), over every topic it lists; a topic it does not
    answer about is left out (nothing known is nothing refused)."""
    limit = asyncio.Semaphore(LOOKUPS_AT_ONCE)
    async with LookupClient([leader], timeout=TIMEOUT) as lk:
        topics = await lk.topics(leader)

        async def one(topic: str) -> set[int]:
            async with limit:
                try:
                    topo = await lk.lookup(topic, "r", metainfo=True, consistent=True)
                except NsqctlError:
                    return set()
            if topo.topic_not_found or topo.meta is None or not topo.meta.valid:
                return set()
            return set(range(topo.meta.partition_num)) - set(topo.partitions)

        found = await asyncio.gather(*(one(t) for t in topics))
    return {t: parts for t, parts in zip(topics, found, strict=True) if parts}


async def dead_partitions(
    leader: str, lookupd_http: list[str], view: ClusterView | None = None
) -> dict[str, list[int]]:
    """topic → its partitions with no leader and no copy on any nsqd that answers (every
    nsqd holding them down or hung): each keeps nsqlookupd calling the cluster unstable
    until one of their nsqds is back. {} when there is none. ``view``: a view of the
    whole cluster the caller has just taken (a drain's plan), else one is taken when
    some partition has no leader."""
    leaderless = await leaderless_partitions(leader)
    if not leaderless:
        return {}
    if view is None:
        # the stats model loads only here, not for every partition command's --help
        from nsqctl.stats.coverage import look_once

        view = await look_once(lookupd_http, ())
    held = {
        (t.name, p.partition)
        for t in view.topics
        for p in t.partitions
        if p.live and p.partition is not None
    }
    dead = {
        topic: sorted(p for p in parts if (topic, p) not in held)
        for topic, parts in sorted(leaderless.items())
    }
    return {topic: parts for topic, parts in dead.items() if parts}


def dead_words(dead: dict[str, list[int]]) -> str:
    """``topic A partition 2; topic B partitions 0, 1``."""
    return "; ".join(
        f"topic {topic} partition{'s' if len(parts) > 1 else ''} {', '.join(map(str, parts))}"
        for topic, parts in dead.items()
    )
