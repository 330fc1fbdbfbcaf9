"""A consumer that cannot go on tells its caller: after a FailoverTimeoutError
``run_forever()`` raises it and the iterator raises it, instead of waiting forever with
only ``consumer.failed`` set.

A private redesign cluster (a leader is killed): 2 nsqd and a topic of replicas 2, where
youzan elects no new leader without the killed node, and a failover window of 3 s.

The same cluster then shows what a publisher meets there: the one copy left is below the
write quorum (more than half of the 2 replicas in sync), and the publish fails as a
PartitionUnavailableError saying so and what to do, not a bare "no writable nsqd".
"""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.errors import FailoverTimeoutError, PartitionUnavailableError
from nsqctl.message import Message
from nsqctl.producer import Producer, ProducerOptions
from tests.conftest import StartCluster
from tests.helpers.failover import kill_leader
from tests.helpers.redesign import TopicSpec, create_topics, unique
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.redesign


async def test_run_forever_and_the_iterator_raise_the_failover_timeout(
    start_cluster: StartCluster,
) -> None:
    c = start_cluster("redesign", nsqd=2)
    topic = unique("cfatal")
    spec = {topic: TopicSpec(partitions=1, replicas=2)}
    await create_topics(c.lookupd_http, spec, channels=("c", "c2"))
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        await producer.publish(topic, b"before")
    handled: list[Message] = []
    common = dict(lookupd_http=c.lookupd_http, options=ConsumerOptions(failover_window=3.0))
    runner = Consumer(topic, "c", handled.append, **common)  # type: ignore[arg-type]
    iterated = Consumer(topic, "c2", **common)  # type: ignore[arg-type]
    taken: list[Message] = []

    async def iterate() -> None:
        async for msg in iterated:
            msg.finish()
            taken.append(msg)

    running = asyncio.create_task(runner.run_forever())
    iterating = asyncio.create_task(iterate())
    try:
        await wait_for(lambda: handled and taken, 30.0, "both consumers reading")
        kill_leader(c, topic, 0)
        async with asyncio.timeout(40):  # 3 s window; a hang cannot pass
            done = await asyncio.gather(running, iterating, return_exceptions=True)
    finally:
        for task in (running, iterating):
            task.cancel()
        await runner.close()
        await iterated.close()
    assert [type(err) for err in done] == [FailoverTimeoutError, FailoverTimeoutError], done
    assert runner.error is done[0] and iterated.error is done[1]

    once = ProducerOptions(failover_window=0, max_attempts=1)
    async with Producer(lookupd_http=c.lookupd_http, options=once) as producer:

        async def unwritable() -> bool:
            return not (await producer.topology(topic, refresh=True)).partitions

        await wait_for(unwritable, 30.0, "nsqlookupd to name no writable leader")
        with pytest.raises(PartitionUnavailableError) as refused:
            await producer.publish(topic, b"during")
    text = str(refused.value)
    assert "in-sync replicas (ISR)" in text and "fewer than 2 of its 2 replicas" in text, text
    assert "wait for the ISR" in text and "bring the replicas' nsqds back" in text, text
    assert refused.value.unsent is True
