"""The library against a redesign partition whose in-sync replicas (ISR) fell below
quorum: youzan's leader refuses writes then, and nsqlookupd names no writable leader. A
publish must fail as a PartitionUnavailableError whose message says why a partition may
take no writes and what to do (wait for the ISR, bring the replicas back), not only
"no writable nsqd".

Its own two-nsqd cluster: the test kills the replica's nsqd (the one partition has two
replicas, so one in-sync copy is below the quorum of two).
"""

from __future__ import annotations

import asyncio

import pytest

import nsqctl
from nsqctl.servers import process
from tests.conftest import StartCluster
from tests.helpers.failover import leader_of
from tests.helpers.names import unique
from tests.helpers.redesign import TopicSpec, create_topics
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.redesign


async def test_a_publish_to_a_partition_below_quorum_says_why_and_what_to_do(
    start_cluster: StartCluster,
) -> None:
    c = start_cluster("redesign", nsqd=2)
    topic = unique("isrshort")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=2)})
    options = nsqctl.ProducerOptions(failover_window=0, max_attempts=1)
    async with nsqctl.Producer(lookupd_http=c.lookupd_http, options=options) as producer:
        leader = leader_of(c, topic)
        process.kill_hard(next(n for n in c.nsqds if n is not leader))  # the replica

        async def unwritable() -> bool:
            return not (await producer.topology(topic, refresh=True)).partitions

        await wait_for(unwritable, 60.0, "nsqlookupd to name no writable leader")
        async with asyncio.timeout(30):
            with pytest.raises(nsqctl.PartitionUnavailableError) as caught:
                await producer.publish(topic, b"refused")
    text = str(caught.value)
    assert "in-sync replicas (ISR)" in text and "fewer than 2 of its 2 replicas" in text, text
    assert "wait for the ISR" in text and "bring the replicas' nsqds back" in text, text
    assert caught.value.unsent is True
