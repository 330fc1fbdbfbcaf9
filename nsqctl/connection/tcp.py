"""One asyncio TCP connection to one nsqd (one topic partition on the redesign).

A thin transport: the protocol lives in :mod:`nsqctl.protocol` as sans-IO state machines
(:class:`~nsqctl.protocol.handshake.Handshake` until the connection is ready, then
:class:`~nsqctl.protocol.session.Session`), and this module moves bytes between them and
the socket (:mod:`.stream`), upgrades it to TLS when the handshake says so, keeps the
timers (request deadlines, the idle deadline that heartbeats keep away), and coalesces
writes per event-loop turn so that many FIN/RDY/PUB commands issued in one turn leave in
one socket write.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import socket
import ssl
from collections.abc import Callable
from typing import Any

from nsqctl import protocol as p
from nsqctl.addresses import HostPort, parse_address
from nsqctl.connection.config import ConnectionConfig
from nsqctl.connection.stream import SocketProtocol, open_socket
from nsqctl.errors import (
    ConfigError,
    ConnectError,
    ConnectionClosedError,
    ConnectTimeoutError,
    NsqctlError,
    ReplyTimeoutError,
    TLSCertificateError,
    TLSError,
)
from nsqctl.protocol.handshake import (
    TLS_STATES,
    Authenticated,
    Handshake,
    HandshakeState,
    HandshakeTimeoutError,
    Identified,
    Ready,
    SendData,
    StartTLS,
    SwitchCodec,
    tls_upgrade_lost,
)
from nsqctl.protocol.raw_message import Family, MessageLayout, RawMessage
from nsqctl.protocol.replies import AuthResponse, IdentifyResponse
from nsqctl.protocol.session import (
    CloseWaitReceived,
    Fatal,
    ServerNotice,
    Session,
    SessionEvent,
    UnsolicitedReply,
    idle_timeout,
)

log = logging.getLogger("nsqctl.connection")

# Writes above this many buffered bytes make `drain()` wait (producers use it).
_HIGH_WATER = 4 * 1024 * 1024

# Seconds a closing connection keeps reading after CLOSE_WAIT, until nothing came for
# this long. nsqd v1's messagePump checks RDY before it takes a message, then waits for
# the write lock that the CLOSE_WAIT reply holds: a message it took just before RDY 0
# was processed is written just after CLOSE_WAIT (how often, how late: bench/README.md).
# Unread, it would stay in flight until nsqd's msg-timeout; read, it goes to the owner (a
# closing consumer gives it back) before the socket closes.
CLOSE_WAIT_QUIET = 0.005


MessageHandler = Callable[["Connection", RawMessage], None]
# Consecutive messages of one read, in order (a consumer does its bookkeeping per batch).
BatchHandler = Callable[["Connection", list[RawMessage]], None]
ErrorHandler = Callable[["Connection", p.ServerError], None]
CloseHandler = Callable[["Connection", BaseException | None], None]
_Pending = asyncio.Future[bytes]


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
        self.subscribed: tuple[str, str, int | None] | None = None
        self.closed: ConnectionClosedError | None = None
        self.local_address: str = ""
        self.remote_address: str = ""
        self._socket: SocketProtocol | None = None
        self._transport: asyncio.Transport | None = None
        self._codec: p.Codec = p.IdentityCodec()
        # The codec's compress, None without compression (the identity would copy every
        # write for nothing).
        self._compress: Callable[[bytes], bytes] | None = None
        self._session: Session[_Pending] = Session()
        # (deadline, future, context) of request() calls, oldest first; one timer watches
        # the oldest instead of a wait_for timer per request.
        self._deadlines: collections.deque[tuple[float, _Pending, str]] = collections.deque()
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
        # Set while the socket's reads are lent to a reader of the owner's (see lend()):
        # called, on the loop, to have them back before anything else uses the socket.
        self._reclaim: Callable[[], None] | None = None
        # What the reader gave back (see take_back) and the loop has not handled yet.
        self._returned: tuple[bytes, BaseException | bool] | None = None

    # ------------------------------------------------------------------ properties

    @property
    def is_redesign(self) -> bool:
        return bool(self.identify and self.identify.is_redesign)

    @property
    def family(self) -> Family:
        return "redesign" if self.is_redesign else "original"

    @property
    def max_rdy_count(self) -> int:
        return self.identify.max_rdy_count if self.identify else p.DEFAULT_MAX_RDY_COUNT

    @property
    def is_open(self) -> bool:
        return self.closed is None and self._transport is not None

    @property
    def layout(self) -> MessageLayout:
        """How this connection's message frames are decoded (set by :meth:`subscribe`)."""
        return self._session.layout

    @layout.setter
    def layout(self, layout: MessageLayout) -> None:
        self._session.layout = layout

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
        """Magic, IDENTIFY, upgrades and AUTH; then reads go to the session."""
        cfg = self.config
        handshake = Handshake(
            cfg.identify_body(),
            peer=str(self.address),
            tls=cfg.tls is not None,
            compression=cfg.compression,
            auth_secret=cfg.auth_secret,
        )
        self._loop = asyncio.get_running_loop()
        # asyncio.timeout, never wait_for, here and below: on 3.11 wait_for can swallow a
        # cancel that lands as the awaited call completes (CPython gh-86296), and on
        # loopback a connect, a handshake reply or CLOSE_WAIT comes at once: a stopping
        # consumer's connect or close then ran on as if never cancelled.
        try:
            async with asyncio.timeout(cfg.connect_timeout):
                self._socket = await open_socket(self.address.host, self.address.port)
        except TimeoutError as err:
            raise ConnectTimeoutError(
                f"cannot connect to nsqd {self.address}: no answer within "
                f"{cfg.connect_timeout:g}s; check the address and that nsqd is running",
                setting="connect_timeout",
            ) from err
        except OSError as err:
            raise ConnectError(
                f"cannot connect to nsqd {self.address}: {err.strerror or err}; check the "
                "address and that nsqd is running"
            ) from err
        transport = self._socket.transport
        assert transport is not None
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.local_address = _fmt_peer(transport.get_extra_info("sockname"))
        self.remote_address = _fmt_peer(transport.get_extra_info("peername"))
        try:
            async with asyncio.timeout(cfg.connect_timeout * 2):
                leftover = await self._handshake(handshake)
        except BaseException as err:
            self._abort()
            self.closed = ConnectionClosedError(str(self.address), "the handshake failed")
            converted = self._handshake_error(err, handshake.state)
            if converted is err:
                raise
            raise converted from err
        if handshake.secret_unused:
            log.info("nsqd %s does not require AUTH; the secret was not sent", self.address)
        self._start_reading(leftover)
        assert self.identify is not None
        return self.identify

    async def _handshake(self, handshake: Handshake) -> bytes:
        """Carry out the handshake machine's events; the session's first bytes."""
        sock = self._socket
        assert sock is not None
        events = handshake.start()
        while True:
            for event in events:
                if isinstance(event, SendData):
                    self._write_raw(event.data)
                elif isinstance(event, Identified):
                    self.identify = event.response
                elif isinstance(event, StartTLS):
                    await self._start_tls()
                    events = handshake.tls_started()
                    break
                elif isinstance(event, SwitchCodec):
                    self._codec = event.codec
                    if not isinstance(event.codec, p.IdentityCodec):
                        self._compress = event.codec.compress
                elif isinstance(event, Authenticated):
                    self.auth = event.response
                else:
                    assert isinstance(event, Ready)
                    self._session = Session(self._codec)
                    return event.leftover
            else:
                data = await sock.read()
                if not data:
                    handshake.receive_eof()
                events = handshake.receive_data(data)

    async def _start_tls(self) -> None:
        tls = self.config.tls
        assert tls is not None and self._socket is not None and self._loop is not None
        if self._socket.buffered:  # nsqd cannot send anything before our TLS hello
            raise p.FrameDecodeError(
                f"nsqd {self.address} sent {self._socket.buffered} bytes before the TLS upgrade"
            )
        assert self._transport is not None
        transport = await self._loop.start_tls(
            self._transport,
            self._socket,
            tls.context(),
            server_hostname=tls.server_hostname or self.address.host,
        )
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._socket.upgraded(transport)

    def _handshake_error(self, err: BaseException, state: HandshakeState) -> BaseException:
        """What a failed handshake raises: nsqctl errors as they are, the rest as a
        :class:`ConnectError` that says what to change (a :class:`TLSError` for a failure
        of the TLS upgrade). The message is made of the address and the TLS library's
        reason code only: never of a file's contents, a key or a passphrase."""
        if isinstance(err, TimeoutError):
            return HandshakeTimeoutError(
                f"nsqd {self.address} did not finish the handshake within "
                f"{self.config.connect_timeout * 2:g}s (twice the connect timeout)",
                setting="connect_timeout",
            )
        reason = ""
        if isinstance(err, ssl.SSLError):
            reason = err.reason or ""
        if "ALERT" in reason and ("CERTIFICATE" in reason or "UNKNOWN_CA" in reason):
            return TLSCertificateError(
                f"nsqd {self.address} rejected our TLS client certificate ({reason}): "
                "give a client certificate and key signed by a CA that nsqd trusts "
                "(`tls_cert`)",
                setting="tls_cert",
            )
        if isinstance(err, ssl.SSLCertVerificationError):
            return TLSCertificateError(
                f"nsqd {self.address}'s TLS certificate did not verify ({err.reason or err}: "
                f"{err.verify_message}): give the CA that signed it (`tls_ca`), or skip "
                "verification for a self-signed test server (`tls_insecure`)",
                setting="tls_ca",
            )
        if isinstance(err, ssl.SSLError):
            return TLSError(
                f"TLS handshake with nsqd {self.address} failed ({err.reason or err}): check "
                "that it offers TLS on this port and the CA that signed its certificate "
                "(`tls_ca`)",
                setting="tls_ca",
            )
        if isinstance(err, (OSError, EOFError)):
            if state in TLS_STATES:
                return tls_upgrade_lost(str(self.address))
            return ConnectError(f"nsqd {self.address} closed the connection during the handshake")
        return err

    # ------------------------------------------------------------------ writing

    def _closed_error(self) -> ConnectionClosedError:
        """A fresh exception each time (re-raising one object grows its traceback), of the
        kind the connection ended with (a :class:`ReplyTimeoutError` stays a timeout)."""
        closed = self.closed
        assert closed is not None
        return type(closed)(closed.address, closed.reason)

    def send(self, command: bytes) -> None:
        """Queue a command that has no reply (RDY, FIN, REQ, TOUCH, NOP)."""
        if self.closed is not None:
            raise self._closed_error()
        if self._reclaim is not None:
            self._reclaim()  # never two writers on one socket
        self._out.append(command)
        if not self._flush_scheduled and not self._in_read:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._out or self._transport is None or self.closed is not None:
            self._out.clear()
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self._write_raw(data)

    def _write_raw(self, data: bytes) -> None:
        assert self._transport is not None
        compress = self._compress
        try:
            self._transport.write(data if compress is None else compress(data))
        except (OSError, RuntimeError) as err:
            self._shutdown(ConnectionClosedError(str(self.address), f"write failed: {err}"))

    async def drain(self) -> None:
        """Wait while too much is buffered for the socket (publishers call this)."""
        transport, sock = self._transport, self._socket
        if transport is None or sock is None or self.closed is not None:
            return
        if transport.get_write_buffer_size() > _HIGH_WATER:
            await sock.drain()

    def request_nowait(self, command: bytes, context: str) -> asyncio.Future[bytes]:
        """Send a command that gets a reply; the future resolves with the reply's data.

        Replies come back in order, so many requests may be in flight (pipelining).
        """
        if self.closed is not None:
            raise self._closed_error()
        assert self._loop is not None
        fut: asyncio.Future[bytes] = self._loop.create_future()
        self.send(self._session.request(command, fut, context))
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
            self._shutdown(ReplyTimeoutError(str(self.address), reason))
            return
        self._deadline_timer = self._loop.call_at(deadline, self._check_deadlines)

    # ------------------------------------------------------------------ commands

    def partition_arg(self, partition: int | None) -> int | None:
        """Partition numbers go only to the redesign; an original nsqd never sees one."""
        if partition is None:
            return None
        if not self.is_redesign:
            raise ConfigError(
                f"nsqd {self.address} is an original NSQ server (no partitions): do not "
                f"give a partition ({partition})",
                setting="partition",
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
        detail: bool = False,
    ) -> None:
        """SUB / SUB_ORDERED / SUB_ADVANCED; sets how messages will be decoded.

        ``detail``: on the redesign, SUB_ADVANCED without a start rather than SUB: the same
        subscription, but each message frame carries its queue offset and size (a consumer
        keeps its confirmed position with them). Ignored on the original family.
        """
        part = self.partition_arg(partition)
        detail = detail and self.is_redesign and not ordered
        if (ordered or start is not None) and not self.is_redesign:
            raise ConfigError(
                f"nsqd {self.address} is an original NSQ server: an ordered subscription "
                "and a start position need the redesign",
                setting="start" if start is not None else "ordered",
            )
        if start is not None or detail:
            cmd = p.sub_advanced(topic, channel, part, start)
            context = "sub_advanced"
        elif ordered:
            cmd, context = p.sub_ordered(topic, channel, part), "sub_ordered"
        else:
            cmd, context = p.sub(topic, channel, part), "sub"
        self.layout = MessageLayout(
            family=self.family,
            ext=self.config.extend_support and self.is_redesign,
            ordered=ordered or start is not None or detail,
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

    # ------------------------------------------------------------------ lending the reads

    def lend(self, reclaim: Callable[[], None]) -> socket.socket | None:
        """Stop reading on the loop and return a duplicate of the socket for a reader
        thread of the caller's, which then reads and answers on it alone; None when this
        connection cannot be lent: closed, TLS or compression (the reader would need the
        codec), part of a frame buffered, a request awaiting its reply, writes queued.

        ``reclaim`` is called (on the loop) before anything here uses the socket again
        (a command sent, a close): it must stop the reader and call :meth:`take_back`.
        """
        transport = self._transport
        if transport is None or not self.lendable:
            return None
        raw = transport.get_extra_info("socket")
        if raw is None:
            return None
        transport.pause_reading()
        self._reclaim = reclaim
        # the duplicate shares the open file (and its O_NONBLOCK): the reader polls
        return socket.socket(fileno=os.dup(raw.fileno()))

    @property
    def lent(self) -> bool:
        return self._reclaim is not None

    @property
    def lendable(self) -> bool:
        """Whether :meth:`lend` would lend now: open, not lent, no TLS or compression,
        nothing buffered, awaited or queued, and reading. A caller checks it before
        building a reader, which a refused lend would only throw away."""
        transport = self._transport
        return not (
            self._reclaim is not None
            or self.closed is not None
            or transport is None
            or self.config.tls is not None
            or not isinstance(self._codec, p.IdentityCodec)
            or self._session.buffered
            or self._session.awaiting
            or self._out
            or transport.get_write_buffer_size()
            or not transport.is_reading()
        )

    def take_back(self, unread: bytes, last_read: float, end: BaseException | bool) -> None:
        """The reader is done: ``unread`` (bytes it read and left unhandled) is handled as
        a read, then reading resumes on the loop; ``end`` True or an exception: the
        socket ended while lent (the exception a read or write failure). ``last_read``
        (``time.monotonic``): when the reader last read, for the idle deadline. The
        bytes go one loop turn later, not inside the caller (which may be sending), or at
        once if the connection is shut before that turn (see :meth:`_shutdown`)."""
        if self._reclaim is None:
            return
        self._reclaim = None
        self._last_read = max(self._last_read, last_read)
        self._returned = (unread, end)
        assert self._loop is not None
        self._loop.call_soon(self._resume)

    def _resume(self) -> None:
        returned, self._returned = self._returned, None
        if returned is None or self.closed is not None:
            return  # handled already: the connection was shut first
        unread, end = returned
        if unread:
            self._on_data(unread)
        if end is False:
            if self.closed is None and self._transport is not None:
                self._transport.resume_reading()
                timer = self._idle_timer
                assert self._loop is not None
                if timer is not None and self._loop.time() >= self._last_read + self._idle_limit:
                    timer.cancel()  # the reader gave up on a silent nsqd: judge it now
                    self._check_idle()
        else:
            self._on_end(None if end is True else end)

    # ------------------------------------------------------------------ reading

    def _start_reading(self, leftover: bytes) -> None:
        """Reads go straight to :meth:`_on_data` from now on (``leftover`` first: what
        the handshake read past its last reply); an idle timer watches for silence."""
        assert self._socket is not None and self._loop is not None
        self._idle_limit = idle_timeout(self.config.heartbeat_interval_ms)
        self._last_read = self._loop.time()
        self._idle_timer = self._loop.call_at(self._last_read + self._idle_limit, self._check_idle)
        if leftover:
            self._on_data(leftover, True)
        self._socket.hand_off(self._on_data, self._on_end)

    def _check_idle(self) -> None:
        # One timer moved lazily, not one per read: a read only stores its time.
        assert self._loop is not None
        self._idle_timer = None
        if self.closed is not None:
            return
        due = self._last_read + self._idle_limit
        if self._reclaim is not None:  # lent: the reader keeps its own idle deadline
            due = self._loop.time() + self._idle_limit
        if self._loop.time() >= due:
            # A hung nsqd (SIGSTOP, a full disk, a stalled VM) keeps its sockets open:
            # this deadline is the only sign of it (the owner reports the close).
            reason = f"not answering: no data or heartbeat for {self._idle_limit:.0f}s"
            log.info("nsqd %s is %s; closing the connection", self.address, reason)
            self._shutdown(ReplyTimeoutError(str(self.address), reason))
            return
        self._idle_timer = self._loop.call_at(due, self._check_idle)

    def _on_data(self, chunk: bytes, decoded: bool = False) -> None:
        """One read from the socket (``decoded``: already decompressed): the session
        decodes it, messages and replies go on, then what the handlers answered leaves in
        one write."""
        if self.closed is not None:
            return
        assert self._loop is not None
        self._last_read = self._loop.time()
        self._in_read = True
        reason: ConnectionClosedError | None = None
        on_messages = self.on_messages
        try:
            for event in self._session.receive_data(chunk, decoded):
                if event.__class__ is list:  # a run of messages (the hot path)
                    if on_messages is not None:
                        on_messages(self, event)
                    else:
                        self._deliver(event)
                else:
                    self._on_event(event)
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

    def _on_event(self, event: SessionEvent) -> None:
        """Every event of a read but a run of messages."""
        if isinstance(event, SendData):
            self.send(event.data)
        elif isinstance(event, ServerNotice):
            if self.on_error is not None:
                self.on_error(self, event.error)
            else:
                log.warning("nsqd %s: %s", self.address, event.error)
        elif isinstance(event, Fatal):
            self._shutdown(ConnectionClosedError(str(self.address), event.reason))
        elif isinstance(event, CloseWaitReceived):
            if self._close_wait is not None and not self._close_wait.done():
                self._close_wait.set_result(None)
        elif isinstance(event, UnsolicitedReply):
            log.debug("unsolicited response %r from %s", event.data[:64], self.address)

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

    # ------------------------------------------------------------------ closing

    async def close(self, timeout: float = 5.0) -> None:
        """Clean close: CLS and wait for CLOSE_WAIT when subscribed, read on until nsqd
        is quiet (see :data:`CLOSE_WAIT_QUIET`), then drain and close. Cancelled, it
        raises CancelledError having closed the socket all the same (at once).

        A socket is closed gracefully only once what was written is drained: with bytes
        still buffered for a peer that reads nothing, a graceful close would wait for
        them for ever, the socket left open. So when the drain (or the close that
        follows) does not end within ``timeout``, or the close is cancelled, the socket
        is aborted, what is still buffered dropped."""
        if self._reclaim is not None:
            self._reclaim()
        sock = self._socket
        drained = False
        try:
            if self.closed is None and self._transport is not None and sock is not None:
                if self.subscribed is not None and self._loop is not None:
                    self._close_wait = self._loop.create_future()
                    fut: asyncio.Future[bytes] | None = None
                    try:
                        with contextlib.suppress(NsqctlError, TimeoutError):
                            fut = self.request_nowait(p.cls(), "cls")
                            async with asyncio.timeout(timeout):
                                await asyncio.shield(self._close_wait)
                            await self._read_until_quiet(CLOSE_WAIT_QUIET, timeout)
                    finally:
                        if fut is not None:
                            fut.cancel()
                self._flush()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await sock.drain()
                        drained = True
        finally:
            reason = ConnectionClosedError(str(self.address), "closed by the client")
            self._shutdown(reason, abort=not drained)
        if sock is not None:
            closed = False
            try:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await sock.wait_closed()
                        closed = True
            finally:
                if not closed:  # drained below the high-water mark only, and stuck
                    self._abort()

    async def _read_until_quiet(self, quiet: float, limit: float) -> None:
        """Keep reading (each read handled as always) until ``quiet`` seconds pass
        without one, or ``limit`` seconds in all."""
        loop = self._loop
        assert loop is not None
        deadline = loop.time() + limit
        while self.closed is None:
            due = min(self._last_read + quiet, deadline)
            now = loop.time()
            if now >= due:
                return
            await asyncio.sleep(due - now)

    def _abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()

    def _shutdown(self, reason: ConnectionClosedError, *, abort: bool = False) -> None:
        """Mark closed once: fail pending requests, close the socket (``abort``: at once,
        dropping what is still buffered), tell the owner."""
        if self.closed is not None:
            return
        if self._reclaim is not None:
            self._reclaim()  # the reader lets go of the socket before it closes
        returned, self._returned = self._returned, None
        if returned is not None and returned[0]:
            # The reader's unhandled bytes may hold whole messages nsqd sent: handled
            # now, while the owner can still answer them on this socket (a closing
            # consumer gives them back), not dropped to sit in flight until nsqd's
            # msg-timeout. The socket's own end, if it came too, changes nothing now.
            self._on_data(returned[0])
            if self.closed is not None:
                return  # handling them shut the connection (a failed write): owner told
        self.closed = reason
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        self._deadlines.clear()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._session.fail_pending(reason)
        self._out.clear()
        if self._transport is not None:
            if abort:
                self._transport.abort()
            else:
                self._transport.close()
        if self.on_close is not None:
            cause = None if reason.reason == "closed by the client" else reason
            self.on_close(self, cause)


def _fmt_peer(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "")
