"""The client side of nsqd's handshake as a sans-IO state machine (the way h11 works).

magic + IDENTIFY → the IDENTIFY reply → [TLS upgrade, then ``OK`` inside TLS] →
[compression upgrade, then ``OK`` through the codec] → [AUTH, then its JSON reply].

The transport feeds the bytes it reads (:meth:`Handshake.receive_data`) and carries
out the events it gets back, in order: write :class:`SendData` (through the codec it was
last told about by :class:`SwitchCodec`), upgrade the socket on :class:`StartTLS` and
then call :meth:`Handshake.tls_started`. :class:`Ready` ends the handshake and hands
over what was already read of the session.

Why the machine reads frame by frame instead of through :class:`FrameDecoder`: each
upgrade changes what the following bytes are. After the IDENTIFY reply that accepts TLS
come TLS records, and after the reply that accepts compression (or the TLS ``OK``) comes
compressed data. So the machine takes exactly one frame at a time from its buffer
(:func:`split_frame`); bytes left after a frame that switches the codec are decompressed
as the first bytes of the compressed stream, and bytes left before a TLS upgrade are an
error (nsqd cannot send anything before the client's TLS hello).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, NamedTuple, NoReturn

from nsqctl.errors import ConnectError, HandshakeTimeoutError, TLSError, UsageError
from nsqctl.protocol.commands import MAGIC_V2, auth, identify
from nsqctl.protocol.compression import Codec, IdentityCodec, codec_for
from nsqctl.protocol.errors import (
    AuthRequiredError,
    FrameDecodeError,
    TLSNotOfferedError,
    error_from_frame,
)
from nsqctl.protocol.frames import DEFAULT_MAX_FRAME_SIZE, OK, FrameType, split_frame
from nsqctl.protocol.replies import (
    AuthResponse,
    IdentifyResponse,
    parse_auth_response,
    parse_identify_response,
)
from nsqctl.secrets import Secret

__all__ = [
    "TLS_STATES",
    "Authenticated",
    "Handshake",
    "HandshakeEvent",
    "HandshakeState",
    "HandshakeTimeoutError",
    "Identified",
    "Ready",
    "SendData",
    "StartTLS",
    "SwitchCodec",
    "tls_upgrade_lost",
]

# An HTTP server answers the magic and IDENTIFY line with "HTTP/1.1 400 Bad Request":
# read as a frame header, "HTTP" is a size of 1213486160.
_HTTP = b"HTTP"


# --------------------------------------------------------------------------- events


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class SendData(NamedTuple):
    """Write ``data`` (through the current codec). Its repr hides the bytes: AUTH's
    carry the secret."""

    data: bytes

    def __repr__(self) -> str:
        return f"SendData(<{len(self.data)} bytes>)"


class StartTLS(NamedTuple):
    """Upgrade the socket to TLS now, then call :meth:`Handshake.tls_started`."""


class SwitchCodec(NamedTuple):
    """From now on, writes go through ``codec`` (reads already do, inside the machine)."""

    codec: Codec


class Identified(NamedTuple):
    """nsqd answered IDENTIFY with these settings."""

    response: IdentifyResponse


class Authenticated(NamedTuple):
    """nsqd accepted the AUTH secret."""

    response: AuthResponse


class Ready(NamedTuple):
    """The handshake is done. ``leftover``: bytes the server sent after its last
    handshake reply, already decompressed - the session's first input."""

    leftover: bytes


HandshakeEvent = SendData | StartTLS | SwitchCodec | Identified | Authenticated | Ready


class HandshakeState(Enum):
    """Where the handshake is; the ``AWAIT_*`` states wait for one reply frame."""

    START = "start"
    AWAIT_IDENTIFY = "await_identify"
    AWAIT_TLS_START = "await_tls_start"  # the transport is upgrading; no bytes may come
    AWAIT_TLS_OK = "await_tls_ok"
    AWAIT_COMPRESSION_OK = "await_compression_ok"
    AWAIT_AUTH = "await_auth"
    DONE = "done"
    FAILED = "failed"


#: Where a lost connection means the TLS upgrade failed (nsqd dropped our hello or our
#: certificate, or closed instead of its OK inside TLS), not the plain handshake.
TLS_STATES = frozenset({HandshakeState.AWAIT_TLS_START, HandshakeState.AWAIT_TLS_OK})


