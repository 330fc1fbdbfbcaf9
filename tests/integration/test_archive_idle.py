"""``archive --exit-when-idle`` and an nsqd it has lost (original family, real servers).

Quiet while a source is cut off is not idle: the archive waits for the lost nsqd and
archives what it holds once it is back; a source that stays away past
``--failover-window`` ends the archive with exit 1 naming it, everything received
written and acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from nsqctl.connection import ConnectionConfig
from nsqctl.errors import NoConnectionError, NoConnectionTimeoutError
from nsqctl.producer import Producer
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from nsqctl.stats.read import read_nsqd_stats
from tests.helpers.clusters import running_cluster
from tests.helpers.hang import (
    Run,
    bodies,
    lines_in,
    nsqctl,
    publish_to_each,
    stopped,
    until_consuming,
)
from tests.helpers.redesign import eventually, unique

pytestmark = [pytest.mark.original, pytest.mark.spark]  # archive needs pyarrow

IDLE = 1.0  # --exit-when-idle


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from running_cluster("original", tmp_path_factory.mktemp("archive-idle"), nsqd=2)


def _acknowledged(node: NodeRecord, topic: str, count: int) -> bool:
    """The archive's channel on ``node`` got ``count`` messages and holds none: each was
    FINed (nothing waits, is in flight or deferred)."""
    found = read_nsqd_stats(node.http_address, topic=topic).channel(topic, "nsqctl_archive")
    return (
        found is not None
        and found.message_count == count
        and found.depth == 0
        and found.in_flight_count == 0
        and found.deferred_count == 0
    )


#: Published before the archive starts, split evenly over the two nsqds.
BEFORE = bodies("a", 20)
#: The slow publisher's lines: 8 s at --rate 4, a message every 0.25 s, far inside IDLE.
TRICKLE = bodies("t", 32)


async def _archive_while_trickling(
    c: Cluster, topic: str, out: Path, survivor: NodeRecord, *extra: str
) -> tuple[asyncio.Task[Run], asyncio.Task[Run]]:
    """A slow publisher to ``survivor``, then ``nsqctl archive`` of ``topic`` on both nsqds,
    named with ``--nsqd`` (through a lookupd, a stopped original nsqd unregisters and is
    no source any more). The publisher starts first, so from its start the archive gets a
    message at least every 0.25 s until the publisher ends, and cannot be idle before
    then, however slowly the machine starts either process. Returns (publisher, archive)
    once the archive consumes on both nsqds."""
    pub = asyncio.create_task(
        nsqctl("pub", topic, "--nsqd", survivor.tcp_address, "--rate", "4", stdin=lines_in(TRICKLE))
    )
    archive = asyncio.create_task(
        nsqctl(
            "archive",
            topic,
            "--out",
            str(out),
            "--exit-when-idle",
            str(IDLE),
            "--json",
            "--rotate-seconds",
            "0.2",  # each batch written and FINed at once: a stop then takes nothing
            *(arg for tcp in c.nsqd_tcp for arg in ("--nsqd", tcp)),
            *extra,
        )
    )
    for node in c.nsqds:
        await until_consuming(node, topic, "nsqctl_archive", archive)
    return pub, archive


async def _lose_while_busy(
    topic: str, lost: NodeRecord, published: int, pub: asyncio.Task[Run], archive: asyncio.Task[Run]
) -> None:
    """Stop ``lost`` while the slow publisher ``pub`` keeps ``archive`` busy, so the archive
    sees the loss before it could be idle; return once the publisher is done (the idle
    time starts there). ``published``: what ``lost`` got, all of it archived (written and
    FINed) before the stop, which so takes nothing from the archive."""
    await asyncio.to_thread(
        eventually,
        lambda: _acknowledged(lost, topic, published),
        60,
        f"the archive to acknowledge what {lost.name} holds",
    )
    process.stop(lost)
    assert not pub.done(), "the slow publisher ended before the nsqd was stopped"
    run = await pub
    assert run.code == 0, run.err
    assert not archive.done(), await archive


@contextlib.asynccontextmanager
async def _archive_losing(
    c: Cluster, topic: str, lost: NodeRecord, out: Path, *extra: str
) -> AsyncIterator[asyncio.Task[Run]]:
    """:data:`BEFORE` published to both nsqds, the archive (``extra``: its further
    arguments) started under the slow publisher, and ``lost`` stopped while it is busy:
    the block runs with that nsqd away and the publisher done, and is given the archive.
    ``lost`` is started again after the block, however it ended."""
    survivor = next(n for n in c.nsqds if n is not lost)
    await publish_to_each(c.nsqd_tcp, topic, BEFORE)
    pub, archive = await _archive_while_trickling(c, topic, out, survivor, *extra)
    try:
        await _lose_while_busy(topic, lost, len(BEFORE) // 2, pub, archive)
        yield archive
    finally:
        c.restart(lost)


async def test_idle_exit_waits_for_a_lost_nsqd_and_archives_it_once_back(
    pair: Cluster, tmp_path: Path
) -> None:
    c, topic = pair, unique("idle")
    lost = c.nsqds[0]
    async with _archive_losing(c, topic, lost, tmp_path / "out") as archive:
        # A window in which nothing may happen: several idle periods, the nsqd away.
        # Before the fix the archive exited 0 here, never to read what that nsqd holds.
        await asyncio.sleep(IDLE * 3)
        assert not archive.done(), (await archive).err
    after = bodies("b", 10)
    pub = await nsqctl("pub", topic, "--nsqd", lost.tcp_address, stdin=lines_in(after))
    assert pub.code == 0, pub.err
    run = await archive
    assert run.code == 0, run.err
    report = json.loads(run.out)
    assert report["archived"] == len(BEFORE) + len(TRICKLE) + len(after), (report, run.err)
    assert report["reconnects"] >= 1, report


async def test_idle_exit_gives_up_on_an_nsqd_gone_for_the_failover_window(
    pair: Cluster, tmp_path: Path
) -> None:
    c, topic = pair, unique("gone")
    survivor, lost = c.nsqds
    window = ("--failover-window", "4")
    async with _archive_losing(c, topic, lost, tmp_path / "out", *window) as archive:
        run = await archive
    assert run.code == 1, (run.out, run.err)
    assert "Traceback" not in run.err, run.err
    last = run.err.strip().splitlines()[-1]
    assert last.startswith("nsqctl: error: "), run.err
    assert f"nsqd {lost.tcp_address}" in last and "--failover-window" in last, last
    # everything the surviving nsqd got, before and during, is written and acknowledged
    assert _acknowledged(survivor, topic, len(BEFORE) // 2 + len(TRICKLE)), run.err


async def test_an_nsqd_hung_for_the_failover_window_ends_the_archive_as_a_timeout(
    pair: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An nsqd that went silent (stopped: its sockets open, answering nothing) and stayed
    so past the failover window ends the archive as the consumer's start-up ends on
    silent nsqds: a NoConnectionTimeoutError (a NoConnectionError and a timeout), not the
    plain NoConnectionError of one that refused (killed, above)."""
    from nsqctl.pipeline.archiver import ArchiveOptions, Archiver  # pyarrow
    from nsqctl.pipeline.rotation import RotationPolicy

    c, topic = pair, unique("hung")
    survivor, hung = c.nsqds
    await publish_to_each(c.nsqd_tcp, topic, BEFORE)
    opts = ArchiveOptions(
        topic,
        "nsqctl_archive",
        tmp_path / "out",
        nsqd=list(c.nsqd_tcp),
        # a 1 s heartbeat: the silent connection is declared dead within the test
        config=ConnectionConfig(heartbeat_interval_ms=1000, connect_timeout=1.0),
        exit_when_idle=IDLE,
        failover_window=2.0,
        policy=RotationPolicy(max_age=0.2),
    )
    caplog.set_level(logging.INFO, logger="nsqctl.pipeline")
    archive = asyncio.create_task(Archiver(opts).run(asyncio.Event()))
    try:
        for node in c.nsqds:
            await asyncio.to_thread(
                eventually,
                functools.partial(_acknowledged, node, topic, len(BEFORE) // 2),
                60,
                f"the archive to acknowledge what {node.name} holds",
            )
        async with stopped(hung):
            # Busy (a message to the survivor every 0.2 s) until the archive sees the hung
            # nsqd as cut off, so it cannot go idle while the dead connection looks alive.
            cut_off = f"not idle while nsqd {hung.tcp_address} cannot be read"
            async with Producer(nsqd_tcp=[survivor.tcp_address]) as producer:
                async with asyncio.timeout(60):
                    while cut_off not in caplog.text:
                        assert not archive.done(), archive
                        await producer.publish(topic, b"busy")
                        await asyncio.sleep(0.2)
            with pytest.raises(NoConnectionError) as caught:
                async with asyncio.timeout(60):
                    await archive
    finally:
        archive.cancel()
    assert isinstance(caught.value, NoConnectionTimeoutError), repr(caught.value)
    assert f"nsqd {hung.tcp_address} could not be read" in str(caught.value)
