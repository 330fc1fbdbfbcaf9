"""What :meth:`Consumer.close` does with a message a plain handler kept (it disabled the
auto-response, to answer it later) and never answered: once the stop timeout runs out it
is given back, once, like an overrunning handler's message, so nsqd has it back in the
channel at once instead of holding it in flight until its msg-timeout (nsqd v1 does not
requeue what a closed connection left in flight), and a late answer raises."""

from __future__ import annotations

import pytest

from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.errors import AlreadyRespondedError
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers import cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.names import unique
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.original


async def test_close_gives_back_what_a_handler_kept_and_never_answered(
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
    assert "1 message(s) still unanswered after 0.1s: 1 given back" in warning, warning
    assert "1 of them kept by a handler (auto-response disabled)" in warning, warning
    assert "message timeout" not in warning, warning
    assert kept[0].outcome == "REQ" and consumer.stats.requeued == 1
    assert consumer.in_flight == 0
    with pytest.raises(AlreadyRespondedError):
        kept[0].finish()  # too late: it went back to nsqd, and no FIN follows
    # Right after close, not after the msg-timeout (60 s): back in the channel, once.
    channel_stats = read_nsqd_stats(http, topic=topic).channel(topic, channel)
    assert channel_stats is not None, "the channel is gone"
    assert channel_stats.in_flight_count == 0, channel_stats
    assert channel_stats.requeue_count == 1 and channel_stats.depth == 1, channel_stats
    assert channel_stats.timeout_count == 0, channel_stats
