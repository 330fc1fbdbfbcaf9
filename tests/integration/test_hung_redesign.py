"""A hung node on the redesign: pub, tail, tail --ordered, stat
and dash run through a SIGSTOP of a partition leader, then of nsqlookupd, on one cluster
whose nsqds listen and broadcast on their own loopback addresses (127.0.0.2, 127.0.0.3).
Each command finishes within a bound, nothing published is lost (consumed at least once),
and stat and the dashboard show the stopped node as not answering."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import assert_one_line_error
from tests.helpers.failover import leader_of
from tests.helpers.hang import (
    STOP_WINDOW,
    DashWatch,
    Run,
    Tail,
    archive_through_stop,
    assert_stat_saw_down,
    bodies,
    keyed_pub,
    lines_in,
    nsqctl,
    spread_cluster,
    stopped,
)
from tests.helpers.redesign import TopicSpec, create_topics, unique

pytestmark = pytest.mark.redesign


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from spread_cluster("redesign", tmp_path_factory.mktemp("hung-redesign"))


def keyed(prefix: str, count: int) -> list[str]:
    """JSON lines with a shard key each, so an ordered topic's partitions all get some."""
    return [json.dumps({"k": f"k{i}", "i": f"{prefix}{i}"}) for i in range(count)]


async def test_through_a_stopped_leader(spread: Cluster) -> None:
    c = spread
    topic, ordered = unique("hang"), unique("hango")
    lookupd = ["--lookupd", c.lookupd_http[0]]
    await create_topics(
        c.lookupd_http,
        {topic: TopicSpec(partitions=2), ordered: TopicSpec(partitions=2, ordered=True)},
        channels=("hang",),
    )
    hung = leader_of(c, topic, 0)
    assert hung.name in {leader_of(c, ordered, p).name for p in (0, 1)}, "no ordered partition"
    before, before_o = bodies("a", 30), keyed("a", 30)
    run = await nsqctl("pub", topic, *lookupd, stdin=lines_in(before))
    assert run.code == 0, run.err
    run = await nsqctl("pub", ordered, *lookupd, "--shard-field", "k", stdin=lines_in(before_o))
    assert run.code == 0, run.err
    tail = await Tail.start(topic, "-c", "hang", *lookupd)
    tail_o = await Tail.start(ordered, "--ordered", "-c", "hang", *lookupd)
    dash = DashWatch(c.lookupd_http)
    streaming: asyncio.Task[Run] | None = None
    try:
        await asyncio.gather(tail.wait_for(before), tail_o.wait_for(before_o))
        async with dash.showing_both_nsqds() as pilot:
            during, stream, fresh_o = bodies("b", 40), keyed("s", 40), keyed("f", 1)
            # a publisher already writing the ordered topic when its leader hangs
            streaming = asyncio.create_task(keyed_pub(ordered, lookupd, stream, rate=8))
            await tail_o.wait_for(stream[:8])
            async with stopped(hung):
                pub, pub_o, stat, *_ = await asyncio.gather(
                    nsqctl("pub", topic, *lookupd, stdin=lines_in(during)),
                    nsqctl("pub", ordered, *lookupd, "--shard-field", "k", stdin=lines_in(fresh_o)),
                    nsqctl("stat", topic, *lookupd, "--json", "-i", "1", "-n", "3"),
                    dash.until_not_answering(pilot, hung, "the stopped leader not answering"),
                    asyncio.sleep(STOP_WINDOW),  # the scenario: a hang longer than heartbeats
                )
                assert dash.node_rows()[hung.http_address][2] == "down"
            await dash.until(
                pilot, lambda: dash.node_rows()[hung.http_address][2] == "up", "it back up"
            )
        streamed = await streaming
        # unkeyed: retried on the partition that answers
        assert pub.code == 0, pub.err
        # the ordered stream waited for its leader (order forbids another partition)
        assert streamed.code == 0, streamed.err
        # a new publisher whose first write meets the hung leader fails fast, in one line,
        # saying what was not published (it cannot tell a hang from a wrong address)
        if pub_o.code != 0:
            assert "1 message(s) not published" in assert_one_line_error(pub_o, 1)  # type: ignore[arg-type]
            fresh_o = []
        assert_stat_saw_down(stat, hung, samples=3)
        await asyncio.gather(
            tail.wait_for(before + during), tail_o.wait_for(before_o + stream + fresh_o)
        )
        for t in (tail, tail_o):
            code, err = await t.interrupt()
            assert code == 0, err
    finally:
        if streaming is not None and not streaming.done():
            streaming.cancel()
        await tail.kill()
        await tail_o.kill()
        process.resume(hung)


