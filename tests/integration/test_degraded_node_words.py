"""What the operator commands say about an nsqd that is down, on real youzan servers.

One private cluster (3 nsqd) serves the module, with a topic of 1 partition and 3
replicas. A follower is killed with -9: nsqlookupd forgets it at once (its registration
connection closes), so a drain of it must say it is down, not that the address is
unknown. Then etcd is killed, and a second follower: with no etcd, the coordinator
cannot drop it from the ISR, so the ISR names an nsqd no nsqlookupd lists (by youzan's
node id), which ``lookup`` must say in words.
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
from tests.helpers.redesign import TopicSpec, create_topics, eventually, leader_stats, unique


@dataclass
class Rig:
    c: Cluster
    wide: str  # 1 partition, 3 replicas: every nsqd holds a copy
    followers: list[NodeRecord]  # the two nsqds not leading it

    @property
    def lookupd(self) -> list[str]:
        return ["--lookupd", self.c.lookupd_http[0]]


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    for c in running_cluster("redesign", tmp_path_factory.mktemp("nodewords"), nsqd=3):
        wide = unique("wide")
        asyncio.run(create_topics(c.lookupd_http, {wide: TopicSpec(1, replicas=3)}))
        leader = leader_stats(c, wide)[0].node
        yield Rig(c, wide, [n for n in c.nsqds if n.http_address != leader])


def registered(c: Cluster) -> set[str]:
    """The nsqds (HTTP addresses) nsqlookupd lists now."""
    body = httpx.get(f"http://{c.lookupd_http[0]}/nodes", headers=NSQ_V1).json()
    return {f"{p['broadcast_address']}:{p['http_port']}" for p in body["producers"]}


def test_a_drain_of_a_dead_nsqd_says_it_is_down_not_unknown(rig: Rig) -> None:
    dead = rig.followers[0]
    process.kill_hard(dead)
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
    [etcd] = rig.c.by_role("etcd")
    gone = rig.followers[1]
    process.kill_hard(etcd)  # the coordinator can no longer drop anyone from the ISR
    process.kill_hard(gone)
    eventually(lambda: gone.http_address not in registered(rig.c), 30, "the lookupd to forget it")
    node_id = f"{gone.host}:{gone.rpc_port}:{gone.tcp_port}:"
    # the first follower killed may still be in the ISR too (the coordinator drops a dead
    # member some seconds after, and may not have before etcd went)
    dead = tuple(f"{n.host}:{n.rpc_port}:{n.tcp_port}:" for n in rig.followers)

    def part() -> dict[str, Any]:
        info = json.loads(ok("lookup", rig.wide, "--json", *rig.lookupd).stdout)
        [p] = info["partitions"]
        return p  # type: ignore[no-any-return]

    eventually(lambda: any(str(m).startswith(node_id) for m in part()["isr"]), 30, "its id")
    info = json.loads(ok("lookup", rig.wide, "--json", *rig.lookupd).stdout)
    [p] = info["partitions"]
    [member] = [m for m in p["isr"] if m.startswith(node_id)]
    # the JSON keeps the ISR as the server has it and names the members no lookupd lists
    assert member in p["isr_not_registered"]
    assert p["isr_not_registered"] == [m for m in p["isr"] if m.startswith(dead)]
    assert p["leader_http"] in p["isr"] and p["leader_http"] not in p["isr_not_registered"]
    said = f"{member} (tcp {gone.tcp_address}, not registered)"
    assert any(said in w and "no nsqlookupd lists" in w for w in info["warnings"])
    [line] = [x for x in ok("lookup", rig.wide, *rig.lookupd).stdout.splitlines() if " isr " in x]
    assert said in line
