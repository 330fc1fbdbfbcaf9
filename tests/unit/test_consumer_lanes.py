"""An ordered partition read on a thread (:mod:`nsqctl.consumer.lanes`) handing its socket
back to the event loop, against a scripted FAKE youzan nsqd.

A real nsqd sends what these tests need only at moments no test can choose: an error
frame to an ordered reader (a FIN it no longer knows, after a reader reset), a lower
offset on one unbroken connection (a rewind of the channel), a frame in two parts with
a pause between (a stalled nsqd), a heartbeat (on its own clock). So the fake here, an
asyncio server on 127.0.0.1, answers the handshake as youzan's nsqd would (a redesign
version, nothing negotiated), acknowledges SUB_ORDERED and then sends exactly the frames
each test wants: messages in the ordered layout one at a time, each after the FIN of the
last (as youzan does on an ordered channel), and the odd frame in between.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import struct
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

import pytest

from nsqctl import protocol as p
from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.consumer.lanes import OrderedLanes
from nsqctl.message import Message
from nsqctl.protocol.frames import HEARTBEAT, FrameType, encode_frame
from nsqctl.protocol.raw_message import MessageLayout, RawMessage, encode_message
from tests.helpers.identify import identify_reply
from tests.helpers.lane_sink import Sink

STEP = 5.0
LAYOUT = MessageLayout(family="redesign", ordered=True)
IDENTIFY_REPLY = identify_reply(version="0.3.7-HA.1.12.7")  # youzan's nsqd
SIZE = 40  # each message's size on the fake's disk queue: offsets follow on


def frame(n: int, offset: int | None = None) -> bytes:
    """Message ``n``'s frame (internal id ``n``; at ``offset``, by default right after
    message n-1 on the fake's disk queue)."""
    raw = RawMessage(
        timestamp=1_700_000_000_000_000_000 + n,
        attempts=1,
        id=b"",
        body=b"m%d" % n,
        internal_id=n,
        trace_id=0,
        offset=(n - 1) * SIZE if offset is None else offset,
        size=SIZE,
    )
    return encode_frame(FrameType.MESSAGE, encode_message(raw, LAYOUT))


class FakeOrderedNsqd:
    """Serves one client: handshake, SUB_ORDERED, then what the test sends."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.client: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
            asyncio.get_running_loop().create_future()
        )
        self.commands: list[bytes] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert await reader.readexactly(4) == p.MAGIC_V2
        assert await reader.readline() == b"IDENTIFY\n"
        (size,) = struct.unpack(">I", await reader.readexactly(4))
        await reader.readexactly(size)
        writer.write(encode_frame(FrameType.RESPONSE, json.dumps(IDENTIFY_REPLY).encode()))
        line = await reader.readline()
        assert line.startswith(b"SUB_ORDERED "), line
        writer.write(encode_frame(FrameType.RESPONSE, p.OK))
        await writer.drain()
        self.client.set_result((reader, writer))

    async def command(self) -> bytes:
        reader, _ = await asyncio.wait_for(asyncio.shield(self.client), STEP)
        line = await asyncio.wait_for(reader.readline(), STEP)
        self.commands.append(line)
        return line

    async def send(self, data: bytes) -> None:
        _, writer = await asyncio.wait_for(asyncio.shield(self.client), STEP)
        writer.write(data)
        await writer.drain()

    async def message(self, n: int, offset: int | None = None) -> None:
        """Message ``n`` (1, 2, ...; at ``offset``, by default right after message n-1),
        then its FIN from the client (RDY lines skipped)."""
        await self.send(frame(n, offset))
        while True:
            line = await self.command()
            if not line.startswith(b"RDY"):
                break
        assert line == b"FIN " + p.make_redesign_id(n, 0) + b"\n", line

    async def close_wait(self) -> None:
        """Answer the client's CLS (RDY 0 and the like before it skipped)."""
        while not (await self.command()).startswith(b"CLS"):
            pass
        await self.send(encode_frame(FrameType.RESPONSE, b"CLOSE_WAIT"))

    async def stop(self) -> None:
        if self.client.done():
            self.client.result()[1].close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()


class RefusingSink(Sink):
    """Refuses (leaves to the loop) the messages whose bodies are in ``refuse``, as tail's
    output does the last message before -n N."""

    def __init__(self, refuse: set[bytes]) -> None:
        super().__init__()
        self.refuse = refuse

    def write_lane(self, raws: list[RawMessage]) -> bool:
        if any(raw.body in self.refuse for raw in raws):
            return False
        return super().write_lane(raws)


@pytest.fixture
async def fake() -> AsyncIterator[FakeOrderedNsqd]:
    server = FakeOrderedNsqd()
    try:
        yield server
    finally:
        await server.stop()


