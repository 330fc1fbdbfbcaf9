"""A redesign ``topic delete`` while nsqlookupd repairs the cluster: sent again while its
leader answers "the cluster is unstable" (nothing changed), for up to the admin timeout,
asking it to check the cluster meanwhile; a refusal that outlasts the wait says nothing
was changed.

A scripted lookupd (tests/helpers/scripted_lookupd.py), because a real nsqlookupd cannot
be made unstable on cue: it is while it repairs what a failure broke, for as long as its
topic checks take. The degraded-cluster integration test meets the real one.
"""

from __future__ import annotations

from nsqctl import admin
from nsqctl.admin.requests import admin_client
from tests.helpers.scripted_lookupd import Reply, Request, ScriptedLookupds

UNSTABLE = Reply(500, {"message": "the cluster is unstable"})


def unstable_for(refusals: int) -> ScriptedLookupds:
    """A lookupd leader refusing the first ``refusals`` deletes as unstable, then deleting."""
    deletes: list[Request] = []

    def handle(req: Request) -> Reply:
        if req.path == "/topic/delete":
            deletes.append(req)
            return UNSTABLE if len(deletes) <= refusals else Reply(200, {})
        if req.path == "/nodes":  # itself, as the one nsqd, for the check for copies left
            host, port = req.address.rsplit(":", 1)
            peer = {"broadcast_address": host, "tcp_port": 1, "http_port": int(port)}
            return Reply(200, {"producers": [{**peer, "version": "0.3.7-HA.1.12.7"}]})
        if req.path == "/stats":  # holding nothing: the delete reached it
            return Reply(200, {"version": "0.3.7-HA.1.12.7", "topics": []})
        return Reply(200, {})  # the meta update asking for a cluster check

    return ScriptedLookupds(handle)


def paths(lookupd: ScriptedLookupds) -> list[str]:
    return [r.path for r in lookupd.requests]


async def test_a_delete_waits_out_the_repair() -> None:
    async with unstable_for(2) as lookupd:
        [leader] = await lookupd.start()
        placement = admin.Placement("gone", "redesign", lookupds=(leader,))
        stages = admin.plan_topic_delete(placement, leader)
        said: list[str] = []
        report = await admin.run_plan("topic delete", placement, stages, progress=said.append)
    assert report.ok, report.failures
    assert paths(lookupd).count("/topic/delete") == 3
    assert "/topic/meta/update" in paths(lookupd)  # asked to check the cluster
    assert said == [f"nsqlookupd is repairing the cluster; retrying for up to {admin.TIMEOUT:.0f}s"]


async def test_a_repair_outlasting_the_wait_is_one_refusal_that_changed_nothing() -> None:
    from nsqctl.admin.operations import delete_while_repairing  # the wait, shortened

    async with unstable_for(10**6) as lookupd:
        [leader] = await lookupd.start()
        placement = admin.Placement("kept", "redesign", lookupds=(leader,))
        [[req]] = admin.plan_topic_delete(placement, leader)
        async with admin_client() as client:
            result = await delete_while_repairing(client, req, wait=0.3)
    assert result.outcome == "failed"
    assert result.error.startswith("HTTP 500 the cluster is unstable (still after ")
    assert "nothing was changed" in result.error
