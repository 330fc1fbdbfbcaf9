"""A channel that exists only on the killed leader is resumed, not skipped.

youzan copies a new channel to the replicas in the partition's ISR when a SUB makes it
(and again on its periodic sync when that failed), so a replica that joined the ISR later
or missed the copy lacks it for a while, and an ephemeral channel is never copied. If the
leader dies then, the new leader has no such channel, the consumer's SUB creates it at
the topic's end, and every message in between would be skipped for that channel. The
consumer keeps the partition's confirmed position and resumes from it on the new leader.

The situation is forced on real servers: 3 nsqd, a topic of replicas 3 (youzan elects a
new leader without the killed node), two channels made by the consumers' own SUBs on the
leader (one read plain, one ordered), part of the messages handled and FINed, the rest
held in flight or not yet sent, and the leader killed while the replicas' ``/stats`` list
neither channel (asserted, so the test proves the situation it claims). Then one more
message is published: when it arrives, everything published before the kill must have
arrived too. Without the resume (Resumer.start_for answering None) each channel loses
every message that was neither handled nor in flight at the kill, and the test fails.
"""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.consumer import Consumer, ConsumerOptions
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
HANDLED = 10  # of those, handled and FINed by each consumer before the kill
# Ephemeral: youzan never copies such a channel to the replicas, so it lives on the leader
# alone for as long as it exists. That forces the situation without a race: a durable
# channel made by a SUB reaches the replicas in the ISR at once.
PLAIN, ORDERED = "plain#ephemeral", "ordered#ephemeral"


def _replicas_holding(c: Cluster, topic: str, leader_port: int, channel: str) -> list[str]:
    """HTTP addresses of the running non-leader nsqds whose copy of ``topic`` lists
    ``channel``; every one of them must hold the topic."""
    holding = []
    replicas = [n for n in c.nsqds if n.tcp_port != leader_port and process.pid_runs(n.pid, n.exe)]
    assert len(replicas) == 2
    for node in replicas:
        copies = nsqd_stats(node.http_address, topic)
        assert copies, f"nsqd {node.http_address} holds no copy of {topic}"
        if any(t.channel(channel) is not None for t in copies):
            holding.append(node.http_address)
    return holding


class Reader:
    """One consumer of the topic whose handler holds every message past HANDLED until the
    leader is dead (so some are in flight and the rest not sent yet at the kill)."""

    def __init__(self, c: Cluster, topic: str, channel: str, gate: asyncio.Event) -> None:
        self.channel = channel
        self.handled: list[bytes] = []
        self.events: list[FailoverEvent] = []
        self._gate = gate
        ordered = channel == ORDERED
        self.consumer = Consumer(
            topic,
            channel,
            self._handle,
            lookupd_http=c.lookupd_http,
            options=ConsumerOptions(
                max_in_flight=1 if ordered else 4, ordered=ordered, failover_window=200
            ),
            on_failover=self.events.append,
        )

    async def _handle(self, msg: Message) -> None:
        self.handled.append(msg.body)
        if len(self.handled) > HANDLED:
            await self._gate.wait()

    def resumed(self) -> bool:
        return any(e.kind == "resumed" for e in self.events)

    def held(self) -> bool:
        """Past HANDLED: the handler now holds its message until the gate opens."""
        return len(self.handled) > HANDLED

    def got_after(self) -> bool:
        return b"after" in self.handled


async def _scenario(c: Cluster) -> None:
    topic = unique("resume")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=3)}, channels=())
    leader = leader_of(c, topic, 0)
    gate = asyncio.Event()
    readers = [Reader(c, topic, PLAIN, gate), Reader(c, topic, ORDERED, gate)]
    for reader in readers:
        await reader.consumer.start()  # the channel is made at the topic's end, here
    before = [f"b{i:03d}".encode() for i in range(BEFORE)]
    try:
        async with Producer(lookupd_http=c.lookupd_http) as producer:
            await producer.publish_many(topic, before)
            for reader in readers:
                await wait_for(reader.held, 30, f"{reader.channel} handling")
                held = _replicas_holding(c, topic, leader.tcp_port, reader.channel)
                assert not held, f"{reader.channel} reached {held} before the kill"
            kill_leader(c, topic, 0)
            gate.set()
            for reader in readers:
                await wait_for(reader.resumed, 200, f"{reader.channel} on a new leader")
            await producer.publish(topic, b"after")
        for reader in readers:
            await wait_for(reader.got_after, 60, f"{reader.channel} after")
            missing = sorted(set(before) - set(reader.handled))
            assert not missing, f"{reader.channel}: {len(missing)} skipped, e.g. {missing[:3]}"
            reasons = [e.reason for e in reader.events if e.kind == "resumed"]
            assert RESUMED_FROM_CONFIRMED in reasons, (reader.channel, reader.events)
        ordered = readers[1].consumer.stats
        assert ordered.order_regressions == 0, ordered
    finally:
        for reader in readers:
            await reader.consumer.close()


def test_leader_only_channels_resume_from_the_confirmed_position(
    start_cluster: StartCluster,
) -> None:
    c = start_cluster("redesign", nsqd=3)
    asyncio.run(_scenario(c))
