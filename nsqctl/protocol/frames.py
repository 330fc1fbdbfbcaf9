"""Server → client framing: ``[4B size][4B frame type][data]``, size counting type + data.

The decoder is sans-IO and built for throughput: a consumer at full speed receives
hundreds of thousands of small message frames a second, so the hot loop does one
``struct.unpack_from`` and one slice per frame, never re-copies the unread tail per
frame, and skips parsing entirely while a large frame is still arriving.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple, NoReturn

from nsqctl.protocol.errors import FrameDecodeError

__all__ = [
    "CLOSE_WAIT",
    "DEFAULT_MAX_FRAME_SIZE",
    "HEARTBEAT",
    "OK",
    "Frame",
    "FrameDecoder",
    "FrameType",
    "encode_frame",
]

HEARTBEAT = b"_heartbeat_"
OK = b"OK"
CLOSE_WAIT = b"CLOSE_WAIT"

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024

_HEADER = struct.Struct(">II")
_HEADER_SIZE = _HEADER.size


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


def encode_frame(frame_type: int, data: bytes) -> bytes:
    """Encode one frame as a server would (for tests and fake servers)."""
    return _HEADER.pack(len(data) + 4, int(frame_type)) + data


class FrameDecoder:
    """Incremental frame decoder; feed it bytes in any chunking, get whole frames back.

    After a :class:`FrameDecodeError` the stream is out of sync: every later ``feed``
    raises the same error, and the connection must be dropped.
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
        self._error: FrameDecodeError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Frame]:
        """Add ``data`` and return every frame it completes (possibly none)."""
        new = tuple.__new__
        types = _TYPES
        return [new(Frame, (types[t], d)) for t, d in self.feed_pairs(data)]

    def feed_pairs(self, data: bytes) -> list[tuple[int, bytes]]:
        """Like :meth:`feed`, with plain ``(type as int, data)`` tuples (the hot path of
        a connection: one fewer object per frame)."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        buf += data
        end = len(buf)
        if end < self._need:
            return []
        # One copy of the whole buffer to immutable bytes makes each frame a single
        # slice; the `_need` guard above keeps this linear overall.
        view = bytes(buf)
        pos = 0
        out: list[tuple[int, bytes]] = []
        append = out.append
        unpack = _HEADER.unpack_from
        max_size = self.max_frame_size
        need = _HEADER_SIZE
        while end - pos >= _HEADER_SIZE:
            size, frame_type = unpack(view, pos)
            if size < 4 or size > max_size:
                self._fail(f"invalid frame size {size} (allowed 4..{max_size})")
            if frame_type > 2:
                self._fail(f"unknown frame type {frame_type}")
            stop = pos + 4 + size
            if stop > end:
                need = stop - pos
                break
            append((frame_type, view[pos + _HEADER_SIZE : stop]))
            pos = stop
        if pos:
            del buf[:pos]
        self._need = need
        return out

    def _fail(self, reason: str) -> NoReturn:
        self._error = FrameDecodeError(f"corrupt frame stream: {reason}")
        self._buf.clear()
        raise self._error