async def _until(predicate: object, what: str) -> None:
    for _ in range(int(STEP / 0.01)):
        if callable(predicate) and predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def _consumer(
    address: str, handler: Callable[[Message], None], heartbeat_interval_ms: int | None = None
) -> Consumer:
    """An ordered consumer of the fake, started (subscribed)."""
    config = ConnectionConfig(client_id="lane-test", connect_timeout=2.0)
    if heartbeat_interval_ms is not None:
        config = replace(config, heartbeat_interval_ms=heartbeat_interval_ms)
    consumer = Consumer(
        "t", "c", handler, nsqd_tcp=[address], options=ConsumerOptions(ordered=True), config=config
    )
    await consumer.start()
    return consumer


async def _close(fake: FakeOrderedNsqd, lanes: OrderedLanes, consumer: Consumer) -> None:
    """Take the partitions back, then close the consumer (the fake answers its CLS)."""
    lanes.stop()
    closing = asyncio.ensure_future(fake.close_wait())
    await consumer.close(timeout=STEP)
    await closing


async def test_an_error_frame_hands_the_partition_back_and_nothing_is_lost_or_twice(
    fake: FakeOrderedNsqd,
) -> None:
    address = await fake.start()
    on_loop: list[bytes] = []

    def handler(msg: Message) -> None:
        on_loop.append(msg.body)

    consumer = await _consumer(address, handler)
    sink = Sink()
    lanes = OrderedLanes(lambda: consumer.connections, consumer.delivery, sink)
    try:
        lanes.lend()
        assert lanes.active == 1
        for n in (1, 2, 3):
            await fake.message(n)
        assert sink.bodies == [b"m1", b"m2", b"m3"] and on_loop == []

        # An error frame: the thread leaves it to the loop and gives the socket back.
        await fake.send(encode_frame(FrameType.ERROR, b"E_FIN_FAILED FIN failed: not in flight"))
        await _until(lambda: lanes.active == 0, "the partition handed back")
        await fake.message(4)  # read on the loop now
        assert on_loop == [b"m4"]

        lanes.lend()  # the tick lends it again
        assert lanes.active == 1 and lanes.lent == 2
        for n in (5, 6):
            await fake.message(n)
        assert sink.bodies == [b"m1", b"m2", b"m3", b"m5", b"m6"] and on_loop == [b"m4"]
    finally:
        await _close(fake, lanes, consumer)
    stats = consumer.stats
    assert (stats.received, stats.finished, stats.redelivered) == (6, 6, 0)
    fins = [line for line in fake.commands if line.startswith(b"FIN")]
    assert len(fins) == len(set(fins)) == 6


async def test_a_silent_nsqd_is_judged_by_the_idle_deadline_when_its_reader_gives_up(
    fake: FakeOrderedNsqd,
) -> None:
    """A hung nsqd keeps its socket open and sends nothing, not even heartbeats: the
    thread gives the partition back at the idle deadline and the connection is closed
    as not answering then, not a whole deadline later. (The shortest deadline: 10 s.)"""
    address = await fake.start()
    consumer = await _consumer(address, lambda msg: None, heartbeat_interval_ms=1000)
    (conn,) = consumer.connections.values()
    lanes = OrderedLanes(lambda: consumer.connections, consumer.delivery, Sink())
    try:
        lanes.lend()
        assert lanes.active == 1
        started = asyncio.get_running_loop().time()
        await fake.message(1)
        while conn.closed is None:
            assert asyncio.get_running_loop().time() - started < 15, "never judged"
            await asyncio.sleep(0.05)
        assert "not answering" in conn.closed.reason, conn.closed.reason
        assert lanes.active == 0
    finally:
        lanes.stop()
        await consumer.close(timeout=0.5)


async def test_a_message_the_sink_refuses_is_order_checked_once(fake: FakeOrderedNsqd) -> None:
    """A message the lane leaves to the loop (tail's last before -n N, a failed write) is
    checked by the loop as it arrives there: the lane must not have checked it already,
    or a regression is reported twice (and a resent message counted twice). A real nsqd
    sends a lower offset on one unbroken ordered connection only after a rewind of the
    channel at a moment no test can choose: the fake sends it."""
    address = await fake.start()
    on_loop: list[bytes] = []
    consumer = await _consumer(address, lambda msg: on_loop.append(msg.body))
    sink = RefusingSink({b"m4"})
    lanes = OrderedLanes(lambda: consumer.connections, consumer.delivery, sink)
    try:
        lanes.lend()
        for n in (1, 2, 3):
            await fake.message(n)
        await fake.message(4, offset=0)  # behind m3: a regression, refused by the sink
        assert on_loop == [b"m4"] and sink.bodies == [b"m1", b"m2", b"m3"]
    finally:
        await _close(fake, lanes, consumer)
    assert consumer.stats.order_regressions == 1


