"""What the operator commands say about an nsqd that is down, on real youzan servers.

One private cluster (3 nsqd) serves the module, with a topic of 1 partition and 3
replicas. etcd is killed, then a follower with -9: nsqlookupd forgets the follower at
once (its registration connection closes), but with no etcd the coordinator cannot drop
it from the ISR, so the ISR names an nsqd no nsqlookupd lists (by youzan's node id),
which ``lookup`` must say in words.
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


def test_lookup_says_an_isr_member_is_not_registered(rig: Rig) -> None:
    [etcd] = rig.c.by_role("etcd")
    gone = rig.followers[0]
    process.kill_hard(etcd)  # the coordinator can no longer drop anyone from the ISR
    process.kill_hard(gone)
    eventually(lambda: gone.http_address not in registered(rig.c), 30, "the lookupd to forget it")
    node_id = f"{gone.host}:{gone.rpc_port}:{gone.tcp_port}:"

    def part() -> dict[str, Any]:
        info = json.loads(ok("lookup", rig.wide, "--json", *rig.lookupd).stdout)
        [p] = info["partitions"]
        return p  # type: ignore[no-any-return]

    eventually(lambda: any(str(m).startswith(node_id) for m in part()["isr"]), 30, "its id")
    info = json.loads(ok("lookup", rig.wide, "--json", *rig.lookupd).stdout)
    [p] = info["partitions"]
    [member] = [m for m in p["isr"] if m.startswith(node_id)]
    # the JSON keeps the ISR as the server has it and names the members no lookupd lists
    assert p["isr_not_registered"] == [member]
    assert p["leader_http"] in p["isr"] and p["leader_http"] not in p["isr_not_registered"]
    said = f"{member} (tcp {gone.tcp_address}, not registered)"
    assert any(said in w and "no nsqlookupd lists" in w for w in info["warnings"])
    [line] = [x for x in ok("lookup", rig.wide, *rig.lookupd).stdout.splitlines() if " isr " in x]
    assert said in line
