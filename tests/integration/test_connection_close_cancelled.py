"""A connection's close() cancelled in the very turn nsqd's CLOSE_WAIT arrives.

On Python 3.11 ``asyncio.wait_for`` returns the inner result when a cancel lands after
the awaited future completed but before the waiting task resumed (CPython gh-86296): the
cancel is lost and the close runs on as if never cancelled, so whoever cancelled it
(a consumer stopping, a test's hang guard) waits on. On loopback CLOSE_WAIT follows CLS
at once, so that turn is a likely one, not a curiosity.

A real nsqd answers the CLS; the test cancels the close from a callback on the future
CLOSE_WAIT completes (read through the connection's private attribute: no public call
runs in that turn), which is exactly that turn.
"""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.connection import Connection
from nsqctl.servers import cluster
from tests.helpers.names import unique
from tests.helpers.settled import channel_on
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.original


async def test_a_close_cancelled_as_close_wait_arrives_raises_and_still_closes(
    original_cluster: cluster.Cluster,
) -> None:
    """The cancelled close raises CancelledError (the cancel is not lost), and the socket
    is closed all the same: nsqd loses the client."""
    topic = unique("clscancel")
    nsqd, http = original_cluster.nsqd_tcp[0], original_cluster.nsqd_http[0]
    conn = await Connection.open(nsqd)
    await conn.subscribe(topic, "c")
    closing = asyncio.create_task(conn.close())
    # one loop turn at a time: the close's first step (CLS written) and this check run in
    # the same turn, before the loop can read nsqd's answer
    await wait_for(lambda: conn._close_wait is not None, 10.0, "close() to send CLS", step=0)
    close_wait = conn._close_wait
    assert close_wait is not None and not close_wait.done()
    close_wait.add_done_callback(lambda _: closing.cancel())
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(30):  # a hang guard, far above CLOSE_WAIT's few ms
            await closing
    assert close_wait.done() and not close_wait.cancelled()  # cancelled in that very turn
    assert conn.closed is not None

    async def client_gone() -> bool:
        return (await channel_on(http, topic, "c")).client_count == 0

    await wait_for(client_gone, 10.0, "nsqd to see the cancelled close's socket closed")
