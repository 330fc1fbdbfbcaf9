"""A redesign ``topic delete`` that nsqlookupd accepted while an nsqd kept its copy: the
copy is looked for on every nsqd nsqlookupd lists, the forced delete is sent once, and an
nsqd still holding a copy at the end fails the delete.

Scripted servers (tests/helpers/scripted_lookupd.py): a real nsqlookupd skips an nsqd
only when it cannot reach it over its RPC at the moment of the delete (right after it
restarted, in a race no test can win on cue). The real servers' side, an nsqd that was
down coming back with the deleted topic's data and the delete removing it, is in
tests/integration/test_ops_3.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nsqctl import admin
from nsqctl.admin.partitions import leftover_copies
from nsqctl.admin.requests import admin_client
from tests.helpers.scripted_lookupd import Reply, Request, ScriptedLookupds

STATS = json.loads(
    (Path(__file__).parent.parent / "data" / "stats" / "redesign_t0_nsqd_a_stats.json").read_text()
)
HELD = "events"  # a topic the recorded nsqd holds


class Cluster:
    """One scripted lookupd leader and one nsqd holding ``HELD`` until it is removed
    (after ``removed_by`` forced deletes; never when None). ``stats``: the nsqd's /stats
    status; ``listed``: whether /nodes lists it; ``recreated``: whether nsqlookupd has
    the topic's meta again."""

    def __init__(
        self,
        removed_by: int | None,
        *,
        stats: int = 200,
        listed: bool = True,
        recreated: bool = False,
    ) -> None:
        self.removed_by = removed_by
        self.stats, self.listed, self.recreated = stats, listed, recreated
        self.deletes: list[dict[str, str]] = []
        self.nsqd = ""

    @property
    def forced(self) -> int:
        return sum(d.get("force") == "true" for d in self.deletes)

    def handle(self, request: Request) -> Reply:
        if request.address == self.nsqd:
            assert request.path == "/stats"
            if self.stats != 200:
                return Reply(self.stats, {"message": "INTERNAL_ERROR"})
            gone = self.removed_by is not None and self.forced >= self.removed_by
            topics: list[Any] = [] if gone else STATS["topics"]
            return Reply(200, {**STATS, "topics": topics})
        if request.path == "/nodes":
            host, port = self.nsqd.rsplit(":", 1)
            peer = {"broadcast_address": host, "tcp_port": 1, "http_port": int(port)}
            listed = [{**peer, "version": "0.3.7-HA.1.12.7"}] if self.listed else []
            return Reply(200, {"producers": listed})
        if request.path == "/listlookup":  # a standalone lookupd: the one to ask
            return Reply(404, {"message": "NOT_FOUND"})
        if request.path == "/lookup":  # youzan: 200 with zero meta for a deleted topic
            meta = {"partition_num": 2 if self.recreated else 0, "replica": 1}
            return Reply(200, {"channels": [], "meta": meta, "partitions": {}, "producers": []})
        assert request.path == "/topic/delete"
        self.deletes.append(request.params)
        return Reply(200, {})


async def delete(cluster: Cluster, timeout: float) -> list[admin.NodeResult]:
    async with ScriptedLookupds(cluster.handle) as servers:
        leader, cluster.nsqd = await servers.start(2)
        [[req]] = admin.plan_topic_delete(admin.Placement(HELD, "redesign"), leader)
        async with admin_client() as client:
            return await leftover_copies.remove_leftovers(client, [leader], req, timeout=timeout)


@pytest.fixture(autouse=True)
def force_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leftover_copies, "FORCE_AFTER", 0.0)


async def test_a_copy_left_is_removed_by_one_forced_delete() -> None:
    cluster = Cluster(removed_by=1)
    results = await delete(cluster, timeout=10)
    assert cluster.deletes == [{"topic": HELD, "partition": "**", "force": "true"}]
    assert [(r.outcome, r.request.describe()) for r in results] == [
        ("ok", f"POST /topic/delete?topic={HELD}&partition=**&force=true")
    ]


async def test_a_copy_still_held_fails_the_delete_naming_the_nsqd() -> None:
    cluster = Cluster(removed_by=None)
    results = await delete(cluster, timeout=0.5)
    assert cluster.forced == 1  # forced once, not at every look
    assert [r.outcome for r in results] == ["ok", "failed"]
    failed = results[-1]
    assert failed.request.node.address == cluster.nsqd
    assert failed.error.startswith(f"still holds partitions 0, 1 of {HELD} ")
    assert failed.error.endswith(f"run `topic_delete({HELD})` again)")


async def test_the_loss_of_a_copy_with_no_leader_is_measured() -> None:
    """Removing a kept copy (no leader: nothing in etcd knows the topic) loses what it
    holds, and the question before the delete says so rather than "nothing"."""

    def stats(request: Request) -> Reply:
        return Reply(200, STATS)

    async with ScriptedLookupds(stats) as servers:
        [nsqd] = await servers.start()
        copy = admin.Node(nsqd, "nsqd", 0)  # the recorded nsqd's copy of events/0: no leader
        placement = admin.Placement(HELD, "redesign", (copy,))
        async with admin_client() as client:
            blast = await admin.measure("delete", placement, [copy], client)
    [copy_stats] = [t for t in STATS["topics"] if t["topic_name"] == HELD and not t["is_leader"]]
    assert [(loss.node, loss.partition) for loss in blast.losses] == [(nsqd, 0), (nsqd, 0)]
    assert blast.losses[0].bytes == copy_stats["depth"]  # the whole stored queue
    assert blast.losses[1].channel == "tail"


async def test_nothing_left_sends_nothing_more() -> None:
    cluster = Cluster(removed_by=0)
    assert await delete(cluster, timeout=10) == []
    assert cluster.deletes == []


async def test_an_nsqd_that_does_not_answer_fails_the_delete_as_unchecked() -> None:
    """The nsqd nsqlookupd could not reach is the one this check is for, and it is often
    the one that does not answer nsqctl either: not answering is no proof it holds
    nothing, so the delete is not said complete."""
    cluster = Cluster(removed_by=0, stats=500)
    [failed] = await delete(cluster, timeout=0.5)
    assert failed.outcome == "failed" and failed.request.node.address == cluster.nsqd
    assert failed.error.startswith("did not answer (") and "may still hold a copy" in failed.error
    assert cluster.deletes == []


async def test_no_nsqd_listed_fails_the_delete_as_unchecked() -> None:
    cluster = Cluster(removed_by=0, listed=False)
    [failed] = await delete(cluster, timeout=0.5)
    assert failed.outcome == "failed" and "no nsqd could be checked" in failed.error


async def test_a_topic_created_again_is_not_force_deleted() -> None:
    """Copies found after the delete while nsqlookupd has the topic's meta again (it was
    created anew meanwhile) are the new topic's: the forced delete, which would remove
    every partition of it on every nsqd, is not sent, and the delete says why."""
    cluster = Cluster(removed_by=1, recreated=True)
    [held] = await delete(cluster, timeout=1.0)  # asked again at each look till then
    assert cluster.deletes == []
    assert held.outcome == "failed" and "knows the topic again" in held.error
