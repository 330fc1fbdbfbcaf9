"""A lent connection's unread bytes reach its owner when the connection closes before
they were handled.

An ordered partition's socket is lent to a reader thread (:meth:`Connection.lend`) and
given back with what the reader read and left unhandled (:meth:`Connection.take_back`),
which the loop handles one turn later. A close in between (the owner stopping: CLS and
CLOSE_WAIT; or the connection shut at once: a write that failed, a client-side
deadline) must still hand the messages in those bytes to the owner while it can answer
them on this socket: nsqd v1 keeps a closed connection's in-flight messages until its
msg-timeout (60 s by default) before anyone else may have them.

A real nsqd sends the message; the test plays the reader thread (it reads the lent
socket itself), so the close can come exactly between the hand-back and the loop's turn.
"""

from __future__ import annotations

import asyncio
import select
import socket
import struct
import time

import pytest

from nsqctl import protocol as p
from nsqctl.connection import Connection
from nsqctl.errors import ConnectionClosedError
from nsqctl.protocol.raw_message import RawMessage
from nsqctl.servers import cluster
from tests.helpers.names import unique
from tests.helpers.settled import settled_channel

pytestmark = pytest.mark.original

CHANNEL = "c"


def _read_frame(sock: socket.socket, timeout: float) -> bytes:
    """One whole frame (size prefix included) from the lent, non-blocking socket, as the
    reader thread would have read it; fails after ``timeout`` seconds."""
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    deadline = time.monotonic() + timeout
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">l", data[:4])[0]:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(int(left * 1000) + 1):
            raise AssertionError(f"no whole frame from nsqd within {timeout}s: {data!r}")
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"nsqd closed the socket: {data!r}")
        data += chunk
    return data


async def _lent_with_a_message_read(
    nsqd: str, topic: str, handled: list[bytes]
) -> tuple[Connection, bytes]:
    """A subscribed connection, lent, and the bytes of the one message nsqd sent, read
    off the lent socket and not handled. Its owner gives back what it is handed (a
    closing consumer does), on this connection while it is open."""

    def give_back(conn: Connection, batch: list[RawMessage]) -> None:
        conn.rdy(0)
        for raw in batch:
            handled.append(raw.id)
            conn.req(raw.id, 0)

    pub = await Connection.open(nsqd)
    try:
        await pub.request(p.pub(topic, b"lent"), "pub")
    finally:
        await pub.close()
    conn = await Connection.open(nsqd, on_messages=give_back)
    await conn.subscribe(topic, CHANNEL)
    lent = conn.lend(lambda: conn.take_back(b"", time.monotonic(), False))
    assert lent is not None
    try:
        lent.sendall(p.rdy(1))  # on the lent socket, as the reader answers: the loop reads nothing
        frame = await asyncio.to_thread(_read_frame, lent, 10)
    finally:
        lent.close()
    return conn, frame


async def _given_back_once(http: str, topic: str) -> None:
    ch = await settled_channel(http, topic, CHANNEL, 5)
    assert (ch.depth, ch.requeue_count) == (1, 1), ch


async def test_bytes_given_back_just_before_a_clean_close_reach_the_owner(
    original_cluster: cluster.Cluster,
) -> None:
    """take_back, then close() in the same turn: the message in the bytes is handed to
    the owner, which gives it back before CLS and CLOSE_WAIT close the socket (close
    waits for CLOSE_WAIT, so the hand-back's turn comes first: this held before the
    shut path below was fixed, and guards it)."""
    topic, handled = unique("lentcls"), list[bytes]()
    nsqd, http = original_cluster.nsqd_tcp[0], original_cluster.nsqd_http[0]
    conn, frame = await _lent_with_a_message_read(nsqd, topic, handled)
    conn.take_back(frame, time.monotonic(), False)
    await conn.close()
    assert len(handled) == 1
    await _given_back_once(http, topic)


async def test_bytes_given_back_just_before_the_connection_is_shut_reach_the_owner(
    original_cluster: cluster.Cluster,
) -> None:
    """take_back, then the connection shut in the same turn: the message is handed to
    the owner first, and its REQ leaves before the socket closes.

    ``_shutdown`` is called directly: it is where every close ends (a failed write, a
    missed deadline, a fatal frame, the end of :meth:`Connection.close`) and it reclaims
    a lent socket itself, but no public call reaches it in the very turn of a hand-back
    (close() sends CLS and waits first, which lets the hand-back run)."""
    topic, handled = unique("lentshut"), list[bytes]()
    nsqd, http = original_cluster.nsqd_tcp[0], original_cluster.nsqd_http[0]
    conn, frame = await _lent_with_a_message_read(nsqd, topic, handled)
    conn.take_back(frame, time.monotonic(), False)
    conn._shutdown(ConnectionClosedError(str(conn.address), "shut for the test"))
    await conn.close()
    assert len(handled) == 1
    await _given_back_once(http, topic)
