"""An nsqctl Consumer fed pre-encoded frames in this process: no nsqd, no socket.

The CPU benchmarks (``bench_consumer.py --cpu``, ``cpu_ordered.py``) measure the Python
cost per message of the consume path alone, which is stable on a noisy machine and what a
change to the hot path should move. They wire a :class:`~nsqctl.connection.Connection`
past its handshake onto a transport that only counts what is written, and then call
``SocketProtocol.data_received`` the way asyncio does after the hand-off. This reaches
into private attributes of Connection and Consumer (a benchmark, not an API), all here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from nsqctl.addresses import parse_address
from nsqctl.connection import Connection
from nsqctl.connection.stream import SocketProtocol
from nsqctl.consumer import Consumer
from nsqctl.protocol.raw_message import MessageLayout


class CountingTransport(asyncio.Transport):
    """Takes every write and keeps only its size (the FINs and RDYs a consumer sends)."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self.writes = 0

    def write(self, data: Any) -> None:
        self.written += len(data)
        self.writes += 1

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


def attach(
    consumer: Consumer,
    address: str,
    partition: int | None = None,
    layout: MessageLayout | None = None,
) -> tuple[SocketProtocol, CountingTransport, Connection]:
    """A connection of ``consumer`` to ``address`` (``partition``), subscribed as far as the
    consumer knows, reading with ``layout``; feed it with ``protocol.data_received``."""
    loop = asyncio.get_running_loop()
    conn = Connection(address, consumer.config, on_messages=consumer._on_messages)
    transport = CountingTransport()
    sock = SocketProtocol()
    sock.connection_made(transport)
    conn._loop = loop
    conn._socket = sock
    conn._transport = transport
    if layout is not None:
        conn.layout = layout
    conn._start_reading(b"")
    consumer._connected((parse_address(address), partition), conn)
    return sock, transport, conn
