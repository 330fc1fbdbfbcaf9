"""One asyncio TCP connection to one nsqd (one topic partition on the redesign).

The protocol itself lives in :mod:`nsqctl.protocol` (sans-IO); this module only moves
bytes: handshake (magic, IDENTIFY, TLS / snappy / deflate upgrade, AUTH), a dedicated
reader task, heartbeats answered with NOP, replies matched to pipelined requests in
order, and writes coalesced per event-loop turn so that many FIN/RDY/PUB commands issued
in one turn leave in one socket write.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nsqctl import __version__
from nsqctl import protocol as p
from nsqctl.addresses import HostPort, parse_address
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.protocol.compression import validate_compression
from nsqctl.protocol.frames import CLOSE_WAIT, HEARTBEAT, FrameDecoder, FrameType
from nsqctl.protocol.message import MessageLayout, RawMessage
from nsqctl.protocol.replies import (
    AuthResponse,
    IdentifyResponse,
    parse_auth_response,
    parse_identify_response,
)
from nsqctl.secrets import Secret

log = logging.getLogger("nsqctl.connection")

_RESPONSE = int(FrameType.RESPONSE)

# Error codes that answer a command with no success reply (FIN/REQ/TOUCH): they never
# belong to a pending request.
_NO_REPLY_ERRORS = ("E_FIN_FAILED", "E_REQ_FAILED", "E_TOUCH_FAILED")
_READ_SIZE = 256 * 1024
# Writes above this many buffered bytes make `drain()` wait (producers use it).
_HIGH_WATER = 4 * 1024 * 1024


class ConnectionClosedError(NsqctlError):
    """The connection ended (server closed, network error, or we closed it)."""

    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"connection to nsqd {address} closed: {reason}")


class ConnectError(NsqctlError):
    """Could not open or set up a connection to nsqd."""


@dataclass(frozen=True)
class TLSSettings:
    """TLS towards nsqd: verification is on unless ``insecure`` is set explicitly."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    server_hostname: str | None = None

    def context(self) -> ssl.SSLContext:
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file)
            if self.cert_file:
                ctx.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as err:
            raise ConfigError(
                f"cannot load TLS files ({getattr(err, 'strerror', None) or err}): check "
                "--tls-ca / --tls-cert / --tls-key"
            ) from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


@dataclass
class ConnectionConfig:
    """What a connection negotiates and how long it waits."""

    client_id: str | None = None
    hostname: str | None = None
    user_agent: str = f"nsqctl/{__version__}"
    heartbeat_interval_ms: int = 30_000
    msg_timeout_ms: int | None = None
    output_buffer_size: int | None = None
    output_buffer_timeout_ms: int | None = None
    sample_rate: int = 0
    tls: TLSSettings | None = None
    compression: str = "none"  # none | snappy | deflate
    deflate_level: int = 6
    auth_secret: Secret | None = None
    extend_support: bool = False
    desired_tag: str | None = None
    ext_filter: dict[str, Any] | None = None
    connect_timeout: float = 5.0
    request_timeout: float = 30.0
    extra_identify: dict[str, Any] = field(default_factory=dict)

    def identify_body(self) -> dict[str, Any]:
        """The IDENTIFY JSON (feature negotiation on)."""
        validate_compression(self.compression)
        host = self.hostname or socket.gethostname()
        body: dict[str, Any] = {
            "client_id": self.client_id or host.split(".")[0],
            "hostname": host,
            "user_agent": self.user_agent,
            "feature_negotiation": True,
            "heartbeat_interval": self.heartbeat_interval_ms,
            "tls_v1": self.tls is not None,
            "snappy": self.compression == "snappy",
            "deflate": self.compression == "deflate",
            "deflate_level": self.deflate_level,
            "sample_rate": self.sample_rate,
        }
        if self.msg_timeout_ms is not None:
            body["msg_timeout"] = self.msg_timeout_ms
        if self.output_buffer_size is not None:
            body["output_buffer_size"] = self.output_buffer_size
        if self.output_buffer_timeout_ms is not None:
            body["output_buffer_timeout"] = self.output_buffer_timeout_ms
        if self.extend_support:
            body["extend_support"] = True
        if self.desired_tag:
            body["desired_tag"] = self.desired_tag
        if self.ext_filter:
            body["ext_filter"] = self.ext_filter
        body.update(self.extra_identify)
        return body


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
        self._reader: asyncio.StreamReader | None = None
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
        self._reader_task: asyncio.Task[None] | None = None
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
                asyncio.open_connection(self.address.host, self.address.port, limit=_READ_SIZE),
                cfg.connect_timeout,
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
        self._reader_task = asyncio.create_task(self._read_loop(), name=f"nsq-read-{self.address}")
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
            chunk = await self._reader.read(_READ_SIZE)
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
        if not self._flush_scheduled:
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

    async def _read_loop(self) -> None:
        reader = self._reader
        assert reader is not None
        idle = max(self.config.heartbeat_interval_ms / 1000.0 * 2 + 5, 10.0)
        reason: ConnectionClosedError | None = None
        loop = asyncio.get_running_loop()
        try:
            # One idle deadline moved before each read, not wait_for() per read: that made
            # a task per read (~19 us of CPU; an ordered read carries one message).
            async with asyncio.timeout(None) as deadline:
                while True:
                    deadline.reschedule(loop.time() + idle)
                    chunk = await reader.read(_READ_SIZE)
                    if not chunk:
                        reason = ConnectionClosedError(
                            str(self.address), "server closed the socket"
                        )
                        break
                    events = self._decoder.feed_events(
                        self._codec.decompress(chunk), self.layout
                    )
                    for event in events:
                        if event.__class__ is list:  # a run of messages (the hot path)
                            self._deliver(event)  # type: ignore[arg-type]
                        elif event[0] == _RESPONSE:
                            self._on_response(event[1])  # type: ignore[arg-type]
                        else:
                            self._on_error_frame(event[1])  # type: ignore[arg-type]
                    if self.closed is not None:
                        return
        except TimeoutError:
            reason = ConnectionClosedError(
                str(self.address), f"no data or heartbeat for {idle:.0f}s"
            )
        except p.ProtocolError as err:
            reason = ConnectionClosedError(str(self.address), f"protocol error: {err}")
        except NsqctlError as err:
            reason = ConnectionClosedError(str(self.address), str(err))
        except (OSError, ssl.SSLError) as err:
            reason = ConnectionClosedError(str(self.address), f"read failed: {err}")
        except asyncio.CancelledError:
            reason = ConnectionClosedError(str(self.address), "closed by the client")
            raise
        except Exception as err:
            log.exception("message handler failed on %s", self.address)
            reason = ConnectionClosedError(str(self.address), f"message handler failed: {err!r}")
        finally:
            self._shutdown(reason or ConnectionClosedError(str(self.address), "closed"))

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
        if self._reader_task is not None and self._reader_task is not asyncio.current_task():
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader_task
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
