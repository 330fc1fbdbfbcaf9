"""A connection's protocol state after the handshake, sans-IO: what each frame means.

nsqd answers pipelined requests strictly in order, so replies and error frames are
matched to the oldest pending request; a few errors (``E_FIN_FAILED``,
``E_REQ_FAILED``, ``E_TOUCH_FAILED``) answer commands that have no reply of their own
and must never take a pending request's place. A heartbeat wants a ``NOP``;
``CLOSE_WAIT`` confirms a ``CLS``; a fatal error frame means nsqd is closing the
connection.

The session owns both directions, as h11's connection does: a request that gets a reply
goes through :meth:`Session.request`, which records what it expects (the waiter and the
command's context, matched to the reply or error in order) and returns the bytes to
write; the transport writes them, feeds every read to :meth:`Session.receive_data` and
carries out the events it gets back, in order, and never sees the pending requests.
Commands with no reply of their own (RDY, FIN, REQ, TOUCH, NOP) change no state here,
so the transport writes them as :mod:`.commands` builds them: they are the consumer's
hot path, and a call per FIN to return its argument would only cost. The transport
compresses what it writes (one compressed write per batch of commands).

A waiter is anything with ``done``/``set_result``/``set_exception`` (an
``asyncio.Future`` in the transport, any small object in tests): the session settles
it itself, because a reply per pipelined publish is a producer's hot path and an event
object per reply, handled in a second pass, would cost about as much again. Runs of
messages come back as the decoder's own lists: the read path is what every consumed
message pays for, and on an ordered channel every read is one message, so a read of
messages only costs the decode and one pass over its (usually one) batch.
"""

from __future__ import annotations

import collections
import math
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from nsqctl.protocol.commands import nop
from nsqctl.protocol.compression import Codec, IdentityCodec
from nsqctl.protocol.errors import ServerError, error_from_frame
from nsqctl.protocol.frames import CLOSE_WAIT, DEFAULT_MAX_FRAME_SIZE, HEARTBEAT, FrameDecoder
from nsqctl.protocol.handshake import SendData
from nsqctl.protocol.raw_message import ORIGINAL, MessageLayout, RawMessage

__all__ = [
    "CLOSE_WAIT_RECEIVED",
    "NO_REPLY_ERRORS",
    "SEND_NOP",
    "CloseWaitReceived",
    "Fatal",
    "ServerNotice",
    "Session",
    "SessionEvent",
    "UnsolicitedReply",
    "Waiter",
    "idle_timeout",
]

#: Error codes that answer a command with no success reply (FIN/REQ/TOUCH): they never
#: belong to a pending request.
NO_REPLY_ERRORS = ("E_FIN_FAILED", "E_REQ_FAILED", "E_TOUCH_FAILED")
_RESPONSE = 0


class Waiter(Protocol):
    """What a pending request is settled through (``asyncio.Future[bytes]`` is one)."""

    def done(self) -> bool: ...

    def set_result(self, result: bytes, /) -> None: ...

    def set_exception(self, exception: BaseException, /) -> None: ...


W = TypeVar("W", bound=Waiter)


class ServerNotice(NamedTuple):
    """An error frame that answers no pending request: FIN/REQ/TOUCH failed, or nsqd
    reports an error with nothing pending."""

    error: ServerError


class Fatal(NamedTuple):
    """nsqd closes the connection after the error just reported: close it now; nothing
    after this event was handled."""

    reason: str


class UnsolicitedReply(NamedTuple):
    """A response with nothing pending (not a heartbeat, not ``CLOSE_WAIT``)."""

    data: bytes


class CloseWaitReceived(NamedTuple):
    """nsqd confirmed ``CLS``: it sends no more messages (the pending CLS is settled
    with it too)."""


#: Answer a heartbeat (the one command the protocol itself sends).
SEND_NOP = SendData(nop())
CLOSE_WAIT_RECEIVED = CloseWaitReceived()

SessionEvent = (
    list[RawMessage] | ServerNotice | Fatal | UnsolicitedReply | CloseWaitReceived | SendData
)


