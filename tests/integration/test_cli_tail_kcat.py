"""``nsqctl tail`` as kcat on real servers of both families:
``--format`` templates with real fields, ``--until-empty`` exiting 0 once the channel is
caught up, and ``--until TIME`` on the redesign reading history on a temporary channel
that leaves the real channel where it was.

Published timestamps are bracketed by the test's own clock (same machine); depths and
channels are read from nsqd's ``/stats``.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import pytest

from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.errors import ConfigError
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.cli import invoke, run_cli
from tests.helpers.redesign import (
    TopicSpec,
    channel_depths,
    create_topics,
    eventually,
    leader_stats,
    unique,
)

DONE_WHEN = "%T %a %s\\n"


def _ms() -> int:
    return time.time_ns() // 1_000_000


def _iso(ns: int) -> str:
    """``ns`` as ISO 8601 to the microsecond (what --until reads)."""
    when = datetime.fromtimestamp(ns // 1_000_000_000, UTC)
    return when.replace(microsecond=(ns // 1_000) % 1_000_000).isoformat()


def _tail(*args: str) -> list[bytes]:
    """``nsqctl tail ARGS`` must exit 0 by itself; its output lines."""
    proc = run_cli(["tail", *args], timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout.endswith(b"\n") or not proc.stdout
    return proc.stdout.splitlines()


def _tail_here(*args: str) -> tuple[list[bytes], str]:
    """``nsqctl tail ARGS`` in this process (no interpreter start-up), which must end by
    itself with exit 0: its output lines and its stderr."""
    result = invoke("tail", *args)
    assert result.exit_code == 0, (result.exception, result.stderr)
    assert result.stdout_bytes.endswith(b"\n") or not result.stdout_bytes
    return result.stdout_bytes.splitlines(), str(result.stderr)


async def _publish(producer: Producer, topic: str, bodies: list[bytes]) -> None:
    async with producer:
        await producer.publish_many(topic, bodies)


def _original_channel(c: Cluster, topic: str, channel: str) -> list[tuple[int, int, int]]:
    """(depth, in flight, topic-level depth) of ``channel`` on every nsqd holding ``topic``."""
    found = []
    for http in c.nsqd_http:
        copy = read_nsqd_stats(http, topic=topic).topic(topic)
        if copy is not None:
            ch = copy.channel(channel)
            assert ch is not None, (http, channel)
            found.append((ch.depth, ch.in_flight_count, copy.depth))
    return found


@pytest.mark.original
async def test_done_when_on_the_original_family(original_cluster: Cluster) -> None:
    """The issue's command: timestamp, attempts and body of every message, exit 0 once the
    channel is empty; messages on both nsqds, one requeued once, one still at topic level
    (no channel on that nsqd yet) when tail starts."""
    c, topic = original_cluster, unique("kcat-orig")
    start = _ms()
    async with Producer(nsqd_tcp=[c.nsqd_tcp[0]]) as first:
        await first.publish(topic, b"requeued")
    async with Consumer(
        topic, "c", nsqd_tcp=[c.nsqd_tcp[0]], options=ConsumerOptions(max_in_flight=1)
    ) as reader:
        async for msg in reader:
            msg.requeue(delay=0, backoff=False)
            break
    bodies = {b"requeued"}
    for index, nsqd in enumerate(c.nsqd_tcp):
        async with Producer(nsqd_tcp=[nsqd]) as producer:
            batch = [b"n%d-%d" % (index, i) for i in range(3)]
            await producer.publish_many(topic, batch)
            bodies.update(batch)
    end = _ms()

    lines = await asyncio.to_thread(
        _tail,
        topic,
        "-c",
        "c",
        "--format",
        DONE_WHEN,
        "--until-empty",
        "--lookupd",
        c.lookupd_http[0],
    )
    printed = {}
    for line in lines:
        stamp, attempts, body = line.split(b" ", 2)
        assert start <= int(stamp) <= end, (line, start, end)
        printed[body] = int(attempts)
    assert set(printed) == bodies and len(lines) == len(bodies)
    assert printed.pop(b"requeued") == 2
    assert set(printed.values()) == {1}
    assert _original_channel(c, topic, "c") == [(0, 0, 0), (0, 0, 0)]


@pytest.mark.original
def test_ephemeral_default_channel_with_nsqd_addresses(original_cluster: Cluster) -> None:
    """No -c: tail's own ephemeral channel; --nsqd with --nsqd-http; %n is the nsqd, and
    the fields the original family lacks render as kcat renders them (-1, empty)."""
    c, topic = original_cluster, unique("kcat-eph")
    asyncio.run(_publish(Producer(nsqd_tcp=[c.nsqd_tcp[1]]), topic, [b"a", b"b", b"c"]))
    lines, _ = _tail_here(
        topic,
        "--format",
        "%n|%p|%o|%r|%h|%t|%s\\n",
        "--until-empty",
        "--nsqd",
        c.nsqd_tcp[1],
        "--nsqd-http",
        c.nsqd_http[1],
    )
    assert sorted(lines) == [f"{c.nsqd_tcp[1]}|-1|-1|||{topic}|{b}".encode() for b in "abc"]

    refused = invoke("tail", topic, "--until", "2030-01-01T00:00:00", "--lookupd", *c.lookupd_http)
    assert isinstance(refused.exception, ConfigError) and refused.stdout_bytes == b""
    assert "--until needs the redesign" in str(refused.exception)


@pytest.mark.redesign
def test_until_reads_history_on_a_temporary_channel_on_the_redesign(
    redesign_cluster: Cluster,
) -> None:
    """--until stops each partition at its first message past TIME (partition, offset,
    trace id and ext headers are the real ones), leaves the real channel where it was and
    its temporary channel gone; then --until-empty drains the real channel and exits 0.
    A partition with an empty log refuses a start position, yet counts as caught up."""
    c, topic, half_empty = redesign_cluster, unique("kcat-ext"), unique("kcat-half")
    asyncio.run(
        create_topics(
            c.lookupd_http, {topic: TopicSpec(partitions=2, ext=True), half_empty: TopicSpec()}
        )
    )
    before = [b"a-head", b"a-trace", b"a-0", b"a-1"]
    after = [b"b-%d-%d" % (part, i) for part in (0, 1) for i in range(2)]

    async def publish() -> int:
        async with Producer(lookupd_http=c.lookupd_http) as producer:
            await producer.publish_ext(topic, b"a-head", {"k": "v", "n": 1}, partition=0)
            await producer.publish_ext(topic, b"a-trace", {"##trace_id": "4242"}, partition=1)
            for part in (0, 1):
                await producer.publish(topic, b"a-%d" % part, partition=part)
            boundary = time.time_ns()
            for body in after:
                await producer.publish(topic, body, partition=int(body[2:3]))
            await producer.publish_many(half_empty, [b"x", b"y"], partition=0)
        return boundary

    boundary = asyncio.run(publish())
    after_all = time.time_ns()
    real = channel_depths(c, topic, "c")
    assert real == {0: 4, 1: 4}

    lookupd = ["--lookupd", c.lookupd_http[0]]
    until = ["--from-start", "--until", _iso(boundary)]
    lines, err = _tail_here(topic, *until, "--format", "%p|%o|%r|%h|%T|%s\\n", *lookupd)
    assert "temporary channel nsqctl_tail_" in err
    rows = [line.split(b"|") for line in lines]
    assert sorted(r[5] for r in rows) == sorted(before)
    assert all(int(r[4]) <= boundary // 1_000_000 for r in rows)
    by_body = {r[5]: r for r in rows}
    assert by_body[b"a-head"][:4] == [b"0", b"0", b"", b"k=v,n=1"]  # untraced: no %r
    assert by_body[b"a-trace"][:4] == [b"1", b"0", b"4242", b"##trace_id=4242"]
    for label in (b"0", b"1"):
        offsets = [int(r[1]) for r in rows if r[0] == label]
        assert offsets[0] == 0 and offsets == sorted(set(offsets)), offsets

    # TIME past every message: each partition ends caught up, not at a message
    until = ["--from-start", "--until", _iso(after_all)]
    everything, _ = _tail_here(topic, *until, "--format", "%s\\n", *lookupd)
    assert sorted(everything) == sorted(before + after)

    assert channel_depths(c, topic, "c") == real  # time travel did not move the real channel
    eventually(
        lambda: (
            not any(
                ch.name.startswith("nsqctl_tail_")
                for copy in leader_stats(c, topic).values()
                for ch in copy.channels
            )
        ),
        10,
        "the temporary channels to be deleted",
    )

    lines, _ = _tail_here(topic, "-c", "c", "--format", DONE_WHEN, "--until-empty", *lookupd)
    assert sorted(line.split(b" ", 2)[2] for line in lines) == sorted(before + after)
    assert {line.split(b" ", 2)[1] for line in lines} == {b"1"}
    assert channel_depths(c, topic, "c") == {0: 0, 1: 0}

    lines, _ = _tail_here(
        half_empty, "--from-start", "--until-empty", "--format", "%p %s\\n", *lookupd
    )
    assert lines == [b"0 x", b"0 y"]
