"""A consumer closed while it starts (a service stopped during its start-up) ends its
start at once: start() returns, nothing is left running or connecting, and the closed
consumer refuses to start again. Without this, start() went on after close(): it raised
a NoConnectionError blaming the address ("not an nsqd's TCP port?") once the connect
timeout ran out, or the CancelledError of its cancelled connect, and left the lookup
polling task running for good.

The session's original cluster; the close comes while start() is looking the topic up
(with a lookupd) or opening its first connection (with nsqd addresses).
"""

from __future__ import annotations

import asyncio

import pytest

import nsqctl
from nsqctl.servers import cluster
from tests.helpers.names import unique

pytestmark = pytest.mark.original


def _background_tasks() -> list[str]:
    """The consumer's tasks still alive (the flow loop, connects, lookups, polling)."""
    return sorted(
        task.get_name()
        for task in asyncio.all_tasks()
        if task is not asyncio.current_task() and task.get_name().startswith("nsq")
    )


@pytest.mark.parametrize("via", ["lookupd", "nsqd"])
async def test_close_during_start_ends_start_and_leaves_nothing_running(
    original_cluster: cluster.Cluster, via: str
) -> None:
    topic = unique("startclose")
    async with nsqctl.Producer(nsqd_tcp=original_cluster.nsqd_tcp) as producer:
        await producer.publish(topic, b"waiting")
    where: dict[str, object] = (
        {"lookupd_http": original_cluster.lookupd_http}
        if via == "lookupd"
        else {"nsqd_tcp": original_cluster.nsqd_tcp}
    )
    # A long connect timeout: a start() that only ends when it runs out is a hang here.
    options = nsqctl.ConsumerOptions(connect_timeout=60)
    consumer = nsqctl.Consumer(topic, "c", lambda msg: None, options=options, **where)  # type: ignore[arg-type]
    starting = asyncio.create_task(consumer.start())
    await asyncio.sleep(0)  # start() is under way: looking up, or connecting
    await consumer.close()
    async with asyncio.timeout(15):
        await starting  # returns: the consumer was closed, which is no error
    assert _background_tasks() == []  # no lookup polling left to connect later
    assert consumer.stats.connections == 0
    with pytest.raises(nsqctl.UsageError, match="closed"):
        await consumer.start()