async def test_a_stop_in_the_middle_of_a_frame_hands_the_part_read_to_the_loop(
    fake: FakeOrderedNsqd,
) -> None:
    """The consumer stops (Ctrl-C, -n reached) while the lane holds part of a frame: the
    lane must let go at once and hand the part it read to the loop, not wait for nsqd to
    send the rest (a stalled nsqd may never; with heartbeats off nothing bounds the wait);
    the loop then reads the rest and handles the message once. A real nsqd writes a frame
    whole: the fake sends half of one and the rest only when the test says."""
    address = await fake.start()
    on_loop: list[bytes] = []
    consumer = await _consumer(
        address, lambda msg: on_loop.append(msg.body), heartbeat_interval_ms=-1
    )
    sink = Sink()
    lanes = OrderedLanes(lambda: consumer.connections, consumer.delivery, sink)
    (conn,) = consumer.connections.values()
    _, writer = fake.client.result()
    half = frame(2)
    head, rest = half[:10], half[10:]
    sent_rest = threading.Event()

    def send_rest() -> None:
        # From a thread: the loop is held by the stop while the lane waits.
        os.write(writer.get_extra_info("socket").fileno(), rest)
        sent_rest.set()

    unblock = threading.Timer(STEP, send_rest)  # unblocks a lane that waits for the rest
    try:
        lanes.lend()
        await fake.message(1)
        await fake.send(head)
        assert conn.lent  # the head is in the socket: read by the lane now or after the stop
        unblock.start()
        lanes.stop()
        assert not sent_rest.is_set(), "the stop waited for nsqd to finish the frame"
        unblock.cancel()
        await fake.send(rest)
        while True:  # FIN of m2, from the loop (RDY lines skipped)
            line = await fake.command()
            if not line.startswith(b"RDY"):
                break
        assert line == b"FIN " + p.make_redesign_id(2, 0) + b"\n", line
        assert sink.bodies == [b"m1"] and on_loop == [b"m2"]
    finally:
        unblock.cancel()
        await _close(fake, lanes, consumer)
    assert (consumer.stats.received, consumer.stats.finished) == (2, 2)


async def test_a_heartbeat_is_answered_by_the_lane_which_keeps_the_partition(
    fake: FakeOrderedNsqd,
) -> None:
    """nsqd's ``_heartbeat_`` must be answered with NOP or nsqd closes the connection: on
    a lent socket the lane answers it itself and goes on reading (the loop cannot write
    there without taking the partition back). The fake sends it at a chosen moment (a
    real nsqd, on its own clock)."""
    address = await fake.start()
    consumer = await _consumer(address, lambda msg: None)
    sink = Sink()
    lanes = OrderedLanes(lambda: consumer.connections, consumer.delivery, sink)
    try:
        lanes.lend()
        await fake.message(1)
        for _ in range(2):
            await fake.send(encode_frame(FrameType.RESPONSE, HEARTBEAT))
            assert await fake.command() == b"NOP\n"
        await fake.message(2)
        assert sink.bodies == [b"m1", b"m2"]
        assert (lanes.active, lanes.lent) == (1, 1)  # never handed back
    finally:
        await _close(fake, lanes, consumer)


@pytest.mark.parametrize(
    "error",
    [
        b"E_FIN_FAILED FIN [0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0] failed Message ID not in flight",
        b"E_REQ_FAILED REQ [0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0] failed Message ID not in flight",
    ],
    ids=["fin", "req"],
)
async def test_an_answer_to_the_copy_before_an_ordered_reset_is_no_warning(
    fake: FakeOrderedNsqd, caplog: pytest.LogCaptureFixture, error: bytes
) -> None:
    """youzan resets a channel's reader at its first ordered subscription and resends
    what was in flight: a FIN or REQ of the first copy (a tail stopping during the reset
    gives back what it holds) then fails, and nothing is wrong (the resent copy is FINed
    or given back in turn), so it is no warning on the operator's stderr. A real nsqd
    sends these only when the client's answer falls between the reset's drain and the
    resend (one run in five of ``tail --ordered | head -1`` on a sandbox): the fake
    sends the error at a chosen moment."""
    caplog.set_level(logging.INFO, logger="nsqctl")
    address = await fake.start()
    consumer = await _consumer(address, lambda msg: None)
    try:
        await fake.message(1)
        await fake.send(encode_frame(FrameType.ERROR, error))
        code = error.split()[0].decode()
        records = await _log_records(caplog, code)
        assert [r.levelno for r in records] == [logging.INFO], records
        assert "expected after an ordered reset" in records[0].getMessage()
        await fake.message(2)  # the connection goes on
    finally:
        closing = asyncio.ensure_future(fake.close_wait())
        await consumer.close(timeout=STEP)
        await closing


async def _log_records(caplog: pytest.LogCaptureFixture, needle: str) -> list[logging.LogRecord]:
    """The log records that mention ``needle``, once there is one."""
    found: list[logging.LogRecord] = []

    def seen() -> bool:
        found[:] = [r for r in caplog.records if needle in r.getMessage()]
        return bool(found)

    await _until(seen, f"a log record of {needle}")
    return found
