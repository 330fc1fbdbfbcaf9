"""A consumer's lookup poll moving partitions off a hung leader, on real youzan servers.

A partition leader hangs (SIGSTOP): its sockets stay open and answer nothing, so the
consumer's connections to it live on until the heartbeat deadline. Meanwhile youzan elects
new leaders and the poll's topology no longer lists the hung nsqd: the consumer drops those
connections, each close waiting on an nsqd that never answers its CLS. A connection to the
same nsqd that ends while another closes (its deadline passed, or the nsqd died, as here: a
kill -9 makes the moment the test's, not a timer's) must not break the poll's handling of
the topology (which would leave the partitions it had not reached yet on the dead leader
until the next poll, and say only "callback failed"). The hang found this way is said as
a lost connection is: a warning naming the nsqd.

3 nsqd (a new leader needs a replica on a third node), 4 partitions (so one nsqd leads two).
The heartbeat is left long so the connections outlive the election; the lookup polls every
second so the election is seen soon after it happens.
"""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.lookup.client import LookupClient
from nsqctl.lookup.topology import Topology
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from tests.conftest import StartCluster
from tests.helpers.failover import lookup_partitions
from tests.helpers.redesign import TopicSpec, create_topics, unique
from tests.helpers.wait import wait_for

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(240)]

PARTITIONS = 4


async def test_a_connection_lost_while_the_poll_drops_another_breaks_nothing(
    start_cluster: StartCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nsqctl")
    c = start_cluster("redesign", nsqd=3)
    topic = unique("tcb")
    spec = TopicSpec(partitions=PARTITIONS, replicas=2, ordered=True)
    await create_topics(c.lookupd_http, {topic: spec}, channels=("c",))
    leaders = lookup_partitions(c.lookupd_http[0], topic, "r")
    port, led = Counter(leaders.values()).most_common(1)[0]
    assert led >= 2, leaders  # 4 partitions on 3 nsqds: one leads two
    hung = next(n for n in c.nsqds if n.tcp_port == port)
    consumer = Consumer(
        topic,
        "c",
        lambda msg: None,
        lookupd_http=c.lookupd_http,
        config=ConnectionConfig(heartbeat_interval_ms=30_000),
        options=ConsumerOptions(ordered=True, lookup_interval=1.0, lookup_jitter=0.0),
    )
    async with consumer:

        def on(port_of: int) -> set[int | None]:
            return {part for (a, part) in consumer.connections if a.port == port_of}

        await wait_for(lambda: len(on(port)) == led, 30, "the hung nsqd's partitions read")

        process.pause(hung)
        try:
            # the poll saw the new leaders and is closing the first of the hung connections
            await wait_for(
                lambda: len(on(port)) < led, 120, "the poll to drop a partition of the hung leader"
            )
        finally:
            process.kill_hard(hung)  # the others on it end now, during that close
        await wait_for(
            lambda: len(consumer.connections) == PARTITIONS and not on(port),
            120,
            lambda: f"every partition read on a new leader (read: {sorted(consumer.connections)})",
        )
    failed = [r.getMessage() for r in caplog.records if r.name == "nsqctl.lookup" and r.exc_info]
    assert failed == []
    # the hang, found by the lookup before any heartbeat deadline, said as a loss is
    moved = [r for r in caplog.records if "no longer leads" in r.getMessage()]
    assert moved and all(r.levelno == logging.WARNING for r in moved), caplog.text
    assert all(f":{port} " in r.getMessage() for r in moved), caplog.text
    assert "consuming again on" in caplog.text  # the failover reported, as after a kill


async def test_a_failing_topology_callback_is_one_warning_with_its_cause(
    redesign_cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """What the poller says when its callback raises: one warning naming the exception,
    the traceback on the record (for a handler that prints it), and it polls on."""
    caplog.set_level(logging.INFO, logger="nsqctl.lookup")
    calls = 0

    def broken(topo: Topology) -> None:
        nonlocal calls
        calls += 1
        raise ValueError("no such partition 7")

    async with LookupClient(redesign_cluster.lookupd_http, poll_interval=0.1) as client:
        task = client.start_polling(unique("tcbcb"), broken)
        try:
            await wait_for(lambda: calls >= 2, 30, "the poller to call again after a failure")
        finally:
            task.cancel()
    said = [r for r in caplog.records if r.name == "nsqctl.lookup" and r.levelno >= logging.WARNING]
    assert said, caplog.text
    record = said[0]
    assert record.levelno == logging.WARNING
    assert "ValueError: no such partition 7" in record.getMessage()
    assert "\n" not in record.getMessage()
    assert record.exc_info is not None
