"""Connection behaviour against a scripted FAKE nsqd, for what a real server won't do.

What each frame means (replies in order, error routing and fatality, heartbeats, corrupt
or split frames, every handshake path) is unit-tested on the sans-IO machines without
a socket (tests/unit/test_protocol_session.py, test_protocol_handshake.py). This file
keeps only what the transport does with them that a real nsqd (see
test_connection_features.py) cannot be made to provoke: it never hangs up or stalls in
the handshake, never sends a corrupt frame or dies in the middle of one, cannot be told
to answer SUB with ``E_FAILED_ON_NOT_LEADER`` (that needs the redesign's partition
leadership) or to send an unsolicited fatal error, never goes silent, never sends a
frame in the same write as its IDENTIFY reply on demand, and never ignores CLS. The fake
here is an asyncio server on 127.0.0.1 that reads the magic and IDENTIFY,
answers a valid IDENTIFY reply (as nsqd v1.3.0 would, without TLS/compression/AUTH),
then hands the socket to the test, which writes exactly the frames it wants and reads
exactly what the client sent back. Frames are built with the protocol layer's own
``encode_frame`` / ``encode_message`` (server-side encoders).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import socket
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from nsqctl import protocol as p
from nsqctl.connection import Connection, ConnectionConfig, TLSSettings
from nsqctl.errors import (
    ConnectError,
    ConnectionClosedError,
    ConnectTimeoutError,
    NsqctlTimeoutError,
    ReplyTimeoutError,
    TLSError,
)
from nsqctl.protocol.frames import FrameType, encode_frame
from nsqctl.protocol.raw_message import RawMessage, encode_message
from tests.helpers.identify import identify_reply

IDENTIFY_REPLY: dict[str, Any] = identify_reply()
_BODY_COMMANDS = (b"IDENTIFY", b"AUTH", b"PUB", b"MPUB", b"DPUB")
STEP = 5.0  # generous bound for anything that should happen "at once"


@dataclass
class FakeClient:
    """The server side of one accepted connection, after the handshake."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    identify: dict[str, Any]

    async def command(self) -> tuple[bytes, bytes | None]:
        """One command the client sent: its line (without ``\\n``) and body if any."""
        line = await asyncio.wait_for(self.reader.readline(), STEP)
        if not line.endswith(b"\n"):
            raise EOFError(f"client closed mid-command: {line!r}")
        line = line[:-1]
        if line.split(b" ", 1)[0] in _BODY_COMMANDS:
            (size,) = struct.unpack(">I", await self.reader.readexactly(4))
            return line, await self.reader.readexactly(size)
        return line, None

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def frame(self, frame_type: int, data: bytes) -> None:
        await self.send(encode_frame(frame_type, data))

    async def eof(self) -> bytes:
        """Everything the client still sends until it closes the socket."""
        return await asyncio.wait_for(self.reader.read(), STEP)


Handshake = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[dict[str, Any]]]


