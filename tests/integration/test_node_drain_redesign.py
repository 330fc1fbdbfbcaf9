"""``nsqctl node drain|restore`` on real youzan servers (3 nsqd, one lookupd, etcd).

A private cluster: a drain moves every leader off its node, which would reshuffle the
session cluster under other tests, and the last test kills an nsqd. The first topic has
one partition with three replicas, so the leader has in-sync copies to hand over to and
stopping it leaves two of three (enough for writes); nsqlookupd's ``/lookup?access=w``
(where publishers are sent) tells who leads before and after.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Iterator
from pathlib import Path

import pytest

from nsqctl.admin.drain.records import DrainRecord, MovedLeader, update_drain
from nsqctl.admin.drain.run import plan_drain
from nsqctl.admin.partitions import plan_move, redesign_leader, registered_nsqds, topic_state
from nsqctl.admin.requests import admin_client
from nsqctl.errors import NsqctlError
from nsqctl.producer import Producer
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from tests.helpers.cli import clean_env, run_cli
from tests.helpers.clusters import running_cluster
from tests.helpers.failover import leader_of
from tests.helpers.redesign import TopicSpec, create_topics, eventually, nsqd_stats, unique

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from running_cluster("redesign", tmp_path_factory.mktemp("drain"), nsqd=3)


def _node(c: Cluster, args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    proc = run_cli(["node", *args, "--lookupd", c.lookupd_http[0]], env=env, timeout=200)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


async def _publish(c: Cluster, topic: str, count: int) -> None:
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        await producer.publish_many(topic, [b"m%d" % i for i in range(count)])


def test_drain_moves_every_leader_off_the_node_and_restore_moves_it_back(
    three: Cluster, tmp_path: Path
) -> None:
    c = three
    env = clean_env({"NSQCTL_STATE_DIR": str(tmp_path / "state")})
    topic = unique("drain")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=3)}))
    asyncio.run(_publish(c, topic, 20))
    node = leader_of(c, topic).http_address

    code, out, err = _node(c, ["drain", node, "--dry-run", "--json"], env)
    assert code == 0, err
    plan = json.loads(out)
    assert plan["family"] == "redesign"
    assert [(m["topic"], m["partition"], m["from"]) for m in plan["moves"]] == [(topic, 0, node)]
    assert leader_of(c, topic).http_address == node  # a dry run moves nothing

    code, out, err = _node(c, ["drain", node, "--timeout", "150", "--json"], env)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["outcome"] == "drained" and doc["progress"]["dependent_partitions"] == []
    new_leader = leader_of(c, topic).http_address
    assert new_leader != node
    moved = {"topic": topic, "partition": 0, "from": node, "to": new_leader, "copy": False}
    assert doc["moved"] == [moved]
    state = json.loads((tmp_path / "state" / "drains.json").read_text())
    assert state["drains"][node]["state"] == "drained"

    code, out, err = _node(c, ["restore", node, "--json", "--wait", "150"], env)
    assert code == 0, err
    assert json.loads(out)["ok"] is True
    assert leader_of(c, topic).http_address == node
    state = json.loads((tmp_path / "state" / "drains.json").read_text())
    assert state["drains"][node]["state"] == "restored"


def test_a_copy_that_writes_need_moves_to_a_free_nsqd_first_and_restore_brings_it_back(
    three: Cluster, tmp_path: Path
) -> None:
    """Replicas 2 on 3 nsqd: stopping the follower would leave one in-sync copy, which
    youzan does not write to. The drain moves the follower's copy to the third nsqd first
    (only then is the node safe to stop); restore moves it back."""
    c = three
    env = clean_env({"NSQCTL_STATE_DIR": str(tmp_path / "state")})
    topic = unique("copy")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=2)}))
    leader = leader_of(c, topic).http_address
    isr = _Isr(c, topic)
    follower = next(a for a in c.nsqd_http if a != leader and a in isr.now())
    free = next(a for a in c.nsqd_http if a not in (leader, follower))

    code, out, err = _node(c, ["drain", follower, "--dry-run", "--json"], env)
    assert code == 0, err
    moves = json.loads(out)["moves"]
    assert {"topic": topic, "partition": 0, "from": follower, "to": free, "copy": True} in moves
    assert isr.now() == {leader, follower}  # a dry run moves nothing

    code, out, err = _node(c, ["drain", follower, "--timeout", "150", "--json"], env)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["outcome"] == "drained" and doc["blocked"] == []
    assert {"topic": topic, "partition": 0, "from": follower, "to": free, "copy": True} in doc[
        "moved"
    ]
    assert isr.now() == {leader, free}

    code, out, err = _node(c, ["restore", follower, "--json", "--wait", "150"], env)
    assert code == 0, err
    assert isr.now() == {leader, follower}


def _refused(c: Cluster, node: str, env: dict[str, str]) -> tuple[list[str], list[str], str]:
    """A dry run and a real drain of ``node``: both exit 1 at once, naming the blockers (a
    drain waiting for its --timeout would end in "not drained after"); the blockers of
    each, and the real run's stderr."""
    code, dry_out, dry_err = _node(c, ["drain", node, "--dry-run", "--json"], env)
    assert code == 1, dry_err
    code, out, err = _node(c, ["drain", node, "--timeout", "40", "--json"], env)
    assert code == 1, err
    assert "not drained after" not in err and "cannot be drained now" in err
    doc = json.loads(out)
    assert doc["outcome"] == "blocked" and doc["moved"] == []
    assert all(f"  {b}" in err.splitlines() for b in doc["blocked"])  # each on its own line
    return json.loads(dry_out)["blocked"], doc["blocked"], err


