"""The two edges of carrying channels onto new partitions, on real youzan servers.

The expand itself is driven end to end in test_redesign_partition_ops.py; the moments
around it cannot be arranged through an expand (a producer writing in the milliseconds
between a new partition's leader session and our create; a partition whose leader never
accepts), so the carrying steps are driven directly here on a partition set up to be in
that state: one that took messages before the channel existed, and one that does not
exist.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from nsqctl.admin.partitions.carry import (
    Carried,
    NewPartitions,
    create_until_led,
    rewind_early_writes,
)
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from tests.helpers.redesign import TopicSpec, channel_depths, create_topics, unique

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(120)]


async def _carry(c: Cluster, topic: str, partitions: list[int], wait: float) -> Carried:
    async with httpx.AsyncClient(timeout=10) as client:
        new = NewPartitions(topic, ["late"], partitions, c.nsqd_http, time.monotonic() + wait)
        carried = await create_until_led(client, new)
        await rewind_early_writes(client, topic, carried)
        return carried


def test_messages_written_before_the_channel_are_delivered_and_a_missing_leader_fails(
    redesign_cluster: Cluster,
) -> None:
    c = redesign_cluster
    topic = unique("carry")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2)}))

    async def publish() -> None:
        async with Producer(lookupd_http=c.lookupd_http) as producer:
            await producer.publish_many(topic, [b"early"] * 5, partition=1)

    asyncio.run(publish())  # partition 1 takes 5 messages; channel "late" exists nowhere
    carried = asyncio.run(_carry(c, topic, [1], 10))
    assert [r.outcome for r in carried.results()] == ["ok", "ok"]  # created, set back
    assert "partition 1 took 5 message(s) before channel late existed" in carried.notes[0]
    assert channel_depths(c, topic, "late") == {1: 5}  # all 5 still to be delivered

    nowhere = asyncio.run(_carry(c, topic, [7], 1))  # no nsqd leads a partition 7
    (result,) = nowhere.results()
    assert result.outcome == "failed", result
    assert "channel late could not be created on new partition 7" in result.error
