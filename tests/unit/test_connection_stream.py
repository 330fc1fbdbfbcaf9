"""SocketProtocol: the handshake reads what it buffered; after hand_off every read, the
end and a read error go straight to the connection, in order, none lost. The asyncio
callbacks are called as a transport would call them."""

from __future__ import annotations

import asyncio

from nsqctl.connection.stream import TRANSPORT_READ_SIZE, SocketProtocol, open_socket


class Sink:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.ends: list[BaseException | None] = []

    def data(self, chunk: bytes) -> None:
        self.chunks.append(chunk)

    def end(self, exc: BaseException | None) -> None:
        self.ends.append(exc)


async def test_reads_are_buffered_until_taken() -> None:
    sock = SocketProtocol()
    sock.data_received(b"rep")
    sock.data_received(b"ly")
    assert sock.buffered == 5
    assert await sock.read() == b"reply"
    assert sock.buffered == 0


async def test_read_waits_for_data() -> None:
    sock = SocketProtocol()
    reading = asyncio.create_task(sock.read())
    await asyncio.sleep(0)
    assert not reading.done()
    sock.data_received(b"late")
    assert await asyncio.wait_for(reading, 5) == b"late"


async def test_read_at_the_end_and_after_an_error() -> None:
    ended = SocketProtocol()
    ended.data_received(b"tail")
    assert ended.eof_received() is False  # let asyncio close the transport
    assert await ended.read() == b"tail"  # what came before the end first
    assert await ended.read() == b""
    failed = SocketProtocol()
    err = ConnectionResetError(104, "reset")
    failed.connection_lost(err)
    try:
        await failed.read()
    except ConnectionResetError as raised:
        assert raised is err
    else:  # pragma: no cover
        raise AssertionError("the read error was not raised")


async def test_buffered_bytes_go_first_then_reads_pass_straight_through() -> None:
    sock = SocketProtocol()
    sock.data_received(b"leftover")
    sink = Sink()
    sock.hand_off(sink.data, sink.end)
    assert sink.chunks == [b"leftover"]
    sock.data_received(b"next")
    sock.data_received(b"and more")
    assert sink.chunks == [b"leftover", b"next", b"and more"]
    assert sink.ends == [] and sock.buffered == 0
    sock.eof_received()
    sock.connection_lost(None)
    assert sink.ends == [None]  # once, though asyncio reports the end twice


async def test_nothing_buffered_hands_off_no_empty_chunk() -> None:
    sock = SocketProtocol()
    sink = Sink()
    sock.hand_off(sink.data, sink.end)
    assert sink.chunks == [] and sink.ends == []


async def test_a_read_error_after_hand_off_reaches_the_connection() -> None:
    sock = SocketProtocol()
    sink = Sink()
    sock.hand_off(sink.data, sink.end)
    err = ConnectionResetError(104, "reset")
    sock.connection_lost(err)
    assert sink.ends == [err]


async def test_an_end_during_the_handshake_is_reported_at_hand_off() -> None:
    """The server closed right after its last handshake reply, before the switch."""
    sock = SocketProtocol()
    sock.data_received(b"tail")
    sock.eof_received()
    sink = Sink()
    sock.hand_off(sink.data, sink.end)
    assert sink.chunks == [b"tail"] and sink.ends == [None]
    failed = SocketProtocol()
    err = ConnectionResetError(104, "reset")
    failed.connection_lost(err)
    sink = Sink()
    failed.hand_off(sink.data, sink.end)
    assert sink.ends == [err]


async def test_drain_waits_while_writing_is_paused() -> None:
    sock = SocketProtocol()
    await asyncio.wait_for(sock.drain(), 5)  # not paused: returns at once
    sock.pause_writing()
    draining = asyncio.create_task(sock.drain())
    await asyncio.sleep(0)
    assert not draining.done()
    sock.resume_writing()
    await asyncio.wait_for(draining, 5)
    sock.pause_writing()
    draining = asyncio.create_task(sock.drain())
    await asyncio.sleep(0)
    sock.connection_lost(None)  # a lost connection never leaves a drain hanging
    await asyncio.wait_for(draining, 5)
    await asyncio.wait_for(sock.wait_closed(), 5)


async def test_reads_are_64_kib_not_asyncios_256() -> None:
    """asyncio allocates its whole read size for every recv(). If a Python version
    renames the transport's knob, this says so."""
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        sock = await open_socket("127.0.0.1", port)
        assert sock.transport is not None
        assert sock.transport.max_size == TRANSPORT_READ_SIZE == 64 * 1024  # type: ignore[attr-defined]
        sock.transport.close()
        await asyncio.wait_for(sock.wait_closed(), 5)
    finally:
        server.close()
        await server.wait_closed()
