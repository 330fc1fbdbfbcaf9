"""A history read (a SUB with a start) of a partition whose log is empty keeps what is
published while youzan refuses the start.

youzan searches the commit log for every start and answers "commit log end of file"
when it holds nothing; the consumer then subscribes from the partition's end. A message
published between the refusal and that subscription lies before the end it starts at,
and a history read that asked for everything would never see it. The consumer asks the
leader's ``/stats`` where the channel it made at the end starts, before it is READY: past
the partition's start, something came in between, and the subscription is made again
with the start asked for, which the log, no longer empty, now answers.

The instant in between is forced on real servers: the consumer's dial that follows the
refusal publishes a message first (a test seam, the only way to place a publish inside
that window).
"""

from __future__ import annotations

from typing import Any

import pytest

from nsqctl.addresses import HostPort
from nsqctl.connection import Connection
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.producer import Producer
from nsqctl.protocol import start_msgcount
from nsqctl.servers.cluster import Cluster
from tests.helpers.redesign import TopicSpec, create_topics, nsqd_stats, unique
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.redesign

GAP, AFTER = b"published while the start was refused", b"published after"


class PublishingInTheGap(Consumer):
    """Publishes GAP to the partition it reads when it dials the second time: after
    nsqd refused the first subscription's start, before the one from the end."""

    def __init__(self, producer: Producer, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.producer = producer
        self.dials = 0

    async def _dial(self, address: HostPort, on_error: Any, on_close: Any) -> Connection:
        self.dials += 1
        if self.dials == 2:
            await self.producer.publish(self.topic, GAP, partition=1)
        return await super()._dial(address, on_error, on_close)


async def test_a_history_read_keeps_a_message_published_while_its_start_was_refused(
    redesign_cluster: Cluster,
) -> None:
    c = redesign_cluster
    topic = unique("empty-gap")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2)}, channels=())
    got: list[bytes] = []
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        consumer = PublishingInTheGap(
            producer,
            topic,
            "history#ephemeral",
            lambda msg: got.append(msg.body),
            lookupd_http=c.lookupd_http,
            options=ConsumerOptions(partitions=[1], start=start_msgcount(0)),
        )
        async with consumer:
            await wait_for(lambda: consumer.connections, 30, "the subscription")
            # The situation claimed: the first subscription was refused (the partition was
            # empty), and GAP was stored before the subscription that holds now was made.
            assert consumer.dials >= 2
            copies = [t for n in c.nsqds for t in nsqd_stats(n.http_address, topic)]
            assert sum(t.message_count for t in copies if t.partition == 1 and t.is_leader) >= 1
            await producer.publish(topic, AFTER, partition=1)
            await wait_for(lambda: AFTER in got, 30, "the message published after")
    assert got == [GAP, AFTER]
