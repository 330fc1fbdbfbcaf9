"""``nsqctl tail -c NAME`` loses nothing when an original nsqd that keeps every message on
disk (``--mem-queue-size=0``) is killed with -9 (real servers).

nsqd v1 moves a channel's disk-queue read position when it hands a message to a
connection and saves it on its next sync; the message then waits in the connection's
output buffer until the buffer's timeout. A kill -9 in that wait loses the message: no
consumer got it, and the restarted nsqd resumes after it. Here nsqd's default buffer
timeout is 30 s, so a buffered tail would hold nothing at the kill (deterministically,
not a 250 ms race): the tail of a durable channel must ask for unbuffered output and
print every message before the kill, or see it again after the restart.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from nsqctl import Producer
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.read import read_nsqd_stats
from tests.conftest import StartCluster
from tests.helpers.hang import Tail, bodies
from tests.helpers.redesign import unique
from tests.helpers.soak_losses import read_meta
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.original

COUNT = 50
CHANNEL = "kept"
# a disk-queue record: int32 size, int64 timestamp, uint16 attempts, 16-byte id, the body
RECORD_OVERHEAD = 30


async def _consumed(c: Cluster, topic: str, *, drained: bool) -> bool:
    """The tail is subscribed to the channel (and, with ``drained``, the channel holds
    nothing: none waiting, none in flight)."""
    stats = await asyncio.to_thread(read_nsqd_stats, c.nsqds[0].http_address, topic=topic)
    found = stats.channel(topic, CHANNEL)
    if found is None or found.client_count == 0:
        return False
    return not drained or (found.depth == 0 and found.in_flight_count == 0)


async def test_durable_tail_loses_nothing_to_a_kill9(start_cluster: StartCluster) -> None:
    c = start_cluster(
        "original",
        nsqd=1,
        nsqd_args=["--mem-queue-size=0", "--output-buffer-timeout=30s", "--sync-timeout=100ms"],
    )
    node, topic = c.nsqds[0], unique("kill9tail")
    tail = await Tail.start(topic, "-c", CHANNEL, "--nsqd", node.tcp_address)
    try:
        await wait_for(lambda: _consumed(c, topic, drained=False), 30, "the tail subscribed")
        sent = bodies("m", COUNT)
        async with Producer(nsqd_tcp=[node.tcp_address]) as producer:
            await producer.publish_many(topic, [b.encode() for b in sent])
        size = sum(RECORD_OVERHEAD + len(b) for b in sent)
        meta_path = Path(node.data_dir) / f"{topic}:{CHANNEL}.diskqueue.meta.dat"

        def handed_out() -> bool:
            meta = read_meta(meta_path)
            return meta is not None and meta.read == meta.write == (0, size)

        # every message written to the channel's queue, handed out, and that saved
        await wait_for(handed_out, 30, "nsqd to save that it handed every message out", 0.01)
        process.kill_hard(node)
        await asyncio.to_thread(c.restart, node)
        # the restarted nsqd has delivered whatever it still had, and the tail FINed it
        await wait_for(lambda: _consumed(c, topic, drained=True), 30, "the restarted channel")
        code, err = await tail.interrupt()
        assert code in (0, 130), err
        lost = set(sent) - set(tail.seen)
        assert not lost, f"{len(lost)} of {COUNT} lost to the kill -9: {sorted(lost)[:5]}"
    finally:
        await tail.kill()
