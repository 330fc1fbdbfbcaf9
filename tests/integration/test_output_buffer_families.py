"""The redesign keeps its own output buffering for a consumer asking for ``auto`` on a
durable channel, read back from nsqd's client stats (real servers).

The redesign confirms a channel's position at FIN, so a kill -9 loses nothing its buffer
held and unbuffered output would only cost it CPU (bench/README.md); the Consumer learns
the family from the lookupd. (The original nsqd's stats do not show a client's buffer:
test_kill9_durable_tail.py shows its tail unbuffered by what it keeps through a kill.)
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from nsqctl import Producer
from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.protocol.output_buffer import output_buffer_fields
from nsqctl.servers.cluster import Cluster
from tests.helpers.redesign import TopicSpec, create_topics, unique
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.redesign

CHANNEL = "durable"
SETTINGS = ("auto", "none")


def client_buffers(http: list[str], topic: str) -> dict[str, int]:
    """``output_buffer_size`` of each client of the topic's channel by client_id, as the
    nsqds report them."""
    sizes: dict[str, int] = {}
    for address in http:
        stats: dict[str, Any] = httpx.get(
            f"http://{address}/stats", params={"format": "json", "topic": topic}, timeout=5
        ).json()
        stats = stats.get("data", stats)  # some versions wrap the answer in "data"
        for t in stats.get("topics") or []:
            for ch in t.get("channels") or []:
                if t.get("topic_name") == topic and ch.get("channel_name") == CHANNEL:
                    sizes |= {c["client_id"]: c["output_buffer_size"] for c in ch["clients"]}
    return sizes


async def test_auto_leaves_the_redesign_buffered(redesign_cluster: Cluster) -> None:
    c, topic = redesign_cluster, unique("obuf")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1)}, (CHANNEL,))
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        await producer.publish_many(topic, [b"x", b"y"])
    got: list[Message] = []
    consumers = [
        Consumer(
            topic,
            CHANNEL,
            got.append,
            lookupd_http=c.lookupd_http,
            config=ConnectionConfig(
                client_id=setting,
                **output_buffer_fields(setting, durable=True),  # type: ignore[arg-type]
            ),
            options=ConsumerOptions(max_in_flight=1),
        )
        for setting in SETTINGS
    ]
    for consumer in consumers:
        await consumer.start()
    try:
        await wait_for(lambda: len(got) == 2, 30, "a message each")  # each holds one
        sizes = await asyncio.to_thread(client_buffers, c.nsqd_http, topic)
    finally:
        for consumer in consumers:
            await consumer.stop()
    assert sizes.keys() == set(SETTINGS), sizes
    assert sizes["none"] == 1, sizes  # youzan's unbuffered writer: a 1-byte buffer
    assert sizes["auto"] > 1, sizes
