"""A hung node on the original family: pub, tail, stat and dash
run through a SIGSTOP of an nsqd, then of nsqlookupd, on one cluster whose nsqds listen
and broadcast on their own loopback addresses (127.0.0.2, 127.0.0.3) as separate hosts
would. Each command finishes within a bound, nothing published is lost (consumed at least
once), and stat and the dashboard show the stopped node as not answering."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import assert_one_line_error
from tests.helpers.hang import (
    STOP_WINDOW,
    DashWatch,
    Tail,
    archive_through_stop,
    assert_stat_saw_down,
    bodies,
    lines_in,
    nsqctl,
    publish_to_each,
    spread_cluster,
    stopped,
)
from tests.helpers.redesign import unique

pytestmark = pytest.mark.original


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from spread_cluster("original", tmp_path_factory.mktemp("hung-original"))


def test_spread_cluster_broadcasts_its_own_addresses(spread: Cluster) -> None:
    assert [n.host for n in spread.nsqds] == ["127.0.0.2", "127.0.0.3"]
    assert all(a.startswith(("127.0.0.2:", "127.0.0.3:")) for a in spread.nsqd_tcp)


async def test_through_a_stopped_nsqd(spread: Cluster) -> None:
    c = spread
    topic, hung = unique("hang"), c.nsqds[0]
    lookupd = ["--lookupd", c.lookupd_http[0]]
    before = bodies("a", 30)
    await publish_to_each(c.nsqd_tcp, topic, before)
    tail = await Tail.start(topic, "-c", "hang", *lookupd)
    dash = DashWatch(c.lookupd_http)
    try:
        await tail.wait_for(before)
        async with dash.showing_both_nsqds() as pilot:
            during = bodies("b", 40)
            async with stopped(hung):
                pub, stat, *_ = await asyncio.gather(
                    nsqctl("pub", topic, *lookupd, stdin=lines_in(during)),
                    nsqctl("stat", topic, *lookupd, "--json", "-i", "1", "-n", "3"),
                    dash.until_not_answering(pilot, hung, "the stopped nsqd not answering"),
                    asyncio.sleep(STOP_WINDOW),  # the scenario: a hang longer than heartbeats
                )
                assert dash.node_rows()[hung.http_address][2] == "down"
                assert dash.node_rows()[c.nsqd_http[1]][2] == "up"
            await dash.until(
                pilot, lambda: dash.node_rows()[hung.http_address][2] == "up", "it back up"
            )
        # pub went to the nsqd that answers, or said it could not: never a silent drop
        assert pub.code == 0, pub.err
        assert_stat_saw_down(stat, hung, samples=3)
        await tail.wait_for(before + during)
        code, err = await tail.interrupt()
        assert code == 0, err
    finally:
        await tail.kill()
        process.resume(hung)


async def test_through_a_stopped_lookupd(spread: Cluster) -> None:
    c = spread
    topic, hung = unique("hangl"), c.lookupds[0]
    lookupd = ["--lookupd", hung.http_address]
    before = bodies("a", 20)
    await publish_to_each(c.nsqd_tcp, topic, before)
    tail = await Tail.start(topic, "-c", "hang", *lookupd)
    dash = DashWatch(c.lookupd_http)
    try:
        await tail.wait_for(before)
        async with dash.showing_both_nsqds() as pilot:
            during = bodies("b", 20)
            # inside the stop until every check is done: each one happened while it hung
            async with stopped(hung):
                direct, via_lookupd, stat, *_ = await asyncio.gather(
                    nsqctl("pub", topic, "--nsqd", c.nsqd_tcp[1], stdin=lines_in(during)),
                    nsqctl("pub", topic, *lookupd, stdin=lines_in(["lost?"])),
                    nsqctl("stat", topic, *lookupd, "--json", "-n", "1"),
                    dash.until(
                        pilot,
                        lambda: f"{hung.http_address} DOWN" in dash.lookupd_line(),
                        "the stopped lookupd down",
                    ),
                    # the running tail keeps its nsqd connections through the hang
                    tail.wait_for(during),
                    asyncio.sleep(STOP_WINDOW),
                )
                # the nsqds still answer: the dashboard keeps showing them up
                assert {r[2] for r in dash.node_rows().values()} == {"up"}
        assert direct.code == 0, direct.err
        # without lookupd a new publisher cannot find an nsqd: it says so, in one line
        assert "lookupd" in assert_one_line_error(via_lookupd, 1)  # type: ignore[arg-type]
        assert via_lookupd.code != 0
        assert "lookupd" in assert_one_line_error(stat, 1)  # type: ignore[arg-type]
        code, err = await tail.interrupt()
        assert code == 0, err
    finally:
        await tail.kill()
        process.resume(hung)


async def test_tail_words_a_handshake_timeout_as_its_own_warning(spread: Cluster) -> None:
    """The library only logs that a stopped nsqd never finished the handshake; tail prints
    it as its own line, prefixed like its other warnings (it came out bare before), and
    within twice its --connect-timeout, the flag the line names."""
    c = spread
    topic, hung = unique("hangh"), c.nsqds[0]
    live = bodies("a", 3)
    published = await nsqctl("pub", topic, "--nsqd", c.nsqd_tcp[1], stdin=lines_in(live))
    assert published.code == 0, published.err
    nsqds = ["--nsqd", c.nsqd_tcp[0], "--nsqd", c.nsqd_tcp[1]]
    async with stopped(hung):
        tail = await Tail.start(topic, "-c", "hang", *nsqds, "--connect-timeout", "1")
        try:
            await tail.wait_for(live)
            assert tail.proc.stderr is not None
            async with asyncio.timeout(STOP_WINDOW):
                first = (await tail.proc.stderr.readline()).decode()
            code, rest = await tail.interrupt()
        finally:
            await tail.kill()
    assert first == (
        f"nsqctl tail: nsqd {c.nsqd_tcp[0]} did not finish the handshake within 2s "
        "(twice the connect timeout)\n"
    )
    assert code == 0, rest
    assert all(line.startswith("nsqctl tail: ") for line in rest.splitlines() if line), rest


@pytest.mark.spark  # archive needs the archive extra (pyarrow)
async def test_archive_through_a_stopped_nsqd(spread: Cluster, tmp_path: Path) -> None:
    c = spread
    topic, hung = unique("hanga"), c.nsqds[0]
    before = bodies("a", 20)
    await publish_to_each(c.nsqd_tcp, topic, before)
    report = await archive_through_stop(
        hung,
        c.nsqds[1],
        topic,
        str(tmp_path / "archive"),
        ["--lookupd", c.lookupd_http[0]],
        ["--nsqd", c.nsqd_tcp[1]],
        total=len(before),
    )
    assert report["reconnects"] >= 1, report  # the hung node's connection was given up
