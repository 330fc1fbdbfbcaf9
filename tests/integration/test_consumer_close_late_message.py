"""A message nsqd sends after CLOSE_WAIT is given back before the consumer's socket closes.

nsqd v1's messagePump checks the client's RDY before it takes a message from the
channel, then waits for the connection's write lock, which the IOLoop holds while it
writes the CLOSE_WAIT reply: a message taken just before RDY 0 was processed is written
just after CLOSE_WAIT (nsqd v1.3.0, unbuffered output, RDY 0 and CLS in one write: 1
close in 40 to 150 on an idle or loaded two-core machine, 1 to 60 microseconds behind
CLOSE_WAIT). A real nsqd cannot be made to do it on demand, hence the scripted FAKE
nsqd of test_connection_fake_server.py here, which writes that message on its own after
CLOSE_WAIT. A client that closes at CLOSE_WAIT never reads it, and nsqd keeps it in
flight until its msg-timeout (60 s by default) before anyone else may have it.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from nsqctl import protocol as p
from nsqctl.connection import tcp
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.protocol.frames import FrameType
from nsqctl.protocol.raw_message import RawMessage, encode_message
from tests.integration.test_connection_fake_server import STEP, FakeNsqd

# The fake writes the late message this long after CLOSE_WAIT, and the consumer reads on
# for ten times as long: a wide margin each way on a loaded machine (the default quiet
# period is sized for nsqd, whose late message is microseconds behind CLOSE_WAIT).
LATE = 0.02
QUIET = 10 * LATE


async def test_a_message_sent_after_close_wait_is_given_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tcp, "CLOSE_WAIT_QUIET", QUIET)
    fake = await FakeNsqd().start()
    try:
        await _late_message_after_close_wait(fake)
    finally:
        await fake.stop()


async def _late_message_after_close_wait(fake: FakeNsqd) -> None:
    handled: list[Message] = []
    consumer = Consumer(
        "t", "c", handled.append, nsqd_tcp=[fake.address], options=ConsumerOptions(max_in_flight=5)
    )
    starting = asyncio.create_task(consumer.start())
    client = await fake.accept()
    try:
        assert await client.command() == (b"SUB t c", None)
        await client.frame(FrameType.RESPONSE, p.OK)
        await asyncio.wait_for(starting, STEP)
        assert (await client.command())[0].startswith(b"RDY ")  # the window is open

        closing = asyncio.create_task(consumer.close())
        sent = [await client.command()]
        while sent[-1] != (b"CLS", None):
            sent.append(await client.command())
        assert (b"RDY 0", None) in sent  # intake stopped before CLS
        await client.frame(FrameType.RESPONSE, p.CLOSE_WAIT)
        await asyncio.sleep(LATE)  # nsqd's is microseconds late; the old close took one turn
        late = RawMessage(timestamp=1_700_000_000_000_000_000, attempts=1, id=b"0" * 16, body=b"x")
        # ConnectionError: the consumer has closed already, nothing can answer it
        with contextlib.suppress(ConnectionError):
            await client.frame(FrameType.MESSAGE, encode_message(late))
        rest = await client.eof()
        await asyncio.wait_for(closing, STEP)
    finally:
        await consumer.close()
    assert rest == b"REQ " + late.id + b" 0\n"  # given back once, at once
    assert handled == [] and consumer.stats.requeued == 1
