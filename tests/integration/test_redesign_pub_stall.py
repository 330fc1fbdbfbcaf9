"""Keyed ``pub`` while one partition's leader stalls, on real youzan servers.

A keyed chunk of input becomes one batch per route. Batches of one route go stop-and-wait,
so while a partition has no answering leader its batches wait. ``pub`` must then stop
reading input once its window of batches in flight is full: the other partition's OKs
used to make room again and again, so the stalled route's batches, and the input read for
them, grew without bound (the soak saw RSS grow with the backlog, and the piled-up route
then drained slower than input came).

The stall is a SIGSTOP of partition 0's leader (its socket stays open and answers
nothing). The generator that feeds ``pub`` notes at every read how many lines ``pub``
holds unconfirmed; the leader is resumed when the stalled publish times out and reports
its wait, or, without a bound, once ``pub`` has read far past it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsqctl.cli.progress import LazyProgress
from nsqctl.cli.pub import WINDOW, PubPlan, PubResult, publish_stream
from nsqctl.cli.pub_input import Batch
from nsqctl.connection import ConnectionConfig
from nsqctl.failover import FailoverEvent
from nsqctl.producer import Producer
from nsqctl.servers import process
from tests.conftest import StartCluster
from tests.helpers.failover import leader_of, lookup_partitions
from tests.helpers.redesign import TopicSpec, create_topics, eventually, message_counts, unique

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(180)]

BATCH = 200
KEYS = 16
#: Lines pub may hold read but not OK'd with a bounded window: WINDOW batches plus the
#: chunk that overfills it, the reader's queue (2), the batch the reader thread holds
#: while it waits to hand it over, and one to spare.
BOUND = (WINDOW + 1 + 2 + 1 + 1) * BATCH
#: How far past the bound an unbounded pub reads before the leader is resumed anyway.
BEYOND = 10 * BOUND
BEFORE_STALL = 5  # batches published with both leaders up


def _line(i: int) -> bytes:
    return b'{"k":"k%02d","seq":%d}' % (i % KEYS, i // KEYS)


def test_keyed_pub_stops_reading_while_a_partition_leader_stalls(
    start_cluster: StartCluster, tmp_path: Path
) -> None:
    c = start_cluster("redesign", nsqd=3)
    topic = unique("stall")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2, replicas=1)}))
    leaders = lookup_partitions(c.lookupd_http[0], topic)
    assert len(set(leaders.values())) == 2, leaders  # one stalled node leaves a route up
    stalled = leader_of(c, topic, 0)
    result = PubResult()
    unconfirmed: list[int] = []  # lines read but not OK'd, at each read after the stall
    total = (BEFORE_STALL * BATCH) + BOUND + BEYOND

    def stored() -> int:
        return sum(message_counts(c, topic).values())

    def source() -> Iterator[Batch]:
        for n in itertools.count():
            start = n * BATCH
            if n == BEFORE_STALL:
                # Stored first: only publishes begun after the topic took one ride out a
                # lost leader (the earlier ones would give up as on a typo).
                eventually(
                    lambda: stored() == BEFORE_STALL * BATCH, 30, "lines before the stall stored"
                )
                process.pause(stalled)
            if n >= BEFORE_STALL:
                unconfirmed.append(start - result.published)
            if start >= total:
                process.resume(stalled)  # read far past the bound: no bound
                return
            lines = [_line(i) for i in range(start, start + BATCH)]
            yield Batch(lines, start + 1, None, 0, False)

    def on_failover(event: FailoverEvent) -> None:
        if event.kind == "waiting":  # the stalled publish timed out: the window is full
            process.resume(stalled)

    producer = Producer(
        lookupd_http=c.lookupd_http,
        config=ConnectionConfig(request_timeout=2.0, connect_timeout=1.0),
        on_failover=on_failover,
    )
    plan = PubPlan(topic, BATCH, shard_field="k")
    try:
        asyncio.run(
            publish_stream(producer, plan, source(), LazyProgress("", None, enabled=False), result)
        )
    finally:
        process.resume(stalled)
    assert result.error is None, result.error
    assert result.published == total
    assert max(unconfirmed) <= BOUND, (max(unconfirmed), BOUND)
    # A batch the stalled nsqd took before its reply timed out is stored again by the retry.
    assert total <= stored() <= total + BOUND, (stored(), total)
