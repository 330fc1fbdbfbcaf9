"""Library edges that need no real server: a consumer whose start() failed is closed;
a publish's ``unsent`` when one attempt's reply timed out and another was refused
(a scripted fake nsqd, see :class:`ScriptedNsqd`)."""

from __future__ import annotations

import asyncio
import json
import socket
import struct

import pytest

import nsqctl
from nsqctl import protocol as p
from nsqctl.connection import ConnectionConfig
from nsqctl.protocol.frames import FrameType, encode_frame
from tests.helpers.identify import identify_reply


def _closed_port() -> int:
    """A local port nothing listens on: a connect to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_start_that_raised_leaves_the_consumer_closed() -> None:
    """Every lookupd refusing: start() raises, and leaves nothing running (the flow loop
    stayed, before) and a consumer that says it is closed when started again (a second
    start() returned at once, the consumer reading nothing, before)."""
    consumer = nsqctl.Consumer(
        "edges", "c", lambda msg: None, lookupd_http=[f"127.0.0.1:{_closed_port()}"]
    )
    with pytest.raises(nsqctl.LookupUnavailableError):
        async with asyncio.timeout(60):  # a hang guard: a refused port answers at once
            await consumer.start()
    alive = [t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert alive == []
    with pytest.raises(nsqctl.UsageError, match="closed"):
        await consumer.start()


#: How the scripted nsqd answers each publish it reads, in order: an error frame's text,
#: or None for no answer at all (the client's reply deadline passes).
Script = list[bytes | None]


class ScriptedNsqd:
    """A scripted FAKE youzan nsqd on 127.0.0.1, for what a real one cannot be made to do
    at a chosen moment: leave a publish it read unanswered (so that the client's reply
    deadline passes after the write), then refuse the next as not the partition's leader.
    It answers IDENTIFY as youzan's nsqd (a version with "HA"), then each publish
    command, whichever connection it came on, as its script says."""

    def __init__(self, script: Script) -> None:
        self.script = list(script)
        self.read = 0  # publishes read
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> ScriptedNsqd:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    @property
    def address(self) -> str:
        assert self.server is not None
        host, port = self.server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            assert await reader.readexactly(4) == p.MAGIC_V2
            while line := await reader.readline():
                name = line.split(b" ", 1)[0].strip()
                body = b""
                if name in (b"IDENTIFY", b"PUB", b"MPUB"):
                    (size,) = struct.unpack(">I", await reader.readexactly(4))
                    body = await reader.readexactly(size)
                if name == b"IDENTIFY":
                    reply = identify_reply(version="0.3.7-HA.1.12.7")
                    writer.write(encode_frame(FrameType.RESPONSE, json.dumps(reply).encode()))
                elif name in (b"PUB", b"MPUB"):
                    self.read += 1
                    answer = self.script.pop(0)
                    if answer is not None:
                        writer.write(encode_frame(FrameType.ERROR, answer))
                await writer.drain()
                del body
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


NOT_LEADER = b"E_FAILED_ON_NOT_LEADER"


@pytest.mark.parametrize(
    ("script", "unsent"),
    [([NOT_LEADER, NOT_LEADER], True), ([None, NOT_LEADER], False)],
    ids=["every-attempt-refused", "first-attempt-unanswered"],
)
async def test_unsent_only_when_every_attempt_was_answered_not_stored(
    script: Script, unsent: bool
) -> None:
    """A batch publish whose two attempts nsqd both refused as not the leader (which it
    answers before storing anything) is known unsent; one whose first attempt got no
    reply in time (nsqd may have stored it and not answered yet) stays maybe stored,
    whatever the last attempt's answer said."""
    options = nsqctl.ProducerOptions(
        max_attempts=2, backoff=0.01, max_backoff=0.01, failover_window=0
    )
    config = ConnectionConfig(request_timeout=0.5)  # the unanswered attempt's deadline
    async with ScriptedNsqd(script) as nsqd:
        producer = nsqctl.Producer(nsqd_tcp=[nsqd.address], options=options, config=config)
        try:
            with pytest.raises(nsqctl.PublishError) as caught:
                async with asyncio.timeout(60):  # a hang guard
                    await producer.publish_many("edges", [b"a", b"b"])
        finally:
            await producer.close()
        assert nsqd.read == 2  # each attempt wrote the batch to nsqd
    assert caught.value.unsent is unsent, caught.value
