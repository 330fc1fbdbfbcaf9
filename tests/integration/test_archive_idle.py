"""``archive --exit-when-idle`` and an nsqd it has lost (original family, real servers).

Quiet while a source is cut off is not idle: the archive waits for the lost nsqd and
archives what it holds once it is back; a source that stays away past
``--failover-window`` ends the archive with exit 1 naming it, everything received
written and acknowledged.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from nsqctl.stats.read import read_nsqd_stats
from tests.helpers.clusters import running_cluster
from tests.helpers.hang import Run, bodies, lines_in, nsqctl, publish_to_each, until_consuming
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


async def _archive(c: Cluster, topic: str, out: Path, *extra: str) -> asyncio.Task[Run]:
    """``nsqctl archive`` of ``topic`` on both nsqds, named with ``--nsqd`` (through a
    lookupd, a stopped original nsqd unregisters and is no source any more)."""
    task = asyncio.create_task(
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
        await until_consuming(node, topic, "nsqctl_archive", task)
    return task


async def _lose_while_busy(
    c: Cluster, topic: str, lost: NodeRecord, published: int, archive: asyncio.Task[Run]
) -> int:
    """Stop ``lost`` while a slow publisher keeps the archive busy on the other nsqd, so the
    archive sees the loss before it could be idle, and return once the publisher is done
    (the idle time starts there) with how many it sent. ``published``: what ``lost`` got
    before, all of it archived (written and FINed) before the stop, which so takes nothing
    from the archive."""
    survivor = next(n for n in c.nsqds if n is not lost)
    trickle = bodies("t", 20)
    pub = asyncio.create_task(
        nsqctl("pub", topic, "--nsqd", survivor.tcp_address, "--rate", "4", stdin=lines_in(trickle))
    )
    await asyncio.to_thread(
        eventually,
        lambda: _acknowledged(lost, topic, published) and _received(survivor, topic) > published,
        60,
        f"the archive to acknowledge what {lost.name} holds, the slow publisher under way",
    )
    process.stop(lost)
    assert not pub.done(), "the slow publisher ended before the nsqd was stopped"
    run = await pub
    assert run.code == 0, run.err
    assert not archive.done(), (await archive).err
    return len(trickle)


def _received(node: NodeRecord, topic: str) -> int:
    found = read_nsqd_stats(node.http_address, topic=topic).channel(topic, "nsqctl_archive")
    return found.message_count if found is not None else 0


async def test_idle_exit_waits_for_a_lost_nsqd_and_archives_it_once_back(
    pair: Cluster, tmp_path: Path
) -> None:
    c, topic = pair, unique("idle")
    lost = c.nsqds[0]
    before = bodies("a", 20)
    await publish_to_each(c.nsqd_tcp, topic, before)
    archive = await _archive(c, topic, tmp_path / "out")
    try:
        trickled = await _lose_while_busy(c, topic, lost, len(before) // 2, archive)
        # A window in which nothing may happen: several idle periods, the nsqd away.
        # Before the fix the archive exited 0 here, never to read what that nsqd holds.
        await asyncio.sleep(IDLE * 3)
        assert not archive.done(), (await archive).err
    finally:
        c.restart(lost)
    after = bodies("b", 10)
    pub = await nsqctl("pub", topic, "--nsqd", lost.tcp_address, stdin=lines_in(after))
    assert pub.code == 0, pub.err
    run = await archive
    assert run.code == 0, run.err
    report = json.loads(run.out)
    assert report["archived"] == len(before) + trickled + len(after), (report, run.err)
    assert report["reconnects"] >= 1, report


async def test_idle_exit_gives_up_on_an_nsqd_gone_for_the_failover_window(
    pair: Cluster, tmp_path: Path
) -> None:
    c, topic = pair, unique("gone")
    lost, survivor = c.nsqds[1], c.nsqds[0]
    before = bodies("a", 20)
    await publish_to_each(c.nsqd_tcp, topic, before)
    archive = await _archive(c, topic, tmp_path / "out", "--failover-window", "4")
    try:
        trickled = await _lose_while_busy(c, topic, lost, len(before) // 2, archive)
        run = await archive
    finally:
        c.restart(lost)
    assert run.code == 1, (run.out, run.err)
    assert "Traceback" not in run.err, run.err
    last = run.err.strip().splitlines()[-1]
    assert last.startswith("nsqctl: error: "), run.err
    assert f"nsqd {lost.tcp_address}" in last and "--failover-window" in last, last
    # everything the surviving nsqd got, before and during, is written and acknowledged
    assert _acknowledged(survivor, topic, len(before) // 2 + trickled), run.err