def tls_upgrade_lost(peer: str) -> TLSError:
    """nsqd closed the connection while it was being upgraded to TLS."""
    return TLSError(
        f"nsqd {peer} closed the connection during the TLS upgrade: check that it offers "
        "TLS on this port and accepts our TLS settings",
        setting="tls",
    )


# --------------------------------------------------------------------------- the machine


class Handshake:
    """One connection's handshake; create it, call :meth:`start`, feed it bytes.

    ``identify_body``: the IDENTIFY JSON; ``peer``: the address, for messages;
    ``tls``: TLS was asked for (the body's ``tls_v1``); ``compression``: the codec asked
    for ("none", "snappy", "deflate"); ``auth_secret``: sent only when nsqd requires AUTH.

    Every method returns the events to carry out, or raises: a :class:`ConnectError`
    when the server cannot give what was asked for (with ``setting`` naming the library
    setting to change), a :class:`ServerError` for an error frame, a
    :class:`ProtocolError` for bytes that are not the protocol. After raising, the
    machine is :attr:`HandshakeState.FAILED` and the connection must be dropped.
    """

    def __init__(
        self,
        identify_body: Mapping[str, Any],
        *,
        peer: str,
        tls: bool = False,
        compression: str = "none",
        auth_secret: Secret | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        self.peer = peer
        self.tls = tls
        self.compression = compression
        self.max_frame_size = max_frame_size
        self.identify: IdentifyResponse | None = None
        self.auth: AuthResponse | None = None
        self.state = HandshakeState.START
        self._body = dict(identify_body)
        self._secret = auth_secret
        self._codec: Codec | None = None  # set once compression is on
        self._buf = bytearray()  # decompressed once the codec is on

    @property
    def codec(self) -> Codec:
        """The codec the session reads and writes through."""
        return self._codec or IdentityCodec()

    @property
    def secret_unused(self) -> bool:
        """A secret was given but nsqd did not ask for AUTH, so it was not sent."""
        return self.state is HandshakeState.DONE and self._secret is not None and self.auth is None

    def start(self) -> list[HandshakeEvent]:
        """The magic and IDENTIFY."""
        self._expect(HandshakeState.START)
        self.state = HandshakeState.AWAIT_IDENTIFY
        return [SendData(MAGIC_V2 + identify(self._body))]

    def tls_started(self) -> list[HandshakeEvent]:
        """The transport finished the TLS upgrade; nsqd's ``OK`` comes inside TLS."""
        self._expect(HandshakeState.AWAIT_TLS_START)
        self.state = HandshakeState.AWAIT_TLS_OK
        return []

    def receive_eof(self) -> NoReturn:
        """The server closed the socket before the handshake ended."""
        if self.state in (HandshakeState.DONE, HandshakeState.FAILED):
            raise UsageError(f"the handshake is {self.state.value}: the transport owns EOF now")
        if self.state in TLS_STATES:
            self._fail(tls_upgrade_lost(self.peer))
        partial = f" ({len(self._buf)} bytes into an unfinished frame)" if self._buf else ""
        self._fail(
            ConnectError(f"nsqd {self.peer} closed the connection during the handshake{partial}")
        )

    def receive_data(self, data: bytes) -> list[HandshakeEvent]:
        """Bytes read from the socket (decrypted by TLS, not decompressed)."""
        if self.state is HandshakeState.AWAIT_TLS_START:
            self._fail(
                FrameDecodeError(
                    f"nsqd {self.peer} sent {len(data)} bytes before the TLS upgrade "
                    "(expected nothing until our TLS hello)"
                )
            )
        if self.state in (HandshakeState.START, HandshakeState.DONE, HandshakeState.FAILED):
            raise UsageError(f"the handshake cannot take data when {self.state.value}")
        try:
            self._buf += self._codec.decompress(data) if self._codec is not None else data
            return self._advance()
        except BaseException:
            self.state = HandshakeState.FAILED
            raise

    # ------------------------------------------------------------------ steps

    def _advance(self) -> list[HandshakeEvent]:
        events: list[HandshakeEvent] = []
        while self.state not in (HandshakeState.DONE, HandshakeState.AWAIT_TLS_START):
            data = self._next_reply()
            if data is None:
                break
            if self.state is HandshakeState.AWAIT_IDENTIFY:
                self._on_identify(data, events)
            elif self.state is HandshakeState.AWAIT_TLS_OK:
                self._require_ok(data, "after the TLS upgrade")
                self._after_tls(events)
            elif self.state is HandshakeState.AWAIT_COMPRESSION_OK:
                self._require_ok(data, f"after switching on {self.codec.name}")
                self._after_compression(events)
            else:
                self.auth = parse_auth_response(data)
                events.append(Authenticated(self.auth))
                self._finish(events)
        return events

    def _next_reply(self) -> bytes | None:
        """The next whole frame's data, consumed from the buffer and nothing more."""
        buf = self._buf
        if self.state is HandshakeState.AWAIT_IDENTIFY and buf[:4] == _HTTP[: len(buf)]:
            if len(buf) < len(_HTTP):
                return None
            raise ConnectError(
                f"{self.peer} answered like an HTTP server: this looks like nsqd's HTTP "
                "port; connect to nsqd's TCP port (4150 by default)",
                setting="nsqd_tcp",
            )
        frame = split_frame(buf, self.max_frame_size)
        if frame is None:
            return None
        frame_type, data, used = frame
        del buf[:used]
        context = self._context()
        if frame_type == FrameType.ERROR:
            raise error_from_frame(data, context=context)
        if frame_type != FrameType.RESPONSE:
            raise FrameDecodeError(f"unexpected frame type {int(frame_type)} during {context}")
        return data

    def _context(self) -> str:
        return {
            HandshakeState.AWAIT_IDENTIFY: "identify",
            HandshakeState.AWAIT_TLS_OK: "tls",
            HandshakeState.AWAIT_COMPRESSION_OK: "compression",
            HandshakeState.AWAIT_AUTH: "auth",
        }.get(self.state, "handshake")

    def _require_ok(self, data: bytes, when: str) -> None:
        if data != OK:
            raise ConnectError(f"nsqd {self.peer} answered {data[:64]!r} {when}, not OK")

    def _on_identify(self, data: bytes, events: list[HandshakeEvent]) -> None:
        ident = parse_identify_response(data)
        self.identify = ident
        events.append(Identified(ident))
        if not self.tls:
            self._after_tls(events)
            return
        if not ident.tls_v1:
            raise TLSNotOfferedError(self.peer)
        if self._buf:
            raise FrameDecodeError(
                f"nsqd {self.peer} sent {len(self._buf)} bytes after its IDENTIFY reply, "
                "before the TLS upgrade"
            )
        self.state = HandshakeState.AWAIT_TLS_START
        events.append(StartTLS())

    def _after_tls(self, events: list[HandshakeEvent]) -> None:
        assert self.identify is not None
        ident = self.identify
        if self.compression != "none" and not (ident.snappy or ident.deflate):
            raise ConnectError(
                f"nsqd {self.peer} refused {self.compression} compression: connect without "
                "compression, or enable it on the server",
                setting="compression",
            )
        codec = codec_for(ident)
        if isinstance(codec, IdentityCodec):
            self._after_compression(events)
            return
        # The compression OK is the first compressed frame: what is buffered past the
        # last reply is already compressed.
        self._codec = codec
        pending = bytes(self._buf)
        self._buf = bytearray(codec.decompress(pending) if pending else b"")
        self.state = HandshakeState.AWAIT_COMPRESSION_OK
        events.append(SwitchCodec(codec))

    def _after_compression(self, events: list[HandshakeEvent]) -> None:
        assert self.identify is not None
        if not self.identify.auth_required:
            self._finish(events)
            return
        if self._secret is None:
            raise AuthRequiredError(self.peer)
        self.state = HandshakeState.AWAIT_AUTH
        events.append(SendData(auth(self._secret.reveal())))

    def _finish(self, events: list[HandshakeEvent]) -> None:
        self.state = HandshakeState.DONE
        leftover = bytes(self._buf)
        self._buf.clear()
        events.append(Ready(leftover))

    def _expect(self, state: HandshakeState) -> None:
        if self.state is not state:
            raise UsageError(
                f"handshake step out of order: in state {self.state.value}, not {state.value}"
            )

    def _fail(self, err: Exception) -> NoReturn:
        self.state = HandshakeState.FAILED
        raise err
