"""Library edges against real servers: a consumer whose start() its caller cancelled, and
the publish error's ``unsent`` after nsqd answered that it does not lead the partition
(the session's redesign cluster, a topic with a replica on each of its two nsqds,
published to straight through the one that does not lead it).

The held-up start connects to the session's original nsqd and to a port whose listener
never accepts: the kernel completes the TCP handshake and nothing answers the IDENTIFY,
which is what a hung nsqd looks like from the client (the session cluster's nsqds are
shared: none may be stopped). Whether the consumer's connection to the real nsqd is still
open is read from this process's sockets.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

import nsqctl
from nsqctl.addresses import HostPort
from nsqctl.connection import ConnectionConfig
from nsqctl.servers import cluster
from tests.helpers.names import unique
from tests.helpers.redesign import TopicSpec, create_topics, leader_stats, message_counts
from tests.helpers.sockets import connections_to
from tests.helpers.wait import wait_for


@pytest.mark.original
async def test_a_start_cancelled_while_an_nsqd_is_still_connecting_closes_the_consumer(
    original_cluster: cluster.Cluster,
) -> None:
    """One nsqd subscribed, the other still in its handshake, the caller cancels start():
    the consumer is closed (its subscribed connection too), so it cannot read on half
    started, where a refusal of its settings by one nsqd would end it as at start-up.
    Before, the connection stayed subscribed and run_forever() ran on."""
    nsqd = original_cluster.nsqd_tcp[0]
    nsqd_port = HostPort.parse(nsqd).port
    topic = unique("startcut")
    async with nsqctl.Producer(nsqd_tcp=[nsqd]) as producer:
        await producer.publish(topic, b"first")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        held = f"127.0.0.1:{silent.getsockname()[1]}"
        before = connections_to(nsqd_port)
        consumer = nsqctl.Consumer(
            topic,
            "c",
            lambda msg: None,
            nsqd_tcp=[nsqd, held],
            # only the cancel ends the held handshake within the test
            config=ConnectionConfig(connect_timeout=120.0),
            options=nsqctl.ConsumerOptions(connect_timeout=120.0),
        )
        starting = asyncio.create_task(consumer.start())
        running: asyncio.Task[None] | None = None
        try:
            await wait_for(lambda: len(consumer.connections) == 1, 10.0, "the real nsqd subscribed")
            assert not starting.done()  # the held nsqd keeps start() waiting
            starting.cancel()
            async with asyncio.timeout(30):  # a hang guard: the close is quick
                with pytest.raises(asyncio.CancelledError):
                    await starting
            assert consumer.connections == {}
            assert consumer.stats.connections == 0
            others = asyncio.all_tasks() - {asyncio.current_task()}
            assert [t.get_name() for t in others] == []  # nothing left to connect later
            await wait_for(
                lambda: connections_to(nsqd_port) == before,
                10.0,
                lambda: f"the subscribed connection closed: {connections_to(nsqd_port)} open",
            )
            running = asyncio.create_task(consumer.run_forever())
            async with asyncio.timeout(10):
                with pytest.raises(nsqctl.UsageError, match="closed"):
                    await running
        finally:
            for task in (starting, running):
                if task is not None:
                    task.cancel()
            async with asyncio.timeout(30):
                await consumer.close()


@pytest.mark.redesign
async def test_a_publish_only_refused_before_storing_says_nothing_was_stored(
    redesign_cluster: cluster.Cluster,
) -> None:
    """Published straight to an nsqd that holds a replica of the partition and does not
    lead it: a batch pinned to the partition is answered E_FAILED_ON_NOT_LEADER, and a
    publish without a partition E_TOPIC_NOT_EXIST (nsqd looks up its own partition, and
    leads none), both before nsqd stores anything, so a publish whose every attempt got
    them ends with ``unsent`` True (safe to publish again). A single PUB pinned to the
    partition gets E_FAILED_ON_NOT_LEADER after a failed write, which the replicas may
    have kept when nsqd lost the leadership during it (see stored_nothing): it stays
    False. Nothing is stored by any of them. Before, every one of them said False ("may
    have been stored")."""
    c = redesign_cluster
    topic = unique("notlead")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=2)})
    leader = leader_stats(c, topic)[0].node
    follower = c.nsqd_tcp[1 - c.nsqd_http.index(leader)]
    tries = nsqctl.ProducerOptions(max_attempts=2, failover_window=0)
    async with nsqctl.Producer(nsqd_tcp=[follower], options=tries) as producer:
        with pytest.raises(nsqctl.ConfigError, match="E_FAILED_ON_NOT_LEADER") as pinned:
            await producer.publish_many(topic, [b"a", b"b"], partition=0)
        assert pinned.value.unsent is True
        for publish in (
            producer.publish_many(topic, [b"c", b"d"]),
            producer.publish(topic, b"e"),
        ):
            with pytest.raises(nsqctl.TopicNotFoundError) as unpinned:
                await publish
            assert unpinned.value.unsent is True
        with pytest.raises(nsqctl.ConfigError, match="E_FAILED_ON_NOT_LEADER") as single:
            await producer.publish(topic, b"f", partition=0)
        assert single.value.unsent is False
    assert message_counts(c, topic) == {0: 0}
