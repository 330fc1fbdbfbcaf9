"""Server → client framing: ``[4B size][4B frame type][data]``, size counting type + data.

The decoder is sans-IO and built for throughput: a consumer at full speed receives
hundreds of thousands of small message frames a second. So the hot loop never re-copies
the unread tail per frame, skips parsing entirely while a large frame is still arriving,
and (:meth:`FrameDecoder.feed_events`) decodes message frames in the same pass that
splits them - one ``struct.unpack_from`` and two slices per original-layout message -
and groups consecutive messages into one batch, so the consumer's per-message
bookkeeping can be done once per batch.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple, NoReturn, cast

from nsqctl.errors import ProtocolError
from nsqctl.protocol.errors import FrameDecodeError
from nsqctl.protocol.raw_message import (
    MAX_ATTEMPTS_REDESIGN,
    MessageLayout,
    RawMessage,
    decode_message,
)

__all__ = [
    "CLOSE_WAIT",
    "DEFAULT_MAX_FRAME_SIZE",
    "HEARTBEAT",
    "OK",
    "Frame",
    "FrameDecoder",
    "FrameEvent",
    "FrameType",
    "encode_frame",
    "split_frame",
]

HEARTBEAT = b"_heartbeat_"
OK = b"OK"
CLOSE_WAIT = b"CLOSE_WAIT"

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024

_HEADER = struct.Struct(">II")
_HEADER_SIZE = _HEADER.size
# size, frame type, then the original message layout's timestamp and attempts (18 bytes);
# the 16-byte id and the body follow.
_ORIGINAL_MESSAGE = struct.Struct(">IIQH")
_ORIGINAL_MIN = _ORIGINAL_MESSAGE.size + 16
# A redesign message without ext header: frame header, timestamp, attempts, the 16-byte id
# as internal id + trace id; then (ordered layout) the disk-queue offset and raw size.
_REDESIGN_MESSAGE = struct.Struct(">IIQHQQ")
_REDESIGN_MIN = _REDESIGN_MESSAGE.size
_REDESIGN_DETAIL = struct.Struct(">QI")
_REDESIGN_DETAIL_MIN = _REDESIGN_MIN + _REDESIGN_DETAIL.size
_MESSAGE = 2


class FrameType(IntEnum):
    """The frame types both server families send."""

    RESPONSE = 0
    ERROR = 1
    MESSAGE = 2


_TYPES = (FrameType.RESPONSE, FrameType.ERROR, FrameType.MESSAGE)


class Frame(NamedTuple):
    """One decoded frame; ``data`` excludes the size and type header."""

    type: FrameType
    data: bytes


#: What :meth:`FrameDecoder.feed_events` returns: a run of consecutive messages, or any
#: other frame as ``(frame type, data)``.
FrameEvent = list[RawMessage] | tuple[int, bytes]


def encode_frame(frame_type: int, data: bytes) -> bytes:
    """Encode one frame as a server would (for tests and fake servers)."""
    return _HEADER.pack(len(data) + 4, int(frame_type)) + data


def split_frame(
    buf: bytes | bytearray, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
) -> tuple[FrameType, bytes, int] | None:
    """The first frame of ``buf`` as ``(frame type, data, bytes it took)``, or None while
    it is incomplete; raise :class:`FrameDecodeError` for an impossible header.

    For the handshake, which must stop exactly after one frame: what follows may be TLS
    records or compressed bytes, which :class:`FrameDecoder` would misread as frames.
    """
    if len(buf) < _HEADER_SIZE:
        return None
    size, frame_type = _HEADER.unpack_from(buf)
    if size < 4 or size > max_frame_size or frame_type > 2:
        _reject(size, frame_type, max_frame_size)
    stop = 4 + size
    if len(buf) < stop:
        return None
    return _TYPES[frame_type], bytes(buf[_HEADER_SIZE:stop]), stop


class FrameDecoder:
    """Incremental frame decoder; feed it bytes in any chunking, get whole frames back.

    After a :class:`FrameDecodeError` (or, from :meth:`feed_events`, a malformed message)
    the stream is unusable: every later feed raises the same error, and the connection
    must be dropped.
    """

    __slots__ = ("_buf", "_error", "_need", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 4:
            raise ValueError("max_frame_size must be at least 4")
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        # Bytes the buffer must hold before parsing can make progress: avoids
        # re-scanning (and copying) a large frame that arrives in many small chunks.
        self._need = _HEADER_SIZE
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        """Add ``data`` and return every frame it completes (possibly none)."""
        new = tuple.__new__
        types = _TYPES
        frames = cast("list[tuple[int, bytes]]", self.feed_events(data, None))
        return [new(Frame, (types[t], d)) for t, d in frames]

    def feed_events(self, data: bytes, layout: MessageLayout | None) -> list[FrameEvent]:
        """Add ``data``; return what it completes, in stream order: each run of
        consecutive MESSAGE frames as one list of messages decoded with ``layout``, every
        other frame (every frame when ``layout`` is None) as ``(frame type, data)``.

        This is the read path of every connection: it is one call, not a wrapper around
        a helper, because an ordered channel delivers one message per read.
        """
        if self._error is not None:
            raise self._error
        buf = self._buf
        # Nothing kept from the last read (the usual case: nsqd sends whole frames, and
        # on an ordered channel every read is one): the read itself is sliced, no copy.
        carried = bool(buf)
        if carried:
            buf += data
            end = len(buf)
            if end < self._need:
                return []
            # One copy of the whole buffer to immutable bytes makes each field a single
            # slice; the `_need` guard above keeps this linear overall.
            view = bytes(buf)
        else:
            view = data if data.__class__ is bytes else bytes(data)
            end = len(view)
            if end < self._need:
                buf += view
                return []
        pos = 0
        out: list[FrameEvent] = []
        append = out.append
        batch: list[RawMessage] | None = None
        unpack_header = _HEADER.unpack_from
        unpack_original = _ORIGINAL_MESSAGE.unpack_from
        new = tuple.__new__
        if layout is None:
            original = redesign = detail = False
        else:
            original = layout.family == "original"
            # the redesign without ext headers is decoded here too; ext frames go the long way
            redesign = layout.family == "redesign" and not layout.ext
            detail = redesign and layout.ordered
        redesign_min = _REDESIGN_DETAIL_MIN if detail else _REDESIGN_MIN
        unpack_redesign = _REDESIGN_MESSAGE.unpack_from
        unpack_detail = _REDESIGN_DETAIL.unpack_from
        max_size = self.max_frame_size
        need = _HEADER_SIZE
        try:
            while end - pos >= _HEADER_SIZE:
                if original and end - pos >= _ORIGINAL_MIN:
                    size, frame_type, ts, attempts = unpack_original(view, pos)
                elif redesign and end - pos >= redesign_min:
                    # the whole fixed part at once (one unpack, not a header and then this)
                    size, frame_type, ts, attempts, internal_id, trace_id = unpack_redesign(
                        view, pos
                    )
                else:
                    size, frame_type = unpack_header(view, pos)
                    ts = -1  # not unpacked
                if size < 4 or size > max_size or frame_type > 2:
                    _reject(size, frame_type, max_size)
                stop = pos + 4 + size
                if stop > end:
                    need = stop - pos
                    break
                if frame_type != _MESSAGE or layout is None:
                    append((frame_type, view[pos + _HEADER_SIZE : stop]))
                    batch = None
                    pos = stop
                    continue
                if original and ts >= 0 and stop - pos >= _ORIGINAL_MIN:
                    msg_id = view[pos + 18 : pos + 34]
                    body = view[pos + 34 : stop]
                    raw = new(
                        RawMessage,
                        (ts, attempts, msg_id, body, None, None, None, None, None, None),
                    )
                elif redesign and ts >= 0 and stop - pos >= redesign_min:
                    if attempts > MAX_ATTEMPTS_REDESIGN:
                        attempts &= 0x0FFF
                    msg_id = view[pos + 18 : pos + 34]
                    if detail:
                        offset, raw_size = unpack_detail(view, pos + 34)
                        body = view[pos + 46 : stop]
                    else:
                        offset = raw_size = None
                        body = view[pos + 34 : stop]
                    raw = new(
                        RawMessage,
                        (
                            ts,
                            attempts,
                            msg_id,
                            body,
                            internal_id,
                            trace_id,
                            None,
                            None,
                            offset,
                            raw_size,
                        ),
                    )
                else:
                    raw = decode_message(view[pos + _HEADER_SIZE : stop], layout)
                if batch is None:
                    batch = []
                    append(batch)
                batch.append(raw)
                pos = stop
        except ProtocolError as err:  # a corrupt frame, or a malformed message
            self._error = err
            self._buf.clear()
            raise
        if carried:
            if pos:
                del buf[:pos]
        elif pos < end:
            buf += view[pos:] if pos else view
        self._need = need
        return out


def _reject(size: int, frame_type: int, max_frame_size: int) -> NoReturn:
    if size < 4 or size > max_frame_size:
        raise FrameDecodeError(
            f"corrupt frame stream: invalid frame size {size} (allowed 4..{max_frame_size})"
        )
    raise FrameDecodeError(f"corrupt frame stream: unknown frame type {frame_type}")
