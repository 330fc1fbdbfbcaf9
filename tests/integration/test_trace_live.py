"""``nsqctl trace``'s live events (:func:`nsqctl.pipeline.trace.from_live`) on the real
redesign session cluster: each partition's channel progress, as its nsqd's ``/stats`` says
through the one reader. Lean: one topic and no Spark session (the message lookup by id is
covered by the Spark pipeline tests), but the pipeline package needs pyarrow, so it is
marked ``spark`` (the extra) and imports it inside the test."""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from tests.helpers.redesign import (
    TopicSpec,
    channel_depths,
    create_topics,
    leader_stats,
    unique,
)

pytestmark = [pytest.mark.redesign, pytest.mark.spark]


async def _publish(c: Cluster, topic: str, partition: int, count: int) -> None:
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        for i in range(count):
            await producer.publish(topic, f"m{i}".encode(), partition=partition)


def test_channel_progress_names_each_partition_with_its_depth(redesign_cluster: Cluster) -> None:
    from nsqctl.pipeline.selection import TraceQuery
    from nsqctl.pipeline.trace import from_live

    c = redesign_cluster
    topic = unique("tracelive")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(2, 1)}, ("c",)))
    asyncio.run(_publish(c, topic, 1, 3))
    depths = channel_depths(c, topic, "c")
    assert depths == {0: 0, 1: 3}  # nothing consumes: the published ones wait on c

    events = from_live(list(c.nsqd_http), TraceQuery("t", topic=topic), set())

    progress = [e for e in events if e["event"] == "channel progress"]
    by_partition = {int(e["where"].rsplit(" ", 1)[1]): e for e in progress}
    assert sorted(by_partition) == [0, 1], progress
    for part, event in by_partition.items():
        assert f" {topic}/c partition {part}" in event["where"]
        assert event["detail"] == {"depth": depths[part], "in_flight": 0}
    # an nsqd that cannot be read is named instead of failing the trace (or being left out)
    [down] = from_live(["127.0.0.1:1"], TraceQuery("t", topic=topic), set(), timeout=1)
    assert (down["event"], down["where"]) == ("not answering", "127.0.0.1:1")
    assert "127.0.0.1:1" in down["detail"]["error"]
    # the message's partition on no nsqd that answered (its nsqd down, or not given): the
    # trace says it was not searched, not that the message is nowhere
    [holder] = [s.node for p, s in leader_stats(c, topic).items() if p == 0]
    on_1 = TraceQuery("t", topic=topic, internal_id=(1 << 50) + 1)
    searched = from_live([holder], on_1, set())
    assert [e["where"] for e in searched if e["event"] == "not searched"] == [
        f"{topic} partition 1"
    ]
