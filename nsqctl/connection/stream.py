"""The socket under a :class:`~nsqctl.connection.Connection`: an ``asyncio.Protocol``
that buffers reads for the handshake, then hands every read straight to the connection.

There is no reader task after the handshake: each read is decoded and handled inside
the transport's callback, and what the handlers answered (FIN, RDY) leaves in one write
before it returns. On an ordered channel, where nsqd sends the next message only after
the FIN of the last, that makes a round trip one event-loop turn instead of three (wake
a reader task, run it, flush), and every message pays that turn.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import cast

# asyncio's socket transport allocates its whole read size for every recv() (256 KiB by
# default), and on an ordered channel every read is one small message. 64 KiB still
# takes nsqd's whole output buffer (16 KiB by default) in one read.
TRANSPORT_READ_SIZE = 64 * 1024

DataSink = Callable[[bytes], None]
EndSink = Callable[[BaseException | None], None]


class SocketProtocol(asyncio.Protocol):
    """Reads are buffered (:meth:`read`) until :meth:`hand_off`; from then on each read,
    the end of the stream and a read error go straight to the connection, in order.

    Also the write side's flow control (:meth:`drain`) and the close (:meth:`wait_closed`).
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._chunks: collections.deque[bytes] = collections.deque()
        self._ended = False
        self._error: BaseException | None = None
        self._wake: asyncio.Future[None] | None = None
        self._on_data: DataSink | None = None
        self._on_end: EndSink | None = None
        self._paused = False
        self._drained: asyncio.Future[None] | None = None
        self._lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # not an isinstance check: other loops' transports (uvloop's) do not subclass it
        self.transport = cast(asyncio.Transport, transport)
        if isinstance(getattr(transport, "max_size", None), int):  # the selector transport's
            transport.max_size = TRANSPORT_READ_SIZE  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        on_data = self._on_data
        if on_data is not None:
            on_data(data)
            return
        self._chunks.append(data)
        self._wakeup()

    def eof_received(self) -> bool:
        self._end(None)
        return False  # close the transport: nsqd never half-closes on purpose

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)
        if not self._lost.done():
            self._lost.set_result(None)
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)  # a drain waiter wakes up; the close is reported apart

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)

    # ------------------------------------------------------------------ handshake side

    async def read(self) -> bytes:
        """The bytes read since the last call, waiting for some; ``b""`` at the end of the
        stream; a read error is raised. Only before :meth:`hand_off`."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._ended:
                return b""
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._wake
            finally:
                self._wake = None
        data = b"".join(self._chunks)
        self._chunks.clear()
        return data

    @property
    def buffered(self) -> int:
        """Bytes read but not yet taken by :meth:`read`."""
        return sum(map(len, self._chunks))

    def hand_off(self, on_data: DataSink, on_end: EndSink) -> None:
        """From now on, deliver directly; what is still buffered goes first."""
        left = b"".join(self._chunks)
        self._chunks.clear()
        self._on_data, self._on_end = on_data, on_end
        if left:
            on_data(left)
        if self._ended:  # the server closed right after its last handshake reply
            self._on_end = None
            on_end(self._error)

    def upgraded(self, transport: asyncio.Transport) -> None:
        """``loop.start_tls`` replaced the transport (it keeps this protocol)."""
        self.transport = transport

    # ------------------------------------------------------------------ both sides

    async def drain(self) -> None:
        """Wait while the transport's write buffer is above its high-water mark."""
        while self._paused and not self._lost.done():
            self._drained = asyncio.get_running_loop().create_future()
            try:
                await self._drained
            finally:
                self._drained = None

    async def wait_closed(self) -> None:
        """Wait until the transport has closed the socket."""
        await asyncio.shield(self._lost)

    def _end(self, exc: BaseException | None) -> None:
        if self._ended:
            return
        self._ended = True
        self._error = exc
        on_end = self._on_end
        if on_end is not None:
            self._on_end = None
            on_end(exc)
        else:
            self._wakeup()

    def _wakeup(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)


async def open_socket(host: str, port: int) -> SocketProtocol:
    """A TCP connection to ``host:port`` with a :class:`SocketProtocol` on it."""
    loop = asyncio.get_running_loop()
    _transport, protocol = await loop.create_connection(SocketProtocol, host, port)
    return protocol
