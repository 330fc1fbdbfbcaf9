"""One asyncio TCP connection to one nsqd (one topic partition on the redesign).

The protocol itself lives in :mod:`nsqctl.protocol` (sans-IO); this module only moves
bytes: handshake (magic, IDENTIFY, TLS / snappy / deflate upgrade, AUTH), then reads
handled as they arrive (see :mod:`.stream`), heartbeats answered with NOP, replies
matched to pipelined requests in order, and writes coalesced per event-loop turn so that
many FIN/RDY/PUB commands issued in one turn leave in one socket write.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from nsqctl import protocol as p
from nsqctl.addresses import HostPort, parse_address
from nsqctl.connection.config import ConnectionConfig
from nsqctl.connection.stream import READ_SIZE, HandoffReader, open_stream
from nsqctl.errors import ConfigError, ConnectError, ConnectionClosedError, NsqctlError
from nsqctl.protocol.frames import CLOSE_WAIT, HEARTBEAT, FrameDecoder, FrameType
from nsqctl.protocol.message import MessageLayout, RawMessage
from nsqctl.protocol.replies import (
    AuthResponse,
    IdentifyResponse,
    parse_auth_response,
    parse_identify_response,
)

log = logging.getLogger("nsqctl.connection")

_RESPONSE = int(FrameType.RESPONSE)

# Error codes that answer a command with no success reply (FIN/REQ/TOUCH): they never
# belong to a pending request.
_NO_REPLY_ERRORS = ("E_FIN_FAILED", "E_REQ_FAILED", "E_TOUCH_FAILED")
# Writes above this many buffered bytes make `drain()` wait (producers use it).
_HIGH_WATER = 4 * 1024 * 1024


MessageHandler = Callable[["Connection", RawMessage], None]
# Consecutive messages of one read, in order (a consumer does its bookkeeping per batch).
BatchHandler = Callable[["Connection", list[RawMessage]], None]
ErrorHandler = Callable[["Connection", p.ServerError], None]
CloseHandler = Callable[["Connection", BaseException | None], None]


class Connection:
    """A connection to one nsqd; create with :meth:`open`."""

    def __init__(
        self,
        address: HostPort | str,
        config: ConnectionConfig | None = None,
        *,
        on_message: MessageHandler | None = None,
        on_messages: BatchHandler | None = None,
        on_error: ErrorHandler | None = None,
        on_close: CloseHandler | None = None,
    ) -> None:
        self.address = address if isinstance(address, HostPort) else parse_address(address)
        self.config = config or ConnectionConfig()
        self.on_message = on_message
        self.on_messages = on_messages
        self.on_error = on_error
        self.on_close = on_close
        self.identify: IdentifyResponse | None = None
        self.auth: AuthResponse | None = None
        self.layout = MessageLayout()
        self.subscribed: tuple[str, str, int | None] | None = None
        self.closed: ConnectionClosedError | None = None
        self.local_address: str = ""
        self.remote_address: str = ""
        self._reader: HandoffReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._codec: p.Codec = p.IdentityCodec()
        self._decoder = FrameDecoder()
        self._pending: collections.deque[tuple[asyncio.Future[bytes], str]] = collections.deque()
        # (deadline, future, context) of request() calls, oldest first; one timer watches
        # the oldest instead of a wait_for timer per request.
        self._deadlines: collections.deque[tuple[float, asyncio.Future[bytes], str]] = (
            collections.deque()
        )
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._out: list[bytes] = []
        self._flush_scheduled = False
        # True while a read is being handled: its answers leave in one write at the end.
        self._in_read = False
        self._last_read = 0.0
        self._idle_limit = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._close_wait: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ properties

    @property
    def is_redesign(self) -> bool:
        return bool(self.identify and self.identify.is_redesign)

    @property
    def family(self) -> str:
        return "redesign" if self.is_redesign else "original"

    @property
    def max_rdy_count(self) -> int:
        return self.identify.max_rdy_count if self.identify else p.DEFAULT_MAX_RDY_COUNT

    @property
    def is_open(self) -> bool:
        return self.closed is None and self._writer is not None

    def __repr__(self) -> str:
        return f"<Connection nsqd={self.address} {self.family} open={self.is_open}>"

    # ------------------------------------------------------------------ setup

    @classmethod
    async def open(
        cls, address: HostPort | str, config: ConnectionConfig | None = None, **kwargs: Any
    ) -> Connection:
        conn = cls(address, config, **kwargs)
        await conn.connect()
        return conn

    async def connect(self) -> IdentifyResponse:
        """Magic, IDENTIFY, upgrades and AUTH; then start the reader."""
        cfg = self.config
        body = cfg.identify_body()
        self._loop = asyncio.get_running_loop()
        try:
            self._reader, self._writer = await asyncio.wait_for(
                open_stream(self.address.host, self.address.port), cfg.connect_timeout
            )
        except (TimeoutError, OSError) as err:
            reason = "timed out" if isinstance(err, asyncio.TimeoutError) else err.strerror
            raise ConnectError(
                f"cannot connect to nsqd {self.address}: {reason or err}; check the address "
                "and that nsqd is running"
            ) from None
        sock = self._writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.local_address = _fmt_peer(self._writer.get_extra_info("sockname"))
        self.remote_address = _fmt_peer(self._writer.get_extra_info("peername"))
        try:
            await asyncio.wait_for(self._handshake(body), cfg.connect_timeout * 2)
        except BaseException as err:
            self._abort()
            self.closed = ConnectionClosedError(str(self.address), "the handshake failed")
            if isinstance(err, asyncio.TimeoutError):
                raise ConnectError(f"nsqd {self.address} did not finish the handshake") from None
            if isinstance(err, ssl.SSLError) and "ALERT" in (err.reason or ""):
                raise ConnectError(
                    f"nsqd {self.address} rejected our TLS client certificate ({err.reason}): "
                    "pass --tls-cert/--tls-key signed by the CA in nsqd's --tls-root-ca-file"
                ) from None
            if isinstance(err, ssl.SSLError):
                raise ConnectError(
                    f"TLS handshake with nsqd {self.address} failed ({err.reason or err}); "
                    "check --tls-ca, or --tls-insecure for a self-signed test server"
                ) from None
            if isinstance(err, (OSError, asyncio.IncompleteReadError)):
                raise ConnectError(
                    f"nsqd {self.address} closed the connection during the handshake"
                ) from None
            raise
        self._start_reading()
        assert self.identify is not None
        return self.identify

    async def _handshake(self, body: dict[str, Any]) -> None:
        assert self._reader is not None and self._writer is not None
        self._writer.write(p.MAGIC_V2 + p.identify(body))
        data = await self._read_handshake_frame("identify")
        ident = parse_identify_response(data)
        self.identify = ident
        if self.config.tls is not None:
            if not ident.tls_v1:
                raise ConnectError(
                    f"nsqd {self.address} does not offer TLS: start it with --tls-cert/--tls-key "
                    "or connect without TLS"
                )
            tls = self.config.tls
            await self._writer.start_tls(
                tls.context(), server_hostname=tls.server_hostname or self.address.host
            )
            ok = await self._read_handshake_frame("tls")
            if ok != p.OK:
                raise ConnectError(f"nsqd {self.address} answered {ok!r} after the TLS upgrade")
        if self.config.compression != "none" and not (ident.snappy or ident.deflate):
            raise ConnectError(
                f"nsqd {self.address} refused {self.config.compression} compression: enable it "
                "on the server (--snappy / --deflate) or connect without compression"
            )
        codec = p.codec_for(ident)
        if not isinstance(codec, p.IdentityCodec):
            self._codec = codec
            ok = await self._read_compressed_frame()
            if ok != p.OK:
                raise ConnectError(f"nsqd {self.address} answered {ok!r} after compression")
        if ident.auth_required:
            secret = self.config.auth_secret
            if secret is None:
                raise ConnectError(
                    f"nsqd {self.address} requires AUTH: pass --auth-secret-file FILE or set "
                    "NSQCTL_AUTH_SECRET"
                )
            self._write_raw(p.auth(secret.reveal()))
            reply = await self._read_compressed_frame()
            self.auth = parse_auth_response(reply)
        elif self.config.auth_secret is not None:
            log.info("nsqd %s does not require AUTH; the secret was not sent", self.address)

    async def _read_handshake_frame(self, what: str) -> bytes:
        """Read exactly one uncompressed frame (nothing past it may be consumed)."""
        assert self._reader is not None
        header = await self._reader.readexactly(8)
        size = int.from_bytes(header[:4], "big")
        ftype = int.from_bytes(header[4:], "big")
        if size < 4 or size > self._decoder.max_frame_size:
            raise p.FrameDecodeError(f"invalid frame size {size} during {what}")
        data = await self._reader.readexactly(size - 4)
        return self._check_reply(ftype, data, what)

    async def _read_compressed_frame(self) -> bytes:
        """Read one frame through the codec (later frames stay in the decoder)."""
        assert self._reader is not None
        while True:
            chunk = await self._reader.read(READ_SIZE)
            if not chunk:
                raise asyncio.IncompleteReadError(b"", None)
            frames = self._decoder.feed(self._codec.decompress(chunk))
            if frames:
                if len(frames) > 1:  # nothing else is sent before we answer; keep it simple
                    raise p.FrameDecodeError("unexpected extra frames during the handshake")
                return self._check_reply(frames[0].type, frames[0].data, "handshake")

    def _check_reply(self, ftype: int, data: bytes, context: str) -> bytes:
        if ftype == FrameType.ERROR:
            raise p.error_from_frame(data, context=context)
        if ftype != FrameType.RESPONSE:
            raise p.FrameDecodeError(f"unexpected frame type {ftype} during {context}")
        return data

    # ------------------------------------------------------------------ writing

    def _closed_error(self) -> ConnectionClosedError:
        """A fresh exception each time (re-raising one object grows its traceback)."""
        assert self.closed is not None
        return ConnectionClosedError(self.closed.address, self.closed.reason)

    def send(self, command: bytes) -> None:
        """Queue a command that has no reply (RDY, FIN, REQ, TOUCH, NOP)."""
        if self.closed is not None:
            raise self._closed_error()
        self._out.append(command)
        if not self._flush_scheduled and not self._in_read:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._out or self._writer is None or self.closed is not None:
            self._out.clear()
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self._write_raw(data)

    def _write_raw(self, data: bytes) -> None:
        assert self._writer is not None
        try:
            self._writer.write(self._codec.compress(data))
        except (OSError, RuntimeError) as err:
            self._shutdown(ConnectionClosedError(str(self.address), f"write failed: {err}"))

    async def drain(self) -> None:
        """Wait while too much is buffered for the socket (publishers call this)."""
        writer = self._writer
        if writer is None or self.closed is not None:
            return
        transport = writer.transport
        if transport.get_write_buffer_size() > _HIGH_WATER:
            with contextlib.suppress(ConnectionError):
                await writer.drain()

    def request_nowait(self, command: bytes, context: str) -> asyncio.Future[bytes]:
        """Send a command that gets a reply; the future resolves with the reply's data.

        Replies come back in order, so many requests may be in flight (pipelining).
        """
        if self.closed is not None:
            raise self._closed_error()
        assert self._loop is not None
        fut: asyncio.Future[bytes] = self._loop.create_future()
        self._pending.append((fut, context))
        self.send(command)
        return fut

    async def request(self, command: bytes, context: str) -> bytes:
        """Send and wait for the reply; no reply in ``request_timeout`` closes the connection.

        Cancelling the caller cancels only its future; the reply, when it comes, is still
        matched to it (in order) and dropped.
        """
        fut = self.request_nowait(command, context)
        loop = self._loop
        assert loop is not None
        deadlines = self._deadlines
        deadlines.append((loop.time() + self.config.request_timeout, fut, context))
        if self._deadline_timer is None:
            self._deadline_timer = loop.call_at(deadlines[0][0], self._check_deadlines)
        try:
            return await fut
        except ConnectionClosedError:
            raise self._closed_error() from None  # a fresh one per caller
        finally:
            while deadlines and deadlines[0][1].done():  # replies come in order
                deadlines.popleft()

    def _check_deadlines(self) -> None:
        self._deadline_timer = None
        deadlines = self._deadlines
        while deadlines and deadlines[0][1].done():
            deadlines.popleft()
        if not deadlines or self.closed is not None:
            return
        deadline, _fut, context = deadlines[0]
        assert self._loop is not None
        if self._loop.time() >= deadline:
            reason = f"no reply to {context} in {self.config.request_timeout}s"
            self._shutdown(ConnectionClosedError(str(self.address), reason))
            return
        self._deadline_timer = self._loop.call_at(deadline, self._check_deadlines)

    # ------------------------------------------------------------------ commands

    def partition_arg(self, partition: int | None) -> int | None:
        """Partition numbers go only to the redesign; an original nsqd never sees one."""
        if partition is None:
            return None
        if not self.is_redesign:
            raise ConfigError(
                f"nsqd {self.address} is an original NSQ server (no partitions): drop "
                f"--partition {partition}"
            )
        return partition

    async def subscribe(
        self,
        topic: str,
        channel: str,
        partition: int | None = None,
        *,
        ordered: bool = False,
        start: str | None = None,
    ) -> None:
        """SUB / SUB_ORDERED / SUB_ADVANCED; sets how messages will be decoded."""
        part = self.partition_arg(partition)
        if (ordered or start is not None) and not self.is_redesign:
            raise ConfigError(
                f"nsqd {self.address} is an original NSQ server: ordered subscription and "
                "--from-start/--from-time need the redesign"
            )
        if start is not None:
            cmd = p.sub_advanced(topic, channel, part, start)
            context = "sub_advanced"
        elif ordered:
            cmd, context = p.sub_ordered(topic, channel, part), "sub_ordered"
        else:
            cmd, context = p.sub(topic, channel, part), "sub"
        self.layout = MessageLayout(
            family=self.family,  # type: ignore[arg-type]
            ext=self.config.extend_support and self.is_redesign,
            ordered=ordered or start is not None,
        )
        try:
            await self.request(cmd, context)
        except p.ServerError as err:
            err.topic = topic
            raise
        self.subscribed = (topic, channel, partition)

    def rdy(self, count: int) -> None:
        self.send(p.rdy(count))

    def fin(self, msg_id: bytes) -> None:
        self.send(p.fin(msg_id))

    def fin_many(self, msg_ids: list[bytes]) -> None:
        """FIN each message (one buffer for a consumer's whole batch)."""
        if msg_ids:
            self.send(p.fin_many(msg_ids))

    def req(self, msg_id: bytes, delay_ms: int) -> None:
        self.send(p.req(msg_id, delay_ms))

    def touch(self, msg_id: bytes) -> None:
        self.send(p.touch(msg_id))

    # ------------------------------------------------------------------ reading

    def _start_reading(self) -> None:
        """Reads go straight to :meth:`_on_data` from now on; an idle timer watches for
        silence (nsqd sends a heartbeat at least every heartbeat interval)."""
        assert self._reader is not None and self._loop is not None
        self._idle_limit = max(self.config.heartbeat_interval_ms / 1000.0 * 2 + 5, 10.0)
        self._last_read = self._loop.time()
        self._idle_timer = self._loop.call_at(self._last_read + self._idle_limit, self._check_idle)
        self._reader.hand_off(self._on_data, self._on_end)

    def _check_idle(self) -> None:
        # One timer moved lazily, not one per read: a read only stores its time.
        assert self._loop is not None
        self._idle_timer = None
        if self.closed is not None:
            return
        due = self._last_read + self._idle_limit
        if self._loop.time() >= due:
            reason = f"no data or heartbeat for {self._idle_limit:.0f}s"
            self._shutdown(ConnectionClosedError(str(self.address), reason))
            return
        self._idle_timer = self._loop.call_at(due, self._check_idle)

    def _on_data(self, chunk: bytes) -> None:
        """One read from the socket: decode it, hand its messages and replies on, then
        send what the handlers answered in one write."""
        if self.closed is not None:
            return
        assert self._loop is not None
        self._last_read = self._loop.time()
        self._in_read = True
        reason: ConnectionClosedError | None = None
        try:
            events = self._decoder.feed_events(self._codec.decompress(chunk), self.layout)
            for event in events:
                if event.__class__ is list:  # a run of messages (the hot path)
                    self._deliver(event)  # type: ignore[arg-type]
                elif event[0] == _RESPONSE:
                    self._on_response(event[1])  # type: ignore[arg-type]
                else:
                    self._on_error_frame(event[1])  # type: ignore[arg-type]
                if self.closed is not None:
                    return
        except p.ProtocolError as err:
            reason = ConnectionClosedError(str(self.address), f"protocol error: {err}")
        except NsqctlError as err:
            reason = ConnectionClosedError(str(self.address), str(err))
        except Exception as err:
            log.exception("message handler failed on %s", self.address)
            reason = ConnectionClosedError(str(self.address), f"message handler failed: {err!r}")
        finally:
            self._in_read = False
        if reason is not None:
            self._shutdown(reason)
        elif self._out:
            self._flush()

    def _on_end(self, exc: BaseException | None) -> None:
        """The socket ended: nsqd closed it (``exc`` None) or a read failed."""
        if exc is None:
            reason = "server closed the socket"
        elif isinstance(exc, (OSError, ssl.SSLError)):
            reason = f"read failed: {exc}"
        else:
            reason = f"read failed: {exc!r}"
        self._shutdown(ConnectionClosedError(str(self.address), reason))

    def _deliver(self, batch: list[RawMessage]) -> None:
        if self.on_messages is not None:
            self.on_messages(self, batch)
        elif self.on_message is not None:
            for msg in batch:
                self.on_message(self, msg)
        else:
            for msg in batch:
                self._unhandled(msg)

    def _unhandled(self, msg: RawMessage) -> None:
        # nobody to handle it: let it time out on the server rather than lose it
        log.warning("message %s on %s with no handler; left to time out", msg.id, self)

    def _on_response(self, data: bytes) -> None:
        if data == HEARTBEAT:
            self.send(p.nop())
            return
        if data == CLOSE_WAIT and self._close_wait is not None and not self._close_wait.done():
            self._close_wait.set_result(None)  # CLS is also a pending request: resolved below
        if self._pending:
            fut, _ctx = self._pending.popleft()
            if not fut.done():
                fut.set_result(data)
        elif data != CLOSE_WAIT:
            log.debug("unsolicited response %r from %s", data[:64], self.address)

    def _on_error_frame(self, data: bytes) -> None:
        code = data.split(b" ", 1)[0].decode("ascii", "replace")
        if code.startswith(_NO_REPLY_ERRORS) or not self._pending:
            err = p.error_from_frame(data, context=code.lower().removeprefix("e_").split("_")[0])
            if self.on_error is not None:
                self.on_error(self, err)
            else:
                log.warning("nsqd %s: %s", self.address, err)
            if err.fatal:
                self._shutdown(ConnectionClosedError(str(self.address), str(err)))
            return
        fut, ctx = self._pending.popleft()
        err = p.error_from_frame(data, context=ctx)
        if not fut.done():
            fut.set_exception(err)
        if err.fatal:
            self._shutdown(ConnectionClosedError(str(self.address), str(err)))

    # ------------------------------------------------------------------ closing

    async def close(self, timeout: float = 5.0) -> None:
        """Clean close: CLS and wait for CLOSE_WAIT when subscribed, then drain and close."""
        if self.closed is None and self._writer is not None:
            if self.subscribed is not None and self._loop is not None:
                self._close_wait = self._loop.create_future()
                fut: asyncio.Future[bytes] | None = None
                with contextlib.suppress(NsqctlError, asyncio.TimeoutError):
                    fut = self.request_nowait(p.cls(), "cls")
                    await asyncio.wait_for(asyncio.shield(self._close_wait), timeout)
                if fut is not None:
                    fut.cancel()
            self._flush()
            with contextlib.suppress(OSError, ConnectionError, asyncio.TimeoutError):
                await asyncio.wait_for(self._writer.drain(), timeout)
        self._shutdown(ConnectionClosedError(str(self.address), "closed by the client"))
        if self._writer is not None:
            with contextlib.suppress(OSError, ConnectionError, asyncio.TimeoutError, ssl.SSLError):
                await asyncio.wait_for(self._writer.wait_closed(), timeout)

    def _abort(self) -> None:
        if self._writer is not None:
            self._writer.transport.abort()

    def _shutdown(self, reason: ConnectionClosedError) -> None:
        """Mark closed once: fail pending requests, close the socket, tell the owner."""
        if self.closed is not None:
            return
        self.closed = reason
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        self._deadlines.clear()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        while self._pending:
            fut, _ctx = self._pending.popleft()
            if not fut.done():
                fut.set_exception(reason)
        self._out.clear()
        if self._writer is not None:
            self._writer.close()
        if self.on_close is not None:
            cause = None if reason.reason == "closed by the client" else reason
            self.on_close(self, cause)


def _fmt_peer(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "")
