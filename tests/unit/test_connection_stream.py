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
