"""What :meth:`Consumer.close` says when the stop timeout runs out on a message it cannot
give back: a plain handler that disabled the auto-response and kept the message (to
answer later) holds it where the consumer cannot reach it. The warning said every
unanswered message "were given back"; an operator reading it then looked everywhere but
the handler for the message nsqd kept in flight until its msg-timeout."""

from __future__ import annotations

import pytest

from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers import cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.names import unique
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.original


async def test_close_says_what_a_handler_kept_was_not_given_back(
    original_cluster: cluster.Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    topic, channel = unique("kept"), "k"
    nsqd, http = original_cluster.nsqd_tcp[0], original_cluster.nsqd_http[0]
    async with Producer(nsqd_tcp=[nsqd]) as producer:
        await producer.publish(topic, b"kept")
    kept: list[Message] = []

    def keep(msg: Message) -> None:  # answered later, by code that never runs
        msg.disable_auto_response()
        kept.append(msg)

    options = ConsumerOptions(stop_timeout=0.1)
    consumer = Consumer(topic, channel, keep, nsqd_tcp=[nsqd], options=options)
    await consumer.start()
    await wait_for(lambda: kept, 10, "the handler to keep the message")
    with caplog.at_level("WARNING", logger="nsqctl.consumer"):
        await consumer.close()
    [warning] = [r.getMessage() for r in caplog.records if "still unanswered" in r.getMessage()]
    assert "1 message(s) still unanswered after 0.1s: 0 given back" in warning, warning
    assert "1 kept by the handler (auto-response disabled)" in warning, warning
    assert "message timeout" in warning, warning
    assert kept[0].outcome is None and consumer.stats.requeued == 0
    channel_stats = read_nsqd_stats(http, topic=topic).channel(topic, channel)
    assert channel_stats is not None and channel_stats.in_flight_count == 1  # as it says
