"""A keyed publish across an nsqlookupd restart on the original family (found by the soak).

A restarted original nsqlookupd knows no topic until its nsqds register again (on their
next ping, up to 15 s). ``pub --shard-field`` groups keys with ``Producer.route``, which
raised "topic does not exist on any lookupd" in that window and ended the whole pub; a
topic the producer already wrote to now waits for its nsqds like a publish waits for a
new leader.
"""

from __future__ import annotations

import asyncio

from nsqctl.producer import Producer
from nsqctl.servers import process
from tests.conftest import StartCluster
from tests.helpers.redesign import unique


def test_keyed_route_waits_out_a_restarted_lookupd(start_cluster: StartCluster) -> None:
    c = start_cluster("original", nsqd=1)
    topic = unique("lookupd-restart")

    async def scenario() -> None:
        async with Producer(lookupd_http=c.lookupd_http) as producer:
            await producer.publish_many(topic, [b"before"], shard_key="k")
            lookupd = c.lookupds[0]
            process.kill_hard(lookupd)
            c.restart(lookupd)
            topo = await producer.topology(topic, refresh=True)
            assert topo.topic_not_found, topo  # the window this test is about
            assert await producer.route(topic, "k") == ("", None)
            await producer.publish_many(topic, [b"after"], shard_key="k")

    asyncio.run(scenario())
