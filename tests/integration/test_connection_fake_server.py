"""Connection behaviour against a scripted FAKE nsqd, for what a real server won't do.

A real nsqd (see test_connection_features.py) never sends a corrupt frame header, an
unknown frame type or a truncated message; it cannot be told to answer one particular
PUB with ``E_FAILED_ON_NOT_LEADER`` (that needs the redesign's partition leadership,
which cannot be built here) or with a fatal ``E_INVALID``; it heartbeats only every
>= 1 s on its own schedule; and it never stalls, splits frames byte by byte, or ignores
CLS. The fake here is an asyncio server on 127.0.0.1 that reads the magic and IDENTIFY,
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
import struct
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from nsqctl import protocol as p
from nsqctl.connection import Connection, ConnectionConfig
from nsqctl.errors import ConnectError, ConnectionClosedError
from nsqctl.protocol.frames import FrameType, encode_frame
from nsqctl.protocol.message import RawMessage, encode_message

IDENTIFY_REPLY: dict[str, Any] = {
    "max_rdy_count": 2500,
    "version": "1.3.0",
    "max_msg_timeout": 900000,
    "msg_timeout": 60000,
    "tls_v1": False,
    "deflate": False,
    "deflate_level": 0,
    "max_deflate_level": 6,
    "snappy": False,
    "sample_rate": 0,
    "auth_required": False,
    "output_buffer_size": 16384,
    "output_buffer_timeout": 250,
}
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
        body = json.loads(await reader.readexactly(size))
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


async def test_handshake_sends_magic_and_feature_negotiation(fake: FakeNsqd) -> None:
    conn, client = await _open(fake, heartbeat_interval_ms=12_345, compression="none")
    try:
        assert client.identify["feature_negotiation"] is True
        assert client.identify["client_id"] == "fake-test"
        assert client.identify["heartbeat_interval"] == 12_345
        assert client.identify["tls_v1"] is False
        assert client.identify["snappy"] is False and client.identify["deflate"] is False
        assert conn.identify is not None and conn.identify.version == "1.3.0"
        assert conn.is_open and conn.family == "original"
    finally:
        await conn.close()
    assert await client.eof() == b""  # no subscription: no CLS, just a close


async def test_handshake_server_closes_after_identify() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> dict:
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


async def test_handshake_server_never_answers() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> dict:
        await reader.read()  # until the client gives up
        raise ConnectionError("client gave up")

    fake = await FakeNsqd(handshake=silent).start()
    try:
        started = time.monotonic()
        with pytest.raises(ConnectError, match="did not finish the handshake"):
            await Connection.open(fake.address, _config(connect_timeout=0.2))
        assert time.monotonic() - started < STEP
    finally:
        await fake.stop()


async def test_handshake_garbage_identify_reply_is_a_protocol_error() -> None:
    fake = await FakeNsqd(identify_reply={"max_rdy_count": "lots"}).start()
    try:
        with pytest.raises(p.ReplyDecodeError, match="max_rdy_count"):
            await Connection.open(fake.address, _config())
        client = await fake.accept()
        assert await client.eof() == b""  # the client dropped the socket
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


async def test_truncated_message_frame_closes(fake: FakeNsqd) -> None:
    """(c) A MESSAGE frame too short to hold the 26-byte header."""
    events = Events()
    conn, client = await _open(fake, events)
    sub = asyncio.create_task(conn.subscribe("t", "c"))
    assert await client.command() == (b"SUB t c", None)
    await client.frame(FrameType.RESPONSE, p.OK)
    await asyncio.wait_for(sub, STEP)
    conn.rdy(1)
    assert await client.command() == (b"RDY 1", None)
    pending = conn.request_nowait(p.pub("t", b"x"), "pub")
    assert await client.command() == (b"PUB t", b"x")
    await client.frame(FrameType.MESSAGE, encode_message(_msg(1, b""))[:10])
    with pytest.raises(ConnectionClosedError, match="protocol error"):
        await asyncio.wait_for(pending, STEP)
    await _closed_with(conn, events, "protocol error", "too short")
    assert events.messages == []
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


async def test_frames_split_into_single_bytes_are_reassembled(fake: FakeNsqd) -> None:
    """A message and two replies, each written one byte at a time."""
    events = Events()
    conn, client = await _open(fake, events)
    sub = asyncio.create_task(conn.subscribe("t", "c"))
    await client.command()
    pub = conn.request_nowait(p.pub("t", b"x"), "pub")
    await client.command()
    msg = _msg(7, bytes(range(256)) * 3)
    stream = (
        encode_frame(FrameType.RESPONSE, p.OK)
        + encode_frame(FrameType.MESSAGE, encode_message(msg))
        + encode_frame(FrameType.RESPONSE, b"OK-pub")
    )
    for i in range(len(stream)):
        await client.send(stream[i : i + 1])
        if i % 64 == 0:
            await asyncio.sleep(0)
    await asyncio.wait_for(sub, STEP)
    assert await asyncio.wait_for(pub, STEP) == b"OK-pub"
    assert events.messages == [msg]
    assert conn.is_open and events.closes == []
    await conn.close()


# --------------------------------------------------------------------------- error frames


async def test_not_leader_on_pub_is_raised_and_connection_stays_open(fake: FakeNsqd) -> None:
    """(d) Non-fatal on publish: only that PUB fails; replies stay matched in order."""
    events = Events()
    conn, client = await _open(fake, events)
    tasks = [asyncio.create_task(conn.request(p.pub("t", b"%d" % i), "pub")) for i in range(3)]
    for i in range(3):
        assert await client.command() == (b"PUB t", b"%d" % i)
    await client.send(
        encode_frame(FrameType.RESPONSE, p.OK)
        + encode_frame(FrameType.ERROR, b"E_FAILED_ON_NOT_LEADER not leader for partition 0")
        + encode_frame(FrameType.RESPONSE, p.OK)
    )
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), STEP)
    assert results[0] == p.OK and results[2] == p.OK
    err = results[1]
    assert isinstance(err, p.NotLeaderError)
    assert err.context == "pub" and not err.fatal
    assert err.retryable_on_publish and err.needs_lookup_refresh
    assert conn.is_open and events.closes == [] and events.errors == []
    # Still usable afterwards.
    later = asyncio.create_task(conn.request(p.pub("t", b"again"), "pub"))
    assert await client.command() == (b"PUB t", b"again")
    await client.frame(FrameType.RESPONSE, p.OK)
    assert await asyncio.wait_for(later, STEP) == p.OK
    await conn.close()


async def test_not_leader_on_sub_is_fatal(fake: FakeNsqd) -> None:
    events = Events()
    conn, client = await _open(fake, events)
    sub = asyncio.create_task(conn.subscribe("orders", "c"))
    await client.command()
    await client.frame(FrameType.ERROR, b"E_FAILED_ON_NOT_LEADER")
    with pytest.raises(p.NotLeaderError) as info:
        await asyncio.wait_for(sub, STEP)
    assert info.value.fatal and info.value.topic == "orders"
    assert info.value.context == "sub"
    await _closed_with(conn, events, "E_FAILED_ON_NOT_LEADER")
    assert conn.subscribed is None
    await conn.close()


async def test_sub_error_message_names_the_topic(fake: FakeNsqd) -> None:
    conn, client = await _open(fake)
    sub = asyncio.create_task(conn.subscribe("orders", "c"))
    await client.command()
    await client.frame(FrameType.ERROR, b"E_FAILED_ON_NOT_LEADER")
    with pytest.raises(p.NotLeaderError) as info:
        await asyncio.wait_for(sub, STEP)
    await conn.close()
    assert "'orders'" in str(info.value)


async def test_fatal_invalid_reply_closes(fake: FakeNsqd) -> None:
    """(f) E_INVALID answering a PUB: raised from the request, then the connection closes."""
    events = Events()
    conn, client = await _open(fake, events)
    first = asyncio.create_task(conn.request(p.pub("t", b"1"), "pub"))
    assert await client.command() == (b"PUB t", b"1")
    second = conn.request_nowait(p.pub("t", b"2"), "pub")
    assert await client.command() == (b"PUB t", b"2")
    await client.frame(FrameType.ERROR, b"E_INVALID cannot PUB in current state")
    with pytest.raises(p.InvalidError, match="cannot PUB in current state") as info:
        await asyncio.wait_for(first, STEP)
    assert info.value.fatal and info.value.context == "pub"
    with pytest.raises(ConnectionClosedError, match="E_INVALID"):
        await asyncio.wait_for(second, STEP)  # the pipelined one behind it fails too
    await _closed_with(conn, events, "E_INVALID")
    assert await client.eof() == b""
    await conn.close()


async def test_unsolicited_fatal_error_goes_to_on_error_and_closes(fake: FakeNsqd) -> None:
    events = Events()
    conn, client = await _open(fake, events)
    await client.frame(FrameType.ERROR, b"E_INVALID invalid command FOO")
    await _closed_with(conn, events, "E_INVALID")
    assert len(events.errors) == 1 and isinstance(events.errors[0], p.InvalidError)
    await conn.close()


async def test_fin_failed_does_not_consume_a_pending_reply(fake: FakeNsqd) -> None:
    """E_FIN_FAILED answers a FIN (no reply of its own), not the PUB waiting in line."""
    events = Events()
    conn, client = await _open(fake, events)
    conn.fin(b"0123456789abcdef")
    pub = asyncio.create_task(conn.request(p.pub("t", b"x"), "pub"))
    assert await client.command() == (b"FIN 0123456789abcdef", None)
    assert await client.command() == (b"PUB t", b"x")
    await client.send(
        encode_frame(FrameType.ERROR, b"E_FIN_FAILED FIN 0123456789abcdef failed")
        + encode_frame(FrameType.RESPONSE, p.OK)
    )
    assert await asyncio.wait_for(pub, STEP) == p.OK
    assert len(events.errors) == 1 and isinstance(events.errors[0], p.FinFailedError)
    assert not events.errors[0].fatal
    assert conn.is_open and events.closes == []
    await conn.close()


async def test_pub_failed_is_non_fatal(fake: FakeNsqd) -> None:
    events = Events()
    conn, client = await _open(fake, events)
    pub = asyncio.create_task(conn.request(p.pub("t", b"x"), "pub"))
    await client.command()
    await client.frame(FrameType.ERROR, b"E_PUB_FAILED PUB failed exiting")
    with pytest.raises(p.PubFailedError) as info:
        await asyncio.wait_for(pub, STEP)
    assert info.value.retryable_on_publish and not info.value.fatal
    assert conn.is_open and events.closes == []
    await conn.close()


# --------------------------------------------------------------------------- heartbeats


async def test_heartbeat_is_answered_with_nop(fake: FakeNsqd) -> None:
    """(e) ``_heartbeat_`` gets ``NOP`` and does not resolve a pending request."""
    events = Events()
    conn, client = await _open(fake, events)
    pub = asyncio.create_task(conn.request(p.pub("t", b"x"), "pub"))
    await client.command()
    for _ in range(3):
        await client.frame(FrameType.RESPONSE, p.HEARTBEAT)
        assert await asyncio.wait_for(client.reader.readexactly(4), STEP) == b"NOP\n"
    assert not pub.done()
    await client.frame(FrameType.RESPONSE, p.OK)
    assert await asyncio.wait_for(pub, STEP) == p.OK
    assert conn.is_open and events.errors == [] and events.messages == []
    await conn.close()
    assert await client.eof() == b""  # nothing but the three NOPs was sent


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
    await conn.close()


async def test_a_frame_sent_with_the_handshake_reply_is_not_lost() -> None:
    """Bytes that arrive in the same read as the last handshake reply are read by the
    handshake's buffered reader; they must reach the connection after it switches to
    handling reads directly (here: a heartbeat, answered with NOP)."""

    async def eager(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> dict[str, Any]:
        assert await reader.readexactly(4) == p.MAGIC_V2
        assert await reader.readline() == b"IDENTIFY\n"
        (size,) = struct.unpack(">I", await reader.readexactly(4))
        body = json.loads(await reader.readexactly(size))
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
    with pytest.raises(ConnectionClosedError, match=r"no reply to pub in 0\.3s"):
        await conn.request(p.pub("t", b"x"), "pub")
    assert 0.25 <= time.monotonic() - started < STEP
    with pytest.raises(ConnectionClosedError):
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
