"""The library while every nsqlookupd of an original cluster is down and its nsqds run.

A running consumer goes on consuming from the nsqds it knows and warns once per outage,
not once per lookup poll. A producer goes on publishing to a topic it wrote through the
nsqds an earlier ``/nodes`` named: a new topic's first publishes are routed by
``/nodes`` (no lookupd lists the topic yet), and when every lookupd went down before a
lookup saw the nsqds register the topic, each publish waited out the whole failover
window asking ``/nodes`` and failed, though its nsqd was up. A topic the producer never
wrote cannot be placed: that publish fails at once, saying no nsqlookupd answered.

Its own one-nsqd cluster: the test kills the nsqlookupd.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

import nsqctl
from nsqctl.servers import process
from tests.conftest import StartCluster
from tests.helpers.names import unique
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.original

OUTAGE_WARNING = "no nsqlookupd answered for topic"


async def test_consumer_and_producer_ride_out_every_lookupd_down(
    start_cluster: StartCluster, caplog: pytest.LogCaptureFixture
) -> None:
    c = start_cluster("original", nsqd=1)
    lookupd = c.lookupds[0]
    topic = unique("lkdown")
    caplog.set_level(logging.DEBUG, logger="nsqctl.lookup")
    got: list[bytes] = []
    # failover window short: the old code waited it out, then failed
    options = nsqctl.ProducerOptions(lookup_interval=0.1, failover_window=3.0)
    producer = nsqctl.Producer(lookupd_http=c.lookupd_http, options=options)
    consumer = nsqctl.Consumer(
        topic,
        "c",
        lambda msg: got.append(msg.body),
        lookupd_http=c.lookupd_http,
        options=nsqctl.ConsumerOptions(lookup_interval=0.1),
    )
    try:
        await producer.publish(topic, b"before")  # a new topic: routed by /nodes
        await consumer.start()
        await wait_for(lambda: got == [b"before"], 20.0, "the first message consumed")
        process.kill_hard(lookupd)
        lookupd_address = c.lookupd_http[0]

        def failed_polls() -> int:
            return sum(
                1
                for r in caplog.records
                if r.levelno == logging.DEBUG
                and r.getMessage().startswith(f"nsqlookupd {lookupd_address}:")
            )

        await wait_for(lambda: failed_polls() >= 5, 20.0, "five failed lookup polls")
        warnings = [r for r in caplog.records if OUTAGE_WARNING in r.getMessage()]
        assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING, warnings

        async with asyncio.timeout(20):  # a hang guard, far above the failover window
            await producer.publish(topic, b"during")
        await wait_for(lambda: got == [b"before", b"during"], 20.0, "the message consumed")

        never = unique("lkdown-never")
        with pytest.raises(nsqctl.LookupUnavailableError) as caught:
            await producer.publish(never, b"x")
        assert "no nsqlookupd answered" in str(caught.value)
    finally:
        await consumer.close()
        await producer.close()
