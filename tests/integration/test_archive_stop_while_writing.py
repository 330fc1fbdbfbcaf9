"""``nsqctl archive`` stopping while a batch's durable write is under way (original
family, a real nsqd): a message is FINed only once it is on disk, a message given back
is given back once, and none is left in flight on nsqd until its msg-timeout (60 s).

The archive is driven through :class:`Archiver` (what the command runs) with its
writer's ``write`` held on an event: a write that takes as long as the test says (a
slow disk, an fsync that stalls) cannot be had otherwise; nsqd, the consumer, the
Parquet files and the FINs are all real.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nsqctl.errors import ArchiveWriteError
from nsqctl.servers import cluster
from tests.helpers.cli import run_cli
from tests.helpers.names import unique
from tests.helpers.settled import channel_on, settled_channel
from tests.helpers.wait import wait_for

pytestmark = [pytest.mark.original, pytest.mark.spark]  # archive needs pyarrow

CHANNEL = "arch"
BATCH = 2  # rows per file: 4 messages make two batches, the second queued behind the first


class HeldWrites:
    """The archiver's writer with each write held until :attr:`release` is set; the
    ``fail``-th write (1-based; 0: none) fails instead, at once."""

    def __init__(self, archiver: Any, fail: int = 0) -> None:
        self._write: Callable[[Any], list[Path]] = archiver.writer.write
        self._fail = fail
        self.calls = 0
        self.entered = threading.Event()  # a write that is held has begun
        self.release = threading.Event()

    def write(self, batch: Any) -> list[Path]:
        self.calls += 1
        if self.calls == self._fail:
            raise ArchiveWriteError("the disk refused the write (a test's failure)")
        self.entered.set()
        if not self.release.wait(60):
            raise AssertionError("the held write was never released")
        return self._write(batch)


def _rows(out: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_table(path).num_rows for path in out.rglob("*.parquet"))


async def _archiving(
    c: cluster.Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: int = 0
) -> tuple[Any, HeldWrites, asyncio.Event, asyncio.Task[Any], str]:
    """Four messages published, an archive of them started with its writes held: the
    archiver, its writes, its stop, its run and the topic, once the first write is held
    (the second batch is then waiting for it, or for the failed one's end)."""
    from nsqctl.pipeline.archiver import ArchiveOptions, Archiver
    from nsqctl.pipeline.rotation import RotationPolicy

    topic = unique("archstop")
    nsqd = c.nsqd_tcp[0]
    pub = await asyncio.to_thread(run_cli, ["pub", topic, "a", "b", "c", "d", "--nsqd", nsqd])
    assert pub.returncode == 0, pub.stderr
    archiver = Archiver(
        ArchiveOptions(
            topic=topic,
            channel=CHANNEL,
            out_dir=tmp_path / "out",
            nsqd=[nsqd],
            max_in_flight=2 * BATCH,
            policy=RotationPolicy(max_rows=BATCH, max_age=300.0),
            fsync=False,
        )
    )
    writes = HeldWrites(archiver, fail)
    monkeypatch.setattr(archiver.writer, "write", writes.write)
    stop = asyncio.Event()
    run = asyncio.create_task(archiver.run(stop))
    entered = await asyncio.to_thread(writes.entered.wait, 20)
    if not entered:
        run.cancel()
        raise AssertionError("no write began")
    return archiver, writes, stop, run, topic


async def test_a_stop_during_a_write_finishes_it_and_fins_every_message_written(
    original_cluster: cluster.Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped (Ctrl-C, SIGTERM) while the first batch's write is held, the second batch
    waiting for it: RDY 0 goes out and the stop waits for both writes; all four messages
    are on disk and FINed, none given back, none left in flight (the run's last
    rotation waits for every write)."""
    http = original_cluster.nsqd_http[0]
    _archiver, writes, stop, run, topic = await _archiving(original_cluster, tmp_path, monkeypatch)
    try:
        stop.set()

        async def stopping() -> bool:  # the archive has stopped its intake: RDY 0
            ch = await channel_on(http, topic, CHANNEL)
            return bool(ch.clients) and all(cl.ready_count == 0 for cl in ch.clients)

        await wait_for(stopping, 10, "RDY 0 from the stopping archive")
        assert not run.done()  # waiting for the held write
    finally:
        writes.release.set()
    stats = await asyncio.wait_for(run, 30)
    assert (stats.written, stats.files, _rows(tmp_path / "out")) == (4, 2, 4)
    ch = await settled_channel(http, topic, CHANNEL, 5)
    assert (ch.message_count, ch.depth, ch.requeue_count, ch.timeout_count) == (4, 0, 0, 0), ch


async def test_a_failed_write_ends_the_run_without_abandoning_the_write_under_way(
    original_cluster: cluster.Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first batch's write fails while the second's is held (a stalling disk): the
    run ends with the write error, the failed batch is given back once, and the held
    write is finished and its messages FINed before the consumer closes. A consumer
    stopped beside the write gives up on them after its stop timeout and closes its
    connection under the write, whose FINs then go nowhere: the two messages, on disk,
    would sit in flight on nsqd until its msg-timeout (to be archived again)."""
    http = original_cluster.nsqd_http[0]
    archiver, writes, _stop, run, topic = await _archiving(
        original_cluster, tmp_path, monkeypatch, fail=1
    )
    try:

        async def closing() -> bool:
            # the archive stopping, waiting for the held write; or (a consumer stopped
            # beside the write) the connection closed after the consumer's stop timeout
            if getattr(archiver, "closing", False):
                return True
            return not (await channel_on(http, topic, CHANNEL)).clients

        await wait_for(closing, 20, "the archive to stop after the failed write")
    finally:
        writes.release.set()
    with pytest.raises(ArchiveWriteError):
        await asyncio.wait_for(run, 30)
    assert (archiver.stats.written, _rows(tmp_path / "out")) == (BATCH, BATCH)
    ch = await settled_channel(http, topic, CHANNEL, 5)
    # the failed batch given back once (waiting again), the written one FINed
    assert (ch.message_count, ch.depth, ch.requeue_count, ch.timeout_count) == (4, 2, 2, 0), ch
