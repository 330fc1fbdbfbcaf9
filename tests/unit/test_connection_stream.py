"""HandoffReader: the handshake reads through StreamReader's buffer; after hand_off every
chunk, the end and a read error go straight to the connection, in order, none lost."""

from __future__ import annotations

import asyncio

from nsqctl.connection.stream import READ_SIZE, HandoffReader


class Sink:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.ends: list[BaseException | None] = []

    def data(self, chunk: bytes) -> None:
        self.chunks.append(chunk)

    def end(self, exc: BaseException | None) -> None:
        self.ends.append(exc)


async def test_buffered_bytes_go_first_then_reads_pass_straight_through() -> None:
    reader = HandoffReader(READ_SIZE, asyncio.get_running_loop())
    reader.feed_data(b"reply+leftover")
    assert await reader.readexactly(6) == b"reply+"  # the handshake's exact read
    sink = Sink()
    reader.hand_off(sink.data, sink.end)
    assert sink.chunks == [b"leftover"]
    reader.feed_data(b"next")
    reader.feed_data(b"and more")
    assert sink.chunks == [b"leftover", b"next", b"and more"]
    assert sink.ends == []
    reader.feed_eof()
    assert sink.ends == [None]


async def test_nothing_buffered_hands_off_no_empty_chunk() -> None:
    reader = HandoffReader(READ_SIZE, asyncio.get_running_loop())
    sink = Sink()
    reader.hand_off(sink.data, sink.end)
    assert sink.chunks == [] and sink.ends == []


async def test_a_read_error_after_hand_off_reaches_the_connection() -> None:
    reader = HandoffReader(READ_SIZE, asyncio.get_running_loop())
    sink = Sink()
    reader.hand_off(sink.data, sink.end)
    err = ConnectionResetError(104, "reset")
    reader.set_exception(err)
    assert sink.ends == [err]


async def test_an_end_during_the_handshake_is_reported_at_hand_off() -> None:
    """The server closed right after its last handshake reply, before the switch."""
    reader = HandoffReader(READ_SIZE, asyncio.get_running_loop())
    reader.feed_data(b"tail")
    reader.feed_eof()
    sink = Sink()
    reader.hand_off(sink.data, sink.end)
    assert sink.chunks == [b"tail"] and sink.ends == [None]
    failed = HandoffReader(READ_SIZE, asyncio.get_running_loop())
    err = ConnectionResetError(104, "reset")
    failed.set_exception(err)
    sink = Sink()
    failed.hand_off(sink.data, sink.end)
    assert sink.ends == [err]


async def test_reads_are_64_kib_not_asyncios_256() -> None:
    """asyncio allocates its whole read size for every recv(): 256 KiB cost ~15 us a read
    here. If a Python version renames the transport's knob, this says so."""
    from nsqctl.connection.stream import TRANSPORT_READ_SIZE, open_stream

    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        _reader, writer = await open_stream("127.0.0.1", port)
        assert writer.transport.max_size == TRANSPORT_READ_SIZE == 64 * 1024  # type: ignore[attr-defined]
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