@dataclass
class FakeNsqd:
    """An asyncio TCP server on 127.0.0.1 speaking just enough of nsqd's protocol."""

    identify_reply: dict[str, Any] = field(default_factory=lambda: dict(IDENTIFY_REPLY))
    #: Replaces the default handshake (magic + IDENTIFY answered with ``identify_reply``).
    handshake: Handshake | None = None
    server: asyncio.Server | None = None
    clients: asyncio.Queue[FakeClient] = field(default_factory=asyncio.Queue)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    @property
    def address(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def start(self) -> FakeNsqd:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def _default_handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> dict[str, Any]:
        assert await reader.readexactly(4) == p.MAGIC_V2
        assert await reader.readline() == b"IDENTIFY\n"
        (size,) = struct.unpack(">I", await reader.readexactly(4))
        body: dict[str, Any] = json.loads(await reader.readexactly(size))
        writer.write(encode_frame(FrameType.RESPONSE, json.dumps(self.identify_reply).encode()))
        await writer.drain()
        return body

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            body = await (self.handshake or self._default_handshake)(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        await self.clients.put(FakeClient(reader, writer, body))

    async def accept(self) -> FakeClient:
        return await asyncio.wait_for(self.clients.get(), STEP)

    async def stop(self) -> None:
        for writer in self.writers:
            writer.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


@pytest.fixture
async def fake() -> AsyncIterator[FakeNsqd]:
    server = await FakeNsqd().start()
    try:
        yield server
    finally:
        await server.stop()


@dataclass
class Events:
    """What the connection reported through its callbacks."""

    messages: list[RawMessage] = field(default_factory=list)
    errors: list[p.ServerError] = field(default_factory=list)
    closes: list[BaseException | None] = field(default_factory=list)

    def kwargs(self) -> dict[str, Any]:
        return {
            "on_message": lambda _c, m: self.messages.append(m),
            "on_error": lambda _c, e: self.errors.append(e),
            "on_close": lambda _c, cause: self.closes.append(cause),
        }


def _config(**kwargs: Any) -> ConnectionConfig:
    kwargs.setdefault("client_id", "fake-test")
    kwargs.setdefault("connect_timeout", 2.0)
    kwargs.setdefault("request_timeout", 10.0)
    return ConnectionConfig(**kwargs)


async def _open(
    fake: FakeNsqd, events: Events | None = None, **cfg: Any
) -> tuple[Connection, FakeClient]:
    conn = await Connection.open(fake.address, _config(**cfg), **(events or Events()).kwargs())
    return conn, await fake.accept()


async def _closed_with(conn: Connection, events: Events, *needles: str) -> None:
    """The connection is closed, once, for a reason containing every needle."""
    for _ in range(100):
        if conn.closed is not None:
            break
        await asyncio.sleep(0.01)
    assert conn.closed is not None and not conn.is_open
    for needle in needles:
        assert needle in conn.closed.reason, conn.closed.reason
    assert len(events.closes) == 1 and events.closes[0] is conn.closed
    with pytest.raises(ConnectionClosedError):
        conn.request_nowait(p.pub("t", b"x"), "pub")
    with pytest.raises(ConnectionClosedError):
        conn.rdy(1)


def _msg(n: int, body: bytes) -> RawMessage:
    return RawMessage(
        timestamp=1_700_000_000_000_000_000 + n, attempts=1, id=b"%016x" % n, body=body
    )


# --------------------------------------------------------------------------- handshake


async def test_handshake_server_closes_after_identify() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> dict[str, Any]:
        await reader.readexactly(4)
        await reader.readline()
        writer.close()
        raise ConnectionError("fake hung up")

    fake = await FakeNsqd(handshake=hang_up).start()
    try:
        with pytest.raises(ConnectError, match="closed the connection during the handshake"):
            await Connection.open(fake.address, _config())
    finally:
        await fake.stop()


async def test_a_server_hanging_up_during_the_tls_upgrade_is_a_tls_error() -> None:
    """nsqd offers TLS in its IDENTIFY reply, then drops the connection instead of
    answering our TLS hello (a real nsqd completes or refuses the TLS handshake with an
    alert; a hang-up at that moment needs a scripted server): the failure is a TLSError,
    with the socket's own error chained."""

    async def offer_then_hang_up(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> dict[str, Any]:
        assert await reader.readexactly(4) == p.MAGIC_V2
        assert await reader.readline() == b"IDENTIFY\n"
        (size,) = struct.unpack(">I", await reader.readexactly(4))
        await reader.readexactly(size)
        reply = {**IDENTIFY_REPLY, "tls_v1": True}
        writer.write(encode_frame(FrameType.RESPONSE, json.dumps(reply).encode()))
        await writer.drain()
        await reader.read(1)  # the first byte of our TLS hello
        writer.close()
        raise ConnectionError("fake hung up")

    fake = await FakeNsqd(handshake=offer_then_hang_up).start()
    try:
        with pytest.raises(TLSError, match="during the TLS upgrade") as info:
            await Connection.open(fake.address, _config(tls=TLSSettings(insecure=True)))
        assert isinstance(info.value, ConnectError) and info.value.setting == "tls"
        assert info.value.__cause__ is not None
    finally:
        await fake.stop()


async def test_a_listener_that_never_accepts_is_a_connect_timeout() -> None:
    """A socket whose accept queue is full (listen(0), one connection already queued, as
    a hung server's fills): the kernel drops our SYN, the TCP connect itself times out,
    and that is a ConnectTimeoutError: a ConnectError and an NsqctlTimeoutError."""
    with socket.socket() as listener, socket.socket() as queued:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        queued.connect(listener.getsockname())  # fills the accept queue
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(ConnectTimeoutError, match=r"no answer within 0\.3s") as info:
            await Connection.open(address, _config(connect_timeout=0.3))
        assert time.monotonic() - started < STEP
    assert isinstance(info.value, ConnectError) and isinstance(info.value, NsqctlTimeoutError)
    assert info.value.setting == "connect_timeout"


async def test_handshake_server_never_answers() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> dict[str, Any]:
        await reader.read()  # until the client gives up
        raise ConnectionError("client gave up")

    fake = await FakeNsqd(handshake=silent).start()
    try:
        started = time.monotonic()
        with pytest.raises(ConnectError, match="did not finish the handshake") as info:
            await Connection.open(fake.address, _config(connect_timeout=0.2))
        assert time.monotonic() - started < STEP
        assert isinstance(info.value, NsqctlTimeoutError)
        assert info.value.setting == "connect_timeout"
    finally:
        await fake.stop()


# --------------------------------------------------------------------------- corrupt streams


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        (struct.pack(">II", 2, 0), "invalid frame size 2"),  # (a) size below 4
        (struct.pack(">II", 10, 7) + b"xxxxxx", "unknown frame type 7"),  # (b)
    ],
    ids=["size-2", "unknown-type"],
)
async def test_corrupt_frame_closes_and_fails_pending(
    fake: FakeNsqd, header: bytes, needle: str
) -> None:
    events = Events()
    conn, client = await _open(fake, events)
    pending = [conn.request_nowait(p.pub("t", b"%d" % i), "pub") for i in range(3)]
    for i in range(3):
        assert await client.command() == (b"PUB t", b"%d" % i)
    await client.send(header)
    results = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), STEP)
    for result in results:
        assert isinstance(result, ConnectionClosedError)
        assert "protocol error" in result.reason and needle in result.reason
    await _closed_with(conn, events, "protocol error", needle)
    assert events.messages == [] and events.errors == []
    assert await client.eof() == b""  # the client closed its socket
    await conn.close()


