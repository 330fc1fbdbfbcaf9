"""Duplicates are counted per source: on the original family two nsqds can issue the
same message id (ids are unique only per nsqd), and a message of one nsqd whose id another
nsqd's message had is no duplicate. Real nsqds, made to issue colliding ids."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter, defaultdict

from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.producer import Producer
from tests.conftest import StartCluster
from tests.helpers.wait import wait_for

ROUNDS = 20
BATCH = 100


async def test_same_id_from_two_nsqds_is_not_a_duplicate(start_cluster: StartCluster) -> None:
    c = start_cluster("original", nsqd=2)
    topic = f"dup_{uuid.uuid4().hex[:10]}"
    a, b = c.nsqd_tcp
    async with Producer(nsqd_tcp=[a]) as pa, Producer(nsqd_tcp=[b]) as pb:
        for r in range(ROUNDS):
            # both nsqds number the messages of one millisecond from 0: publishing at once
            # makes them issue the same ids
            await asyncio.gather(
                pa.publish_many(topic, [b"a-%d-%d" % (r, i) for i in range(BATCH)]),
                pb.publish_many(topic, [b"b-%d-%d" % (r, i) for i in range(BATCH)]),
            )
    total = 2 * ROUNDS * BATCH
    got: list[Message] = []
    consumer = Consumer(
        topic,
        "c",
        got.append,
        lookupd_http=c.lookupd_http,
        options=ConsumerOptions(max_in_flight=8),
    )
    async with consumer:
        await wait_for(lambda: len(got) >= total, 60.0, f"{total} messages")
        stats = consumer.stats
    ids: dict[str, set[bytes]] = defaultdict(set)
    for m in got:
        ids[m.nsqd_address].add(m.id)
    assert len(ids) == 2
    shared = set.intersection(*ids.values())
    assert shared, "the two nsqds issued no common id: the case is not exercised"
    assert max(Counter((m.nsqd_address, m.id) for m in got).values()) == 1  # none came twice
    assert len(got) == total
    assert stats.duplicates == 0, (stats.duplicates, len(shared))
