"""A connection's close() closes its socket even when the peer reads nothing.

Bytes still buffered for a peer that stopped reading (a hung nsqd) can never be sent, so
a graceful close, which sends them first, would never end: the socket stayed open after
close() returned or was cancelled. A real nsqd cannot be made to stop reading on demand
(a stopped process still has the kernel read for it), hence the scripted FAKE nsqd of
test_connection_fake_server.py: after the handshake the test never reads from it.
"""

from __future__ import annotations

import asyncio

import pytest

from nsqctl import protocol as p
from nsqctl.connection import Connection
from tests.helpers.wait import wait_for
from tests.integration.test_connection_fake_server import STEP, FakeNsqd

CHUNK = 1024 * 1024
# Buffered in the client beyond what the kernel took: far above the high-water mark
# (64 KiB) at which a drain waits.
BUFFERED = 4 * CHUNK


@pytest.mark.parametrize("how", ["timeout", "cancel"])
async def test_close_with_bytes_the_peer_never_reads_closes_the_socket(how: str) -> None:
    """Cut off by its timeout or cancelled while it drains, close() leaves no socket
    open: the bytes the peer never took are dropped."""
    fake = await FakeNsqd().start()
    try:
        conn = await Connection.open(fake.address)
        await fake.accept()  # the peer reads nothing from now on
        # private: the client's own buffer is what this test is about, and no public call
        # says how much of what was written is still waiting in it
        transport = conn._transport
        assert transport is not None
        sock = transport.get_extra_info("socket")
        body = b"x" * CHUNK
        for _ in range(1024):  # a bound: the kernel's buffers are finite
            if transport.get_write_buffer_size() >= BUFFERED:
                break
            conn.send(p.pub("unread", body))
            await asyncio.sleep(0)  # the send is flushed in the next turn
        assert transport.get_write_buffer_size() >= BUFFERED, "the peer's buffers never filled"
        if how == "timeout":
            async with asyncio.timeout(STEP):  # a hang guard: the close's own bound is 0.2 s
                await conn.close(timeout=0.2)
        else:
            closing = asyncio.create_task(conn.close(timeout=60))
            await asyncio.sleep(0)  # the close runs to its drain, which waits
            assert not closing.done()
            closing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing
        assert conn.closed is not None
        await wait_for(lambda: sock.fileno() == -1, STEP, "the client's socket to be closed")
    finally:
        await fake.stop()
