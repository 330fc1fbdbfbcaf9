"""``nsqctl node drain|restore`` on real youzan servers (3 nsqd, one lookupd, etcd).

A private cluster: a drain moves every leader off its node, which would reshuffle the
session cluster under other tests. The topic has one partition with two replicas, so the
leader has an in-sync copy to hand over to; nsqlookupd's ``/lookup?access=w`` (where
publishers are sent) tells who leads before and after.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import clean_env, run_cli
from tests.helpers.clusters import running_cluster
from tests.helpers.failover import leader_of
from tests.helpers.redesign import TopicSpec, create_topics, unique

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
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=2)}))
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
    assert doc["moved"] == [{"topic": topic, "partition": 0, "from": node, "to": new_leader}]
    state = json.loads((tmp_path / "state" / "drains.json").read_text())
    assert state["drains"][node]["state"] == "drained"

    code, out, err = _node(c, ["restore", node, "--json", "--wait", "150"], env)
    assert code == 0, err
    assert json.loads(out)["ok"] is True
    assert leader_of(c, topic).http_address == node
    state = json.loads((tmp_path / "state" / "drains.json").read_text())
    assert state["drains"][node]["state"] == "restored"
