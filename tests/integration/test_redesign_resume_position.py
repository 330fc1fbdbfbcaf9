"""A channel that exists only on the killed leader is resumed, not skipped (issue 25).

youzan copies a new channel to a partition's replicas some seconds after it was made, so
for a while the channel lives on the leader alone. If the leader dies then, the new
leader has no such channel, the consumer's SUB creates it at the topic's end, and every
message in between would be skipped for that channel. The consumer keeps the partition's
confirmed position and resumes from it on the new leader.

The situation is forced on real servers: 3 nsqd, a topic of replicas 3 (youzan elects a
new leader without the killed node), a channel made by the consumer's own SUB on the
leader, part of the messages handled and FINed, the rest held in flight or not yet sent,
and the leader killed while the replicas' ``/stats`` list no such channel (asserted, so
the test proves the situation it claims). Then one more message is published: when it
arrives, everything published before the kill must have arrived too.
"""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.consumer import Consumer
from nsqctl.failover import RESUMED_FROM_CONFIRMED, FailoverEvent
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from tests.conftest import StartCluster
from tests.helpers.failover import kill_leader, leader_of
from tests.helpers.redesign import TopicSpec, create_topics, nsqd_stats, unique
from tests.helpers.wait import wait_for

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(300)]

BEFORE = 60  # messages published before the kill
HANDLED = 10  # of those, handled and FINed before the kill
CHANNEL = "fresh#ephemeral"


def _replicas_without_channel(c: Cluster, topic: str, leader_port: int) -> list[str]:
    """HTTP addresses of the running non-leader nsqds that hold ``topic`` but not CHANNEL."""
    lacking = []
    for node in c.nsqds:
        if node.tcp_port == leader_port or not process.pid_runs(node.pid, node.exe):
            continue
        copies = nsqd_stats(node.http_address, topic)
        assert copies, f"nsqd {node.http_address} holds no copy of {topic}"
        if all(t.channel(CHANNEL) is None for t in copies):
            lacking.append(node.http_address)
    return lacking


async def _scenario(c: Cluster, *, ordered: bool) -> None:
    topic = unique("resume")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=3)}, channels=())
    leader = leader_of(c, topic, 0)
    handled: list[bytes] = []
    gate = asyncio.Event()  # holds the handlers past HANDLED until the leader is dead
    events: list[FailoverEvent] = []

    async def handler(msg: Message) -> None:
        handled.append(msg.body)
        if len(handled) > HANDLED:
            await gate.wait()

    consumer = Consumer(
        topic,
        CHANNEL,
        handler,
        lookupd_http=c.lookupd_http,
        max_in_flight=1 if ordered else 4,
        ordered=ordered,
        failover_window=200,
        on_failover=events.append,
    )
    await consumer.start()
    before = [f"b{i:03d}".encode() for i in range(BEFORE)]
    try:
        async with Producer(lookupd_http=c.lookupd_http) as producer:
            await producer.publish_many(topic, before)
            await wait_for(lambda: len(handled) > HANDLED, 30, "the first messages handled")
            lacking = _replicas_without_channel(c, topic, leader.tcp_port)
            assert len(lacking) == 2, "the channel reached a replica before the kill"
            kill_leader(c, topic, 0)
            gate.set()
            await wait_for(
                lambda: any(e.kind == "resumed" for e in events), 200, "consuming on a new leader"
            )
            await producer.publish(topic, b"after")
        await wait_for(lambda: b"after" in handled, 60, "the message published after the kill")
        missing = sorted(set(before) - set(handled))
        assert not missing, f"{len(missing)} message(s) skipped, e.g. {missing[:3]}"
        assert any(e.reason == RESUMED_FROM_CONFIRMED for e in events), events
    finally:
        await consumer.close()


def test_leader_only_channel_resumes_from_the_confirmed_position(
    start_cluster: StartCluster,
) -> None:
    c = start_cluster("redesign", nsqd=3)
    asyncio.run(_scenario(c, ordered=False))
