"""The socket under a :class:`~nsqctl.connection.Connection`: a StreamReader for the
handshake's exact reads that afterwards hands every chunk straight to the connection.

There is no reader task after the handshake: each chunk is decoded and handled inside
the transport's callback, and what the handlers answered (FIN, RDY) leaves in one write
before it returns. On an ordered channel, where nsqd sends the next message only after
the FIN of the last, that is a round trip in one event-loop turn instead of three (wake
a reader task, run it, flush): tail --ordered went from ~75 to ~55-60 µs of CPU a message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

READ_SIZE = 256 * 1024
# asyncio's socket transport reads up to 256 KiB per recv(), allocating that much each
# time: ~15 us per read here, where a 64 KiB read costs ~3 us - and on an ordered channel
# every read is one message. 64 KiB still takes nsqd's whole output buffer (16 KiB by
# default) in one read.
TRANSPORT_READ_SIZE = 64 * 1024


class HandoffReader(asyncio.StreamReader):
    """A StreamReader for the handshake that, once :meth:`hand_off` is called, passes
    every chunk, the end of the stream and a read error straight to the connection
    instead of buffering them for a reader task."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self._on_data: Callable[[bytes], None] | None = None
        self._on_end: Callable[[BaseException | None], None] | None = None

    def hand_off(
        self, on_data: Callable[[bytes], None], on_end: Callable[[BaseException | None], None]
    ) -> None:
        """From now on, deliver directly; what the handshake left buffered goes first."""
        self._on_data, self._on_end = on_data, on_end
        failed = self.exception()
        # StreamReader keeps unread bytes in ``_buffer`` (a bytearray) on every CPython 3.
        left = bytes(self._buffer)
        self._buffer.clear()
        if left:
            on_data(left)
        if failed is not None:
            on_end(failed)
        elif self._eof:
            on_end(None)

    def feed_data(self, data: bytes) -> None:
        if self._on_data is not None:
            self._on_data(data)
        else:
            super().feed_data(data)

    def feed_eof(self) -> None:
        if self._on_end is not None:
            self._on_end(None)
        else:
            super().feed_eof()

    def set_exception(self, exc: BaseException) -> None:
        if self._on_end is not None:
            self._on_end(exc)
        else:
            super().set_exception(exc)


async def open_stream(host: str, port: int) -> tuple[HandoffReader, asyncio.StreamWriter]:
    """``asyncio.open_connection`` with a :class:`HandoffReader`."""
    loop = asyncio.get_running_loop()
    reader = HandoffReader(READ_SIZE, loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport, _ = await loop.create_connection(lambda: protocol, host, port)
    if isinstance(getattr(transport, "max_size", None), int):  # the selector transport's
        transport.max_size = TRANSPORT_READ_SIZE  # type: ignore[attr-defined]
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