async def test_frame_cut_off_by_server_close(fake: FakeNsqd) -> None:
    """(c') The server dies in the middle of a frame: nothing half-decoded leaks out."""
    events = Events()
    conn, client = await _open(fake, events)
    pending = conn.request_nowait(p.pub("t", b"x"), "pub")
    await client.command()
    whole = encode_frame(FrameType.MESSAGE, encode_message(_msg(1, b"body" * 10)))
    await client.send(whole[:30])
    client.writer.close()
    with pytest.raises(ConnectionClosedError, match="server closed the socket"):
        await asyncio.wait_for(pending, STEP)
    await _closed_with(conn, events, "server closed the socket")
    assert events.messages == []
    await conn.close()


# --------------------------------------------------------------------------- error frames


async def test_not_leader_on_sub_is_fatal(fake: FakeNsqd) -> None:
    events = Events()
    conn, client = await _open(fake, events)
    sub = asyncio.create_task(conn.subscribe("orders", "c"))
    await client.command()
    await client.frame(FrameType.ERROR, b"E_FAILED_ON_NOT_LEADER")
    with pytest.raises(p.NotLeaderError) as info:
        await asyncio.wait_for(sub, STEP)
    assert info.value.fatal and info.value.topic == "orders"
    assert info.value.context == "sub" and "'orders'" in str(info.value)
    await _closed_with(conn, events, "E_FAILED_ON_NOT_LEADER")
    assert conn.subscribed is None
    await conn.close()


