"""What the operator commands say about an nsqd that is down, on real youzan servers.

One private cluster (3 nsqd) serves the module, in order, with a topic of 1 partition and 2
replicas (``pair``) and one of 1 partition and 3 replicas (``wide``). First, with every nsqd
up, the nsqd holding no copy of ``pair`` holds only a follower copy of ``wide`` (its leader
moved off it if needed): a drain of it sends nothing and must say why. ``pair``'s leader is
killed with -9: until nsqlookupd elects another (some seconds), the partition has no leader
and its other copy holds it, so a drain of that copy must refuse, saying what to do; once it
is elected, the dead leader is in the partition's catch-up list and the refusal must ask for
it back. nsqlookupd forgets the dead nsqd at once (its registration connection closes), so a
drain of it must say it is down, not that the address is unknown. Then etcd is killed, and a
follower of ``wide``: with no etcd, the coordinator cannot drop it from the ISR, so the ISR
names an nsqd no nsqlookupd lists (by youzan's node id), which ``lookup`` must say in words.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from nsqctl.admin.base import NSQ_V1
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from tests.helpers.cli import run_main
from tests.helpers.clusters import running_cluster
from tests.helpers.degraded import ok
from tests.helpers.redesign import TopicSpec, create_topics, eventually, unique


@dataclass
class Rig:
    c: Cluster
    pair: str  # 1 partition, 2 replicas
    wide: str  # 1 partition, 3 replicas: every nsqd holds a copy
    dead: list[NodeRecord]  # killed so far, in order

    @property
    def lookupd(self) -> list[str]:
        return ["--lookupd", self.c.lookupd_http[0]]

    def lookup(self, topic: str) -> dict[str, Any]:
        """``lookup TOPIC --json``'s one partition."""
        info = json.loads(ok("lookup", topic, "--json", *self.lookupd).stdout)
        [part] = info["partitions"]
        return part  # type: ignore[no-any-return]

    def node(self, http: str) -> NodeRecord:
        return next(n for n in self.c.nsqds if n.http_address == http)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    for c in running_cluster("redesign", tmp_path_factory.mktemp("nodewords"), nsqd=3):
        pair, wide = unique("pair"), unique("wide")
        specs = {pair: TopicSpec(1, replicas=2), wide: TopicSpec(1, replicas=3)}
        asyncio.run(create_topics(c.lookupd_http, specs))
        yield Rig(c, pair, wide, [])


def registered(c: Cluster) -> set[str]:
    """The nsqds (HTTP addresses) nsqlookupd lists now."""
    body = httpx.get(f"http://{c.lookupd_http[0]}/nodes", headers=NSQ_V1).json()
    return {f"{p['broadcast_address']}:{p['http_port']}" for p in body["producers"]}


def test_a_drain_of_a_node_holding_only_follower_copies_says_they_stay(rig: Rig) -> None:
    """Nothing moves for a follower copy whose partition keeps enough in-sync copies: the
    preview says so and what stopping the node does to that ISR, not that the node holds
    no topic."""
    pair = rig.lookup(rig.pair)
    [third] = [a for a in rig.c.nsqd_http if a not in pair["isr"]]
    eventually(lambda: len(rig.lookup(rig.wide)["isr"]) == 3, 60, f"{rig.wide} in sync on all")
    if rig.lookup(rig.wide)["leader_http"] == third:
        to = pair["leader_http"]
        ok("topic", "move", rig.wide, "--partition", "0", "--to", to, "--yes", *rig.lookupd)
    eventually(lambda: len(rig.lookup(rig.wide)["isr"]) == 3, 60, f"{rig.wide} in sync on all")
    got = ok("node", "drain", third, "--dry-run", *rig.lookupd)
    steps = got.stdout.splitlines()[1:]
    assert steps[0] == (
        "  (nothing to send: the node leads no partition, so no leader moves; each partition "
        "it holds a follower copy of stays writable without it, so its copies stay on it)"
    ), got.stdout
    assert steps[1:] == [
        f"    {rig.wide}/0: follower copy in an ISR of 3; stopping the node leaves 2 in sync "
        "and up, writes need 2: youzan moves it to the catch-up list, and it rejoins the ISR "
        "once back and caught up",
        "dry run: nothing was changed",
    ], got.stdout


