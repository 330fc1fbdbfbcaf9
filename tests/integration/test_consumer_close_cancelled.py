"""A consumer's close() that its caller stops awaiting: cancelled by the caller's deadline,
or awaited by one of the consumer's own handlers (which the close waits for).

The close must run to its end all the same: connections closed, ``run_forever()``
returned, the running handler's message FINed once it returned (never before, never
given back as well). Cut short, the consumer stayed half closed: connected to nsqd, its
``run_forever()`` waiting for good.

The session's original cluster; one message, one handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any

import pytest

import nsqctl
from nsqctl.servers import cluster
from tests.helpers.names import unique
from tests.helpers.settled import channel_on
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.original

CHANNEL = "c"


async def _one_message(nsqd: str) -> str:
    topic = unique("closecut")
    async with nsqctl.Producer(nsqd_tcp=nsqd) as producer:
        await producer.publish(topic, b"only")
    return topic


async def _finished_once_and_left(http: str, topic: str) -> None:
    """nsqd's view: the message was FINed (nothing left, nothing requeued) and the
    consumer's connection is gone."""

    async def settled() -> bool:
        ch = await channel_on(http, topic, CHANNEL)
        return (ch.depth, ch.in_flight_count, ch.client_count) == (0, 0, 0)

    await wait_for(settled, 10.0, "the message FINed and the consumer's connection closed")
    assert (await channel_on(http, topic, CHANNEL)).requeue_count == 0


async def test_a_close_cut_short_by_its_callers_deadline_still_closes(
    original_cluster: cluster.Cluster,
) -> None:
    """The close waits for a running handler; its caller gives up first. The handler
    then returns, its message is FINed, and the consumer ends."""
    nsqd, http = original_cluster.nsqd_tcp[0], original_cluster.nsqd_http[0]
    topic = await _one_message(nsqd)
    started, release = asyncio.Event(), asyncio.Event()

    async def handle(msg: nsqctl.Message) -> None:
        started.set()
        await release.wait()

    consumer = nsqctl.Consumer(topic, CHANNEL, handle, nsqd_tcp=nsqd)
    running = asyncio.create_task(consumer.run_forever())
    try:
        async with asyncio.timeout(20):
            await started.wait()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):  # the handler is held: the close cannot end
                await consumer.close()
        release.set()
        async with asyncio.timeout(20):  # a hang guard, far above the handler's return
            await running
    finally:
        release.set()
        running.cancel()
    assert consumer.stats.finished == 1 and consumer.stats.requeued == 0
    await _finished_once_and_left(http, topic)


def _awaited(how: str, close: Coroutine[Any, Any, None]) -> Awaitable[object]:
    """``close`` awaited as a handler may: directly, or through wait_for or gather,
    which run it in a task of its own (on Python 3.11, wait_for as well)."""
    if how == "wait_for":
        return asyncio.wait_for(close, 2)
    if how == "gather":
        return asyncio.gather(close)
    return close


@pytest.mark.parametrize("how", ["await", "wait_for", "gather"])
async def test_a_handler_that_closes_its_consumer_ends_it(
    original_cluster: cluster.Cluster, how: str
) -> None:
    """A handler awaiting its consumer's close(), which waits for that handler: close()
    returns to it at once, the handler returns, its message is FINed, and the consumer
    ends, without waiting out the stop timeout to cancel the handler. So too when the
    close runs in a task the handler started: it is the handler's all the same (a close
    that waited there timed the handler's wait_for out, and the handled message was
    given back as a failure, to be handled twice)."""
    nsqd, http = original_cluster.nsqd_tcp[0], original_cluster.nsqd_http[0]
    topic = await _one_message(nsqd)
    returned: list[bool] = []

    async def handle(msg: nsqctl.Message) -> None:
        await _awaited(how, consumer.close())
        returned.append(True)

    options = nsqctl.ConsumerOptions(stop_timeout=60)  # far beyond the hang guard below
    consumer = nsqctl.Consumer(topic, CHANNEL, handle, nsqd_tcp=nsqd, options=options)
    async with asyncio.timeout(20):
        await consumer.run_forever()
    assert returned == [True]
    assert consumer.stats.finished == 1 and consumer.stats.requeued == 0
    await _finished_once_and_left(http, topic)