async def test_unsolicited_fatal_error_goes_to_on_error_and_closes(fake: FakeNsqd) -> None:
    events = Events()
    conn, client = await _open(fake, events)
    await client.frame(FrameType.ERROR, b"E_INVALID invalid command FOO")
    await _closed_with(conn, events, "E_INVALID")
    assert len(events.errors) == 1 and isinstance(events.errors[0], p.InvalidError)
    await conn.close()


# --------------------------------------------------------------------------- heartbeats


async def test_a_silent_server_is_dropped_after_the_idle_deadline(fake: FakeNsqd) -> None:
    """A real nsqd always heartbeats; this one goes silent after a while. Reads keep the
    connection open past the first idle deadline (its one timer re-arms from the last
    read, not from the connect), and silence closes it."""
    events = Events()
    conn, client = await _open(fake, events, heartbeat_interval_ms=1000)  # idle: 10 s
    for _ in range(4):  # 4 x 3.5 s: traffic beyond the first 10 s deadline
        await client.frame(FrameType.RESPONSE, p.HEARTBEAT)
        assert await asyncio.wait_for(client.reader.readexactly(4), STEP) == b"NOP\n"
        await asyncio.sleep(3.5)
    assert conn.is_open, conn.closed
    for _ in range(200):  # then silence: closed ~10 s after the last read (bounded at 20 s)
        if conn.closed is not None:
            break
        await asyncio.sleep(0.1)
    await _closed_with(conn, events, "no data or heartbeat for 10s")
    assert isinstance(conn.closed, ReplyTimeoutError)  # a deadline passed: a timeout
    with pytest.raises(NsqctlTimeoutError):  # and so is what its later users get
        await conn.request(p.pub("t", b"x"), "pub")
    await conn.close()


async def test_a_frame_sent_with_the_handshake_reply_is_not_lost() -> None:
    """Bytes that arrive in the same read as the last handshake reply are read by the
    handshake's buffered reader; they must reach the connection after it switches to
    handling reads directly (here: a heartbeat, answered with NOP)."""

    async def eager(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> dict[str, Any]:
        assert await reader.readexactly(4) == p.MAGIC_V2
        assert await reader.readline() == b"IDENTIFY\n"
        (size,) = struct.unpack(">I", await reader.readexactly(4))
        body: dict[str, Any] = json.loads(await reader.readexactly(size))
        reply = encode_frame(FrameType.RESPONSE, json.dumps(IDENTIFY_REPLY).encode())
        writer.write(reply + encode_frame(FrameType.RESPONSE, p.HEARTBEAT))
        await writer.drain()
        return body

    server = await FakeNsqd(handshake=eager).start()
    try:
        events = Events()
        conn, client = await _open(server, events)
        assert await asyncio.wait_for(client.reader.readexactly(4), STEP) == b"NOP\n"
        assert conn.is_open and events.errors == []
        await conn.close()
    finally:
        await server.stop()


async def test_failing_message_handler_is_named_in_the_close_reason(fake: FakeNsqd) -> None:
    closes: list[BaseException | None] = []

    def handler(_conn: Connection, _msg: RawMessage) -> None:
        raise RuntimeError("handler bug 1234")

    conn = await Connection.open(
        fake.address, _config(), on_message=handler, on_close=lambda _c, e: closes.append(e)
    )
    client = await fake.accept()
    sub = asyncio.create_task(conn.subscribe("t", "c"))
    await client.command()
    await client.frame(FrameType.RESPONSE, p.OK)
    await asyncio.wait_for(sub, STEP)
    await client.frame(FrameType.MESSAGE, encode_message(_msg(1, b"x")))
    assert await client.eof() == b""  # the connection is dropped either way
    await conn.close()
    assert conn.closed is not None and len(closes) == 1
    assert "handler bug 1234" in conn.closed.reason


# --------------------------------------------------------------------------- timeouts, close


async def _unretrieved(caplog: pytest.LogCaptureFixture, address: str) -> list[str]:
    """asyncio's "exception was never retrieved" reports about futures of ``address``."""
    gc.collect()
    await asyncio.sleep(0)
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "asyncio" and "never retrieved" in r.getMessage() and address in r.getMessage()
    ]