def test_restore_counts_a_leader_back_on_the_node_already_as_restored(
    three: Cluster, tmp_path: Path
) -> None:
    """A drain moved a leader off the node, and an election after it put the leader back
    (the drain timed out, say): restore used to send the move back all the same, which
    nsqlookupd's checks refuse as one that does nothing, and reported the restore failed.
    The record is written as that drain left it; nothing moves."""
    c = three
    state_dir = tmp_path / "state"
    env = clean_env({"NSQCTL_STATE_DIR": str(state_dir)})
    topic = unique("back")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=3)}))
    node = leader_of(c, topic).http_address
    other = next(a for a in c.nsqd_http if a != node)
    moved = (MovedLeader(topic, 0, node, other),)
    record = DrainRecord(node, "redesign", "stopped", 0.0, 0.0, tuple(c.lookupd_http), moved=moved)
    update_drain(node, lambda _old: record, state_dir)

    code, out, err = _node(c, ["restore", node, "--json", "--wait", "60"], env)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ok"] is True and doc["failed"] == [], doc
    assert f"{topic} partition 0: led by {node} again already, nothing to move" in doc["notes"]
    assert leader_of(c, topic).http_address == node


async def _both_refused(c: Cluster, topic: str, hung: NodeRecord) -> tuple[str, str]:
    """A move of ``topic``'s partition 0 to ``hung`` and a drain of it, asked at once
    (each waits out the admin timeout on the hung nsqd): their refusals."""

    async def refusal(call: Awaitable[object]) -> str:
        with pytest.raises(NsqctlError) as err:
            await call
        return str(err.value)

    move, drain = await asyncio.gather(
        refusal(plan_move(c.lookupd_http, topic, 0, hung.tcp_address)),
        refusal(plan_drain(c.lookupd_http, hung.http_address)),
    )
    return move, drain


def test_a_move_to_or_drain_of_a_hung_nsqd_says_it_does_not_answer(three: Cluster) -> None:
    """A SIGSTOPped nsqd stays registered (youzan lists it until its etcd lease, 20 s,
    runs out), but cannot tell its node id: both used to say nsqlookupd does not list it,
    sending the operator after a typo."""
    c = three
    topic = unique("hung")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=1)}))
    leader = leader_of(c, topic).http_address
    hung = next(n for n in c.nsqds if n.http_address != leader)
    process.pause(hung)
    try:
        move, drain = asyncio.run(_both_refused(c, topic, hung))
    finally:
        process.resume(hung)
    assert move == (
        f"`to` {hung.tcp_address}: nsqd {hung.http_address} is registered with nsqlookupd but "
        "does not answer (hung, or just gone): it cannot take part in a move now, nothing was "
        "changed; run it again once it answers, or name another nsqd"
    )
    assert drain.startswith(
        f"nsqd {hung.http_address} does not answer (registered with nsqlookupd, but not "
        "answering its /config): a drain cannot tell what it holds"
    ), drain
    eventually(lambda: asyncio.run(_registered(c)) == set(c.nsqd_http), 60, "all answering")