def idle_timeout(heartbeat_interval_ms: int) -> float:
    """Seconds of silence after which nsqd is gone: it heartbeats at least every
    interval, so two missed heartbeats plus slack (never under 10 s, so a short interval
    on a loaded machine does not drop healthy connections). A negative interval asks nsqd
    for no heartbeats at all: silence is then no sign of anything, and there is no limit."""
    if heartbeat_interval_ms < 0:
        return math.inf
    return max(heartbeat_interval_ms / 1000.0 * 2 + 5, 10.0)


class Session(Generic[W]):
    """Frames in, events out, for one connection after its handshake.

    ``codec``: the compression the handshake switched on (reads are decompressed here;
    the transport compresses its writes with the same object). ``layout``: how message
    frames are decoded; the transport sets it when it subscribes. After a
    :class:`Fatal` event, or a :class:`ProtocolError` raised by :meth:`receive_data`,
    the session must not be fed again.
    """

    __slots__ = ("_decoder", "_decompress", "_pending", "layout")

    def __init__(
        self, codec: Codec | None = None, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    ) -> None:
        self.layout: MessageLayout = ORIGINAL
        # ``(waiter, context)`` of every request sent and not yet answered, oldest
        # first. A waiter already done (its caller gave up) still takes its reply.
        self._pending: collections.deque[tuple[W, str]] = collections.deque()
        self._decoder = FrameDecoder(max_frame_size)
        # The identity codec would copy every read for nothing.
        self._decompress = (
            None if codec is None or isinstance(codec, IdentityCodec) else codec.decompress
        )

    @property
    def buffered(self) -> int:
        """Bytes of a frame not yet complete (decompressed bytes, with a codec)."""
        return self._decoder.buffered

    @property
    def awaiting(self) -> int:
        """Requests sent and not answered yet."""
        return len(self._pending)

    def request(self, command: bytes, waiter: W, context: str) -> bytes:
        """Send ``command``, which nsqd answers with a reply or an error frame: the answer
        settles ``waiter`` (an error is built for ``context``, e.g. ``"sub"`` or
        ``"pub"``). Returns the bytes to write; the caller must write them, in the order
        of its calls, since answers are matched to requests in that order."""
        self._pending.append((waiter, context))
        return command

    def receive_data(self, data: bytes, decoded: bool = False) -> list[SessionEvent]:
        """One read from the socket (decrypted, still compressed; ``decoded``: already
        decompressed, as what the handshake read past its last reply): its events in
        stream order. Raises :class:`ProtocolError` for a corrupt stream."""
        decompress = self._decompress
        if decompress is not None and not decoded:
            data = decompress(data)
        events: list[Any] = self._decoder.feed_events(data, self.layout)
        for event in events:
            if event.__class__ is not list:
                return self._route(events)
        return events  # message runs only: the decoder's list as it is

    def fail_pending(self, error: BaseException) -> None:
        """The connection closed: every pending request fails with ``error``."""
        pending = self._pending
        while pending:
            waiter, _context = pending.popleft()
            if not waiter.done():
                waiter.set_exception(error)

    def _route(self, events: list[Any]) -> list[SessionEvent]:
        out: list[SessionEvent] = []
        pending = self._pending
        for event in events:
            if event.__class__ is list:
                out.append(event)
                continue
            frame_type, data = event
            if frame_type == _RESPONSE:
                if data == HEARTBEAT:
                    out.append(SEND_NOP)
                    continue
                if data == CLOSE_WAIT:
                    out.append(CLOSE_WAIT_RECEIVED)  # CLS is pending too: settled below
                if pending:
                    waiter = pending.popleft()[0]
                    if not waiter.done():
                        waiter.set_result(data)
                elif data != CLOSE_WAIT:
                    out.append(UnsolicitedReply(data))
                continue
            err = self._error(data, out)
            if err.fatal:
                out.append(Fatal(str(err)))
                break
        return out

    def _error(self, data: bytes, out: list[SessionEvent]) -> ServerError:
        pending = self._pending
        code = data.split(b" ", 1)[0].decode("ascii", "replace")
        if code.startswith(NO_REPLY_ERRORS) or not pending:
            context = code.lower().removeprefix("e_").split("_")[0]
            err = error_from_frame(data, context=context)
            out.append(ServerNotice(err))
            return err
        waiter, context = pending.popleft()
        err = error_from_frame(data, context=context)
        if not waiter.done():
            waiter.set_exception(err)
        return err
