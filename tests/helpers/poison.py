"""A consumer that gives the same few messages back over and over: what ``top``, the
dashboard and ``check --poison`` call a poison channel, made on a real cluster."""

from __future__ import annotations

import math
import time

from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from tests.helpers.redesign import TopicSpec, create_topics
from tests.helpers.wait import wait_for

POISON = 3
"""Messages published and requeued forever."""


async def poison_consumer(c: Cluster, topic: str, redesign: bool) -> tuple[Consumer, list[int]]:
    """Publish three messages and start a consumer on channel ``retries`` that requeues
    each one as it arrives; nsqd's REQ delay (not the test) paces the round trip. On the
    redesign the channel is made first: one made later starts at the end of the queue.
    Returns the consumer (stop it) and a one-item list counting deliveries."""
    seen = [0]

    async def give_back(msg: Message) -> None:
        seen[0] += 1
        msg.requeue(delay=0.05, backoff=False)

    if redesign:
        await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1)}, ["retries"])
        producer = Producer(lookupd_http=c.lookupd_http)
        consumer = Consumer(
            topic,
            "retries",
            give_back,
            lookupd_http=c.lookupd_http,
            options=ConsumerOptions(max_in_flight=POISON),
        )
    else:
        producer = Producer(nsqd_tcp=[c.nsqd_tcp[0]])
        consumer = Consumer(
            topic,
            "retries",
            give_back,
            nsqd_tcp=[c.nsqd_tcp[0]],
            options=ConsumerOptions(max_in_flight=POISON),
        )
    async with producer:
        await producer.publish_many(topic, [f"bad{i}".encode() for i in range(POISON)])
    await consumer.start()
    return consumer, seen


async def poll_interval_for_poison(seen: list[int], floor: float, margin: float = 2.0) -> float:
    """A poll interval (whole seconds, at least ``floor``) over which the channel requeues
    ``margin`` times the ``2 * POISON`` requeues the poison rule needs, from the pace the
    consumer sees now. The pace is the server's and the machine's: youzan's nsqd redelivers
    a deferred message a few times a second on a quiet machine and a third of that under
    a loaded CI run, so a fixed interval was either slow everywhere or flaky there. Waits
    first for the messages to have gone round a few times, so the pace is a steady one."""
    await wait_for(lambda: seen[0] > 3 * POISON, 30, "the messages requeued a few times")
    needed = 2 * POISON
    start, began = seen[0], time.monotonic()
    await wait_for(lambda: seen[0] >= start + needed, 30, f"{needed} more redeliveries")
    per_second = (seen[0] - start) / (time.monotonic() - began)
    return float(max(floor, math.ceil(margin * needed / per_second)))