def test_a_drain_of_the_copy_a_leaderless_partition_needs_is_refused_saying_why(
    rig: Rig,
) -> None:
    """The drained nsqd holds the only live in-sync copy of a partition whose leader just
    died: the drain used to call it safe ("nothing to send"), as the lookup lists no such
    partition. Once nsqlookupd has elected the copy (not writable: 1 of 2 in sync) the
    drain refuses for the ISR it leaves; which one a run meets depends on when it asks,
    so the words are checked when the lookup showed no leader before and after it."""
    first = rig.lookup(rig.pair)
    leader = rig.node(first["leader_http"])
    [copy] = [a for a in first["isr"] if a != leader.http_address]
    process.kill_hard(leader)
    rig.dead.append(leader)

    def leader_now() -> str | None:
        return rig.lookup(rig.pair)["leader_http"]  # type: ignore[no-any-return]

    eventually(lambda: leader_now() != leader.http_address, 30, "the dead leader unlisted")
    before = leader_now()
    got = run_main("node", "drain", copy, "--dry-run", *rig.lookupd)
    leaderless = before is None and leader_now() is None
    assert got.returncode == 1, got
    assert f"{rig.pair}/0: " in got.stderr and f"{copy} cannot be drained now" in got.stderr
    if leaderless:
        [line] = [x for x in got.stderr.splitlines() if f"{rig.pair}/0: " in x]
        assert "it has no leader now (not writable), and 1 of its in-sync copies are up" in line
        assert "waiting for an election will not do" in line
        if leader.tcp_address in line:  # its ISR still names the dead leader
            assert f"bring {leader.tcp_address} back first" in line
    # once the copy is elected, youzan keeps the dead leader in the partition's catch-up
    # list: that nsqd is the copy it misses, to bring back (no nsqd need be added)
    eventually(lambda: leader_now() == copy, 30, f"{copy} elected")
    got = run_main("node", "drain", copy, "--dry-run", *rig.lookupd)
    assert got.returncode == 1, got
    [line] = [x for x in got.stderr.splitlines() if f"{rig.pair}/0: " in x]
    dead = leader.tcp_address
    [third] = [n.tcp_address for n in rig.c.nsqds if n.http_address not in first["isr"]]
    assert line.endswith(f"({dead} in its catch-up list is down): bring {dead} back first") or (
        # nsqlookupd's topic check has assigned the third nsqd in the dead one's place
        line.endswith(
            f"({dead} in its catch-up list is down; {third} in its catch-up list is catching "
            f"up): wait for {third} to catch up and bring {dead} back first (`nsqctl lookup "
            f"{rig.pair}` shows when it joins the ISR)"
        )
    ), line


def test_a_drain_of_a_dead_nsqd_says_it_is_down_not_unknown(rig: Rig) -> None:
    [dead] = rig.dead
    eventually(lambda: dead.http_address not in registered(rig.c), 30, "the lookupd to forget it")
    for name in (dead.http_address, dead.tcp_address):
        got = run_main("node", "drain", name, "--dry-run", *rig.lookupd)
        assert got.returncode == 1, got
        [line] = got.stderr.splitlines()
        assert line.startswith(f"nsqctl: error: nsqd {name} does not answer and nsqlookupd ")
        assert "does not list it: it is down" in line and "nothing was changed" in line
        assert "start it again, then drain it" in line and "`nsqctl check`" in line
    # an address that answers but is no registered nsqd (the lookupd's own) is still that
    lookupd = rig.c.lookupd_http[0]
    got = run_main("node", "drain", lookupd, "--dry-run", *rig.lookupd)
    assert got.returncode == 1, got
    [line] = got.stderr.splitlines()
    assert f"{lookupd} is not an nsqd registered with nsqlookupd" in line


def test_lookup_says_an_isr_member_is_not_registered(rig: Rig) -> None:
    def led() -> bool:
        return rig.lookup(rig.wide)["leader_http"] is not None

    eventually(led, 60, f"{rig.wide} led by a live nsqd")
    leader = rig.lookup(rig.wide)["leader_http"]
    [gone, *_] = [n for n in rig.c.nsqds if n.http_address != leader and n not in rig.dead]
    [etcd] = rig.c.by_role("etcd")
    process.kill_hard(etcd)  # the coordinator can no longer drop anyone from the ISR
    process.kill_hard(gone)
    rig.dead.append(gone)
    eventually(lambda: gone.http_address not in registered(rig.c), 30, "the lookupd to forget it")
    node_id = f"{gone.host}:{gone.rpc_port}:{gone.tcp_port}:"
    eventually(lambda: any(m.startswith(node_id) for m in rig.lookup(rig.wide)["isr"]), 30, "id")
    # the nsqd killed first may still be in the ISR too (the coordinator drops a dead
    # member some seconds after, and may not have before etcd went)
    dead = tuple(f"{n.host}:{n.rpc_port}:{n.tcp_port}:" for n in rig.dead)
    info = json.loads(ok("lookup", rig.wide, "--json", *rig.lookupd).stdout)
    [p] = info["partitions"]
    [member] = [m for m in p["isr"] if m.startswith(node_id)]
    # the JSON keeps the ISR as the server has it and names the members no lookupd lists
    assert member in p["isr_not_registered"]
    assert p["isr_not_registered"] == [m for m in p["isr"] if m.startswith(dead)]
    live = {n.http_address for n in rig.c.nsqds if n not in rig.dead}
    assert set(p["isr"]) - set(p["isr_not_registered"]) <= live
    said = f"{member} (tcp {gone.tcp_address}, not registered)"
    assert any(said in w and "no nsqlookupd lists" in w for w in info["warnings"])
    [line] = [x for x in ok("lookup", rig.wide, *rig.lookupd).stdout.splitlines() if " isr " in x]
    assert said in line
