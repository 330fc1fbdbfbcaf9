"""Copies of a deleted redesign topic that nsqds still hold, and their removal.

nsqlookupd deletes a topic by removing its meta from etcd and then asking each nsqd it
knows, over its RPC, to remove its copy. An nsqd it cannot ask at that moment (one it has
not learnt of yet since it started, one whose RPC fails) is skipped without a word: the
delete answers 200 while that nsqd still holds the partition's data, registers it and
serves it. And an nsqd that was down keeps its copy on disk and serves it again when it
comes back, with nothing left in etcd to tell it the topic is gone.

youzan's remedy is the delete's ``force=true``: once the meta is gone the ordinary delete
fails (no such topic), and the forced one asks every nsqd nsqlookupd knows to remove
every partition of the topic, data included. So a delete is checked on every nsqd
nsqlookupd lists, forced once when a copy is left, and reported failed for each nsqd that
still holds one; and a delete of a topic nsqlookupd no longer knows finds the nsqds still
holding it and sends the forced one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import httpx

from nsqctl.admin.base import TIMEOUT
from nsqctl.admin.leader import lookupd_nsqds
from nsqctl.admin.placement import Placement, fetch_stats
from nsqctl.admin.requests import AdminRequest, Node, NodeResult, send_request
from nsqctl.errors import NsqctlError
from nsqctl.lookup.client import LookupClient

#: how long a delete waits for every listed nsqd to drop its copies, a forced delete
#: included (which asks every nsqd about every possible partition, one RPC each)
SETTLE_TIMEOUT = 30.0
#: a copy still held this long after an accepted delete was not asked to go: force it
FORCE_AFTER = 2.0
_POLL = 0.5


async def held_copies(
    client: httpx.AsyncClient, nsqds: Sequence[str], topic: str
) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """nsqd HTTP address → the redesign partitions of ``topic`` it holds (those holding
    none left out), and the nsqds that did not answer, with why."""
    stats = await fetch_stats(client, nsqds, topic)
    held: dict[str, tuple[int, ...]] = {}
    for address, node in stats.nodes.items():
        parts = sorted(
            {t.partition for t in node.topics if t.topic == topic and t.partition is not None}
        )
        if parts:
            held[address] = tuple(parts)
    return held, dict(stats.errors)


def forced(delete: AdminRequest) -> AdminRequest:
    """``delete`` (nsqlookupd's ``/topic/delete``) with ``force=true``."""
    params = tuple(p for p in delete.params if p[0] != "force")
    return AdminRequest(delete.node, delete.path, (*params, ("force", "true")), delete.body)


def _parts(parts: Sequence[int]) -> str:
    return f"partition{'s' if len(parts) > 1 else ''} {', '.join(map(str, parts))}"


async def leftover_placement(
    client: httpx.AsyncClient, lookupd_http: Sequence[str], topic: str
) -> Placement | None:
    """Where a redesign topic nsqlookupd no longer knows is still held: every copy on an
    nsqd it lists, each a node to remove it from; None when no listed nsqd holds one."""
    held, unanswered = await held_copies(client, await lookupd_nsqds(client, lookupd_http), topic)
    if not held:
        return None
    return Placement(
        topic,
        "redesign",
        tuple(Node(a, "nsqd", p) for a, parts in held.items() for p in parts),
        tuple(lookupd_http),
        warnings=(
            f"nsqlookupd no longer knows topic {topic} (deleted), but "
            + "; ".join(f"{a} still holds {_parts(p)}" for a, p in held.items())
            + ": the delete asks every nsqd to remove it (force)",
        ),
        unreachable=tuple(unanswered.items()),
    )


async def known_again(lookupd_http: Sequence[str], topic: str) -> bool | None:
    """Whether nsqlookupd knows ``topic`` again (its meta is back: created after the
    delete), False when it answers that it has no meta for it, None when none answered."""
    try:
        async with LookupClient(list(lookupd_http), timeout=TIMEOUT) as lk:
            topo = await lk.lookup(topic, "r", metainfo=True)
    except NsqctlError:
        return None
    if topo.stale:
        return None
    # its meta, from etcd: the registrations an nsqd still holding a copy keeps sending
    # say nothing of whether the topic exists
    meta = topo.meta
    return meta is not None and meta.valid and meta.partition_num > 0


def _failed(address: str, topic: str, why: str) -> NodeResult:
    return NodeResult(
        AdminRequest(Node(address, "nsqd"), "/stats", (("topic", topic),)), "failed", None, why
    )


async def remove_leftovers(
    client: httpx.AsyncClient,
    lookupd_http: Sequence[str],
    delete: AdminRequest,
    *,
    timeout: float = SETTLE_TIMEOUT,
    clock: Callable[[], float] = time.monotonic,
) -> list[NodeResult]:
    """After nsqlookupd accepted ``delete`` (its ``/topic/delete``), wait until every nsqd
    it lists answers and holds no copy of the topic, sending the forced delete once if
    one is left.

    Returns what the forced delete did (when it was sent) and, when ``timeout`` is spent,
    a failed result for each nsqd still holding a copy or not answering (it may hold
    one): the delete is not known complete. Nothing is forced once nsqlookupd knows the
    topic again (created after the delete): the copies are the new topic's then."""
    topic = dict(delete.params)["topic"]
    nsqds = await lookupd_nsqds(client, lookupd_http)
    if not nsqds:
        where = ", ".join(lookupd_http)
        return [
            _failed(
                where,
                topic,
                f"no nsqlookupd ({where}) listed its nsqds after the delete, so no nsqd "
                f"could be checked for a copy of {topic} left behind: `lookup({topic})` "
                "shows any",
            )
        ]
    start = clock()
    results: list[NodeResult] = []
    held_back = ""  # why the forced delete was not sent (yet)
    while True:
        held, unanswered = await held_copies(client, nsqds, topic)
        if not held and not unanswered:  # a forced delete that failed changed nothing
            return [r for r in results if r.outcome == "ok"]
        waited = clock() - start
        if held and not results and waited >= FORCE_AFTER:
            # asked of the leader the delete went to, and again at each look: another
            # nsqlookupd serves the meta from a cache it rebuilds only every few seconds
            again = await known_again([delete.node.address], topic)
            if again is False:
                result, _ = await send_request(client, forced(delete), timeout=timeout)
                results.append(result)
                if result.outcome != "ok":
                    result.error = f"removing the copies left ({result.error})"
                continue
            held_back = (
                "nsqlookupd knows the topic again (created after the delete?): its copies "
                "are the new topic's, so nothing more was removed"
                if again
                else "nsqlookupd did not answer whether the topic was created again, so "
                "its forced delete was not sent"
            )
        if waited >= timeout:
            still = (
                held_back
                or f"nsqlookupd could not ask it to remove them: run `topic_delete({topic})` again"
            )
            return (
                results
                + [
                    _failed(
                        a,
                        topic,
                        f"still holds {_parts(parts)} of {topic} {waited:.0f}s after "
                        f"nsqlookupd deleted the topic ({still})",
                    )
                    for a, parts in held.items()
                ]
                + [
                    _failed(
                        a,
                        topic,
                        f"did not answer ({why}), so it may still hold a copy of {topic}: "
                        f"once it answers, `lookup({topic})` shows any, and "
                        f"`topic_delete({topic})` removes it",
                    )
                    for a, why in unanswered.items()
                ]
            )
        await asyncio.sleep(_POLL)
