"""Library edges that need no server: a consumer whose start() failed is closed."""

from __future__ import annotations

import asyncio
import socket

import pytest

import nsqctl


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