async def _registered(c: Cluster) -> set[str]:
    async with admin_client() as client:
        leader = await redesign_leader(client, c.lookupd_http, "test")
        return set(await registered_nsqds(client, leader))


class _Isr:
    """The ISR of a topic's partition 0 as its leader reports it (HTTP addresses)."""

    def __init__(self, c: Cluster, topic: str) -> None:
        self.c, self.topic = c, topic

    async def read(self) -> set[str]:
        async with admin_client() as client:
            leader = await redesign_leader(client, self.c.lookupd_http, "test")
            nodes = await registered_nsqds(client, leader)
            state = await topic_state(client, leader, self.topic, nodes)
        part = state.partitions.get(0)
        return set(part.isr) if part else set()

    def now(self) -> set[str]:
        return asyncio.run(self.read())


def _where(blocked: list[str]) -> list[str]:
    return sorted(b.split(": ", 1)[0] for b in blocked)


def test_a_drain_that_would_leave_a_partition_unwritable_is_refused_at_once(
    three: Cluster, tmp_path: Path
) -> None:
    """3 nsqd, a replicas-2 partition whose follower is killed: its leader is not safe to
    stop, and no free nsqd can take a copy in time to change that. Last in the module: it
    kills an nsqd of the module's cluster."""
    c = three
    env = clean_env({"NSQCTL_STATE_DIR": str(tmp_path / "state")})
    dr = unique("dr")
    asyncio.run(create_topics(c.lookupd_http, {dr: TopicSpec(partitions=1, replicas=2)}))
    leader = leader_of(c, dr)
    follower = next(n for n in c.nsqds if n is not leader and nsqd_stats(n.http_address, dr))
    other = next(n for n in c.nsqds if n not in (leader, follower))
    process.kill_hard(follower)

    # at once, while the dead follower is still in the ISR (or nsqlookupd is copying the
    # partition to the third nsqd: either way fewer than 2 copies are left)
    dry, real, err = _refused(c, leader.http_address, env)
    assert f"{dr}/0" in _where(real) and _where(dry) == _where(real)
    assert f":{follower.rpc_port}:" not in err  # never youzan's node id
    assert leader_of(c, dr, access="r").http_address == leader.http_address  # nothing moved

    # the dead follower is named by its address; if nsqlookupd's emergency migration (10 s
    # after the kill at the earliest) is copying the partition to the third nsqd or has
    # done so, one copy is left without the leader, and that is not enough either
    line = next(b for b in real if b.startswith(f"{dr}/0: "))
    assert line in dry
    need = "; with replicas 2 it takes writes and elects a leader only with 2"
    dead = follower.tcp_address
    start = f"{dr}/0: stopping {leader.http_address} leaves"
    one = f"1 in-sync copy ({other.http_address}){need}"
    assert line in (
        f"{start} 0 in-sync copies{need} ({dead} in its ISR is down): bring {dead} back first",
        f"{start} {one} ({dead} in its ISR is down): bring {dead} back first",  # copying
        # copied: the dead follower stays in the catch-up list youzan moved it to
        f"{start} {one} ({dead} in its catch-up list is down): bring {dead} back first",
        # copying: the third nsqd is in the catch-up list too, up: its copy is on its way
        f"{start} 0 in-sync copies{need} ({dead} in its catch-up list is down; "
        f"{other.tcp_address} in its catch-up list is catching up): wait for "
        f"{other.tcp_address} to catch up and bring {dead} back first (`nsqctl lookup {dr}` "
        "shows when it joins the ISR)",
    ), line
    assert not (tmp_path / "state" / "drains.json").exists()  # a refusal records nothing
