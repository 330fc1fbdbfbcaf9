"""``nsqctl tail -c DURABLE`` into a pipe, stopped while messages nsqd sent before it saw
RDY 0 are still arriving: each must be answered before the connection closes, since
nsqd v1 keeps a closed connection's in-flight messages until its msg-timeout (60 s by
default) before anyone else may have them.

A real tail (:class:`TailRun`) on the real session cluster, taken through its phases by
the test: the connection's reads are lent away (:meth:`Connection.lend`, what ordered
lanes use) while nsqd sends, so those messages come in only after tail has begun to
stop, while it waits for the pipe's reader to take what it printed. After Ctrl-C that
is a matter of luck (the reader taking lines before tail sees the signal, so FINs open
the window again just before RDY 0 goes out); lending the reads makes it certain.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import BinaryIO

import pytest

from nsqctl.cli.commands.tail import TailPlan, TailRun, TailSource
from nsqctl.cli.flags import ClusterSelection
from nsqctl.servers import cluster
from tests.helpers.cli import run_cli
from tests.helpers.names import unique
from tests.helpers.settled import channel_on
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.original


async def _publish(nsqd: str, topic: str, *bodies: str) -> None:
    pub = await asyncio.to_thread(run_cli, ["pub", topic, *bodies, "--nsqd", nsqd])
    assert pub.returncode == 0, pub.stderr


async def test_messages_arriving_while_tail_waits_for_its_reader_are_given_back(
    original_cluster: cluster.Cluster,
) -> None:
    """Three lines printed and unread when tail stops; five more arrive while it waits for
    the reader, which then goes away: all eight are given back once, none FINed, none
    left in flight."""
    topic, channel = unique("late"), "durable"
    nsqd, http = original_cluster.nsqd_tcp[0], original_cluster.nsqd_http[0]
    await _publish(nsqd, topic, "a", "b", "c")
    read_end, write_end = os.pipe()
    out: BinaryIO = open(write_end, "wb", buffering=0)  # noqa: SIM115 (closed below)
    plan = TailPlan(TailSource(topic, channel, max_in_flight=50))
    run = TailRun(ClusterSelection(lookupd=[], nsqd=[nsqd]), plan, out)
    output, consumer = run.output, run.consumer
    seen = ""
    try:
        await run.begin()
        await wait_for(lambda: len(output.pending) == 3, 10, "tail to take the first three")
        output.flush()  # printed into the pipe and not read: owed to the reader
        assert output.owed == 3
        [conn] = consumer.connections.values()
        # Nobody reads the socket now; RDY 0 (the first command tail sends as it stops)
        # hands the reads back, so what nsqd sends meanwhile is read only after that.
        lent = conn.lend(lambda: conn.take_back(b"", time.monotonic(), False))
        assert lent is not None
        try:
            await _publish(nsqd, topic, "d", "e", "f", "g", "h")

            async def sent() -> bool:  # nsqd sent all five to the socket nobody reads
                return (await channel_on(http, topic, channel)).in_flight_count == 8

            await wait_for(sent, 10, "nsqd to send the five to tail")
            stopping = asyncio.create_task(run.wind_down())
            await wait_for(lambda: consumer.stats.received == 8, 10, "the five to come in")
            seen = f"{len(output.pending)} unprinted, {output.owed} owed to the reader"
            os.close(read_end)  # the reader goes without reading: nothing was handled
            read_end = -1
            await stopping
        finally:
            lent.close()
    finally:
        if read_end >= 0:
            os.close(read_end)
        out.close()
        await consumer.close()
    assert (consumer.stats.finished, consumer.stats.requeued) == (0, 8), seen
    ch = await channel_on(http, topic, channel)

    async def settled() -> bool:  # nsqd has handled the REQs sent before the close
        nonlocal ch
        ch = await channel_on(http, topic, channel)
        return ch.in_flight_count == 0

    await wait_for(
        settled, 2, lambda: f"nothing in flight: {ch.in_flight_count} still are ({seen})"
    )
    assert (ch.depth, ch.requeue_count) == (8, 8), ch
