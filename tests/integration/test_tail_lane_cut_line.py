"""A line that a stop (Ctrl-C, SIGTERM) cut short on a partition's thread is the last
thing tail writes: the reader never gets the rest of it glued to the next line.

``nsqctl tail --ordered`` writes a partition's lines on a thread of its own
(``nsqctl.consumer.lanes``), at most ``PIPE_BUF`` bytes at a time. A stop while the
reader is stalled in the middle of a longer line leaves part of it written; the thread
leaves the message to the event loop, unanswered. Were the loop then to write the
message again (the reader has taken bytes meanwhile, as a terminal does when Ctrl-C
resumes output paused with Ctrl-S), the fragment and the whole line would run together
into one line that is no message. The message must be given back instead.

A real tail (:class:`TailRun`) on the session cluster, taken through its phases by the
test; the stop is :meth:`TailOutput.interrupt`, what the signal handler calls, so that
the reader can take bytes between the stop and the loop's turn, which a signal to a
process cannot time.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from typing import BinaryIO

import pytest

from nsqctl.cli.commands.tail import TailPlan, TailRun, TailSource
from nsqctl.cli.flags import ClusterSelection
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import run_cli
from tests.helpers.redesign import (
    TopicSpec,
    channel_stats,
    create_topics,
    subscribe_ordered_once,
    unique,
)
from tests.helpers.stalled import stalled
from tests.helpers.wait import wait_for

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(120)]

BODY = b"x" * 6000  # longer than PIPE_BUF: written in two parts


def _lane_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "lane-0" and t.is_alive()]


async def test_a_line_cut_short_by_a_stop_on_a_lane_is_not_written_again_after_it(
    redesign_cluster: Cluster,
) -> None:
    c = redesign_cluster
    topic = unique("lanecut")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=1, ordered=True)})
    await subscribe_ordered_once(c, topic)
    ours, theirs = socket.socketpair()
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # full after one part
    out: BinaryIO = open(os.dup(theirs.fileno()), "wb", buffering=0)  # noqa: SIM115 (closed below)
    plan = TailPlan(TailSource(topic, "c", ordered=True))
    run = TailRun(ClusterSelection(lookupd=c.lookupd_http, nsqd=[]), plan, out)
    output, consumer, lanes = run.output, run.consumer, run.lanes
    assert lanes is not None  # raw lines to a socket: the threads' path
    printed = bytearray()
    try:
        await run.begin()
        await wait_for(lambda: lanes.active == 1, 20, "the partition lent to a thread")
        [lane] = _lane_threads()
        pub = await asyncio.to_thread(
            run_cli, ["pub", topic, BODY.decode(), "--lookupd", c.lookupd_http[0]]
        )
        assert pub.returncode == 0, pub.stderr
        # the thread waits on the full socket, part of the line out
        await wait_for(stalled(ours), 20, "the thread to wait on the full socket")
        assert output.written == 0
        output.interrupt()  # what Ctrl-C does in the main thread
        lane.join(10)  # no loop turn meanwhile: the thread's hand-back waits for one
        assert not lane.is_alive(), "the stop did not end the thread's wait"
        # The reader comes back (and has room for a whole line) before the loop's turn.
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        printed.extend(ours.recv(65536))
        await wait_for(
            lambda: consumer.stats.finished + consumer.stats.requeued == 1,
            20,
            lambda: f"the message answered: {consumer.stats}",
        )
    finally:
        output.done.set()
        await run.wind_down()
        out.close()
        theirs.close()
    with ours:
        while chunk := ours.recv(65536):  # to the end: every writer's end is closed
            printed.extend(chunk)
    lines = bytes(printed).split(b"\n")
    assert all(len(line) <= len(BODY) for line in lines), [len(line) for line in lines]
    assert (consumer.stats.finished, consumer.stats.requeued) == (0, 1), consumer.stats
    left = await asyncio.to_thread(channel_stats, c, topic, "c")
    assert sum(ch.depth for ch in left.values()) == 1, left  # given back, not FINed