async def test_request_timeout_closes_connection(fake: FakeNsqd) -> None:
    events = Events()
    conn, _client = await _open(fake, events, request_timeout=0.3)
    pending = conn.request_nowait(p.pub("t", b"queued"), "pub")
    started = time.monotonic()
    with pytest.raises(ConnectionClosedError, match=r"no reply to pub in 0\.3s") as info:
        await conn.request(p.pub("t", b"x"), "pub")
    assert 0.25 <= time.monotonic() - started < STEP
    # closed by us because a deadline passed: a timeout, caught as one
    assert isinstance(info.value, NsqctlTimeoutError) and isinstance(info.value, ReplyTimeoutError)
    with pytest.raises(ReplyTimeoutError):
        await pending
    await _closed_with(conn, events, "no reply to pub")
    await conn.close()


async def test_request_timeout_leaves_no_unretrieved_future(
    fake: FakeNsqd, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")

    async def scenario() -> None:  # its locals (and the futures they reach) die with it
        conn, _client = await _open(fake, request_timeout=0.2)
        try:
            await conn.request(p.pub("t", b"x"), "pub")
        except ConnectionClosedError:
            pass
        else:  # pragma: no cover
            raise AssertionError("the request should have timed out")
        await conn.close()

    await scenario()
    assert await _unretrieved(caplog, fake.address) == []


async def test_close_does_not_hang_when_cls_is_ignored(fake: FakeNsqd) -> None:
    events = Events()
    conn, client = await _open(fake, events)
    sub = asyncio.create_task(conn.subscribe("t", "c"))
    await client.command()
    await client.frame(FrameType.RESPONSE, p.OK)
    await asyncio.wait_for(sub, STEP)
    started = time.monotonic()
    await conn.close(timeout=0.3)
    assert time.monotonic() - started < STEP
    assert await client.command() == (b"CLS", None)
    assert conn.closed is not None and conn.closed.reason == "closed by the client"
    assert events.closes == [None]  # a client-side close is not reported as a failure


async def test_close_with_ignored_cls_leaves_no_unretrieved_future(
    fake: FakeNsqd, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="asyncio")

    async def scenario() -> None:  # its locals (and the futures they reach) die with it
        conn, client = await _open(fake)
        sub = asyncio.create_task(conn.subscribe("t", "c"))
        await client.command()
        await client.frame(FrameType.RESPONSE, p.OK)
        await asyncio.wait_for(sub, STEP)
        await conn.close(timeout=0.2)

    await scenario()
    assert await _unretrieved(caplog, fake.address) == []


async def test_close_waits_for_close_wait(fake: FakeNsqd) -> None:
    events = Events()
    conn, client = await _open(fake, events)
    sub = asyncio.create_task(conn.subscribe("t", "c"))
    await client.command()
    await client.frame(FrameType.RESPONSE, p.OK)
    await asyncio.wait_for(sub, STEP)
    closing = asyncio.create_task(conn.close(timeout=STEP))
    assert await client.command() == (b"CLS", None)
    await asyncio.sleep(0.05)
    assert not closing.done()  # still waiting for CLOSE_WAIT
    await client.frame(FrameType.RESPONSE, p.CLOSE_WAIT)
    await asyncio.wait_for(closing, STEP)
    assert conn.closed is not None and events.closes == [None]