async def test_through_a_stopped_lookupd(spread: Cluster) -> None:
    c = spread
    topic, ordered, hung = unique("hangl"), unique("hanglo"), c.lookupds[0]
    lookupd = ["--lookupd", hung.http_address]
    await create_topics(
        c.lookupd_http,
        {topic: TopicSpec(partitions=2), ordered: TopicSpec(partitions=1, ordered=True)},
        channels=("hang",),
    )
    before = bodies("a", 20)
    run = await nsqctl("pub", topic, *lookupd, stdin=lines_in(before))
    assert run.code == 0, run.err
    run = await nsqctl("pub", ordered, *lookupd, stdin=lines_in(before))
    assert run.code == 0, run.err
    tail = await Tail.start(topic, "-c", "hang", *lookupd)
    tail_o = await Tail.start(ordered, "--ordered", "-c", "hang", *lookupd)
    dash = DashWatch(c.lookupd_http)
    direct = ["--nsqd", leader_of(c, topic, 0).tcp_address]
    streaming: asyncio.Task[Run] | None = None
    try:
        await asyncio.gather(tail.wait_for(before), tail_o.wait_for(before))
        async with dash.showing_both_nsqds() as pilot:
            during, stream = bodies("b", 20), keyed("s", 40)
            # an ordered publisher that found its partitions before the lookupd hung (a new
            # one cannot: a shard key needs the partition count, which lookupd knows)
            streaming = asyncio.create_task(keyed_pub(ordered, lookupd, stream, rate=4))
            await tail_o.wait_for(stream[:4])
            # inside the stop until every check is done: each one happened while it hung
            async with stopped(hung):
                (pub, via_lookupd, stat), *_ = await asyncio.gather(
                    asyncio.gather(
                        nsqctl("pub", topic, *direct, stdin=lines_in(during)),
                        nsqctl("pub", topic, *lookupd, stdin=lines_in(["lost?"])),
                        nsqctl("stat", topic, *lookupd, "--json", "-n", "1"),
                    ),
                    dash.until(
                        pilot,
                        lambda: f"{hung.http_address} DOWN" in dash.lookupd_line(),
                        "the stopped lookupd down",
                    ),
                    # the running tails keep their nsqd connections through the hang
                    tail.wait_for(during),
                    tail_o.wait_for(stream),
                    asyncio.sleep(STOP_WINDOW),
                )
                assert {r[2] for r in dash.node_rows().values()} == {"up"}
                pub_o = await streaming
        assert pub.code == 0, pub.err
        assert pub_o.code == 0, pub_o.err
        # a new publisher or stat that needs the lookupd says it does not answer, in one line
        assert "lookupd" in assert_one_line_error(via_lookupd, 1)  # type: ignore[arg-type]
        assert "lookupd" in assert_one_line_error(stat, 1)  # type: ignore[arg-type]
        for t in (tail, tail_o):
            code, err = await t.interrupt()
            assert code == 0, err
    finally:
        if streaming is not None and not streaming.done():
            streaming.cancel()
        await tail.kill()
        await tail_o.kill()
        process.resume(hung)


@pytest.mark.spark  # archive needs the archive extra (pyarrow)
async def test_archive_through_a_stopped_leader(spread: Cluster, tmp_path: Path) -> None:
    c = spread
    topic = unique("hanga")
    lookupd = ["--lookupd", c.lookupd_http[0]]
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2)}, channels=())
    hung = leader_of(c, topic, 0)
    before = bodies("a", 20)
    run = await nsqctl("pub", topic, *lookupd, stdin=lines_in(before))
    assert run.code == 0, run.err
    # the archive's channel is made by its SUB: on the redesign a new channel starts at
    # the end, so what was published before is not the archive's; only what comes after.
    # During the stop, publish to the partition the other nsqd leads (as the original
    # family's test publishes to the other nsqd): an unkeyed pub would leave some lines
    # waiting on the stopped leader, and how long the healthy partition then goes quiet
    # (the archive exits when idle) would depend on pub's window, not on the archive.
    healthy = next(part for part in (0, 1) if leader_of(c, topic, part) != hung)
    report = await archive_through_stop(
        hung,
        leader_of(c, topic, healthy),
        topic,
        str(tmp_path / "archive"),
        lookupd,
        [*lookupd, "--partition", str(healthy)],
        total=0,
    )
    assert report["reconnects"] >= 1, report
