"""kcat's ``-H`` and a slow consumer on real servers: ``pub --header NAME=VALUE`` on the
redesign's ext topics (read back with ``tail --format '%h'``) and refused, before
anything is published, where no ext topic is; ``tail --rate N`` paced by RDY.

Exit codes and error lines come from the console script's own ``main()``; message counts
and depths from nsqd's ``/stats``.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time

import pytest

from nsqctl.cli.commands.tail import FLUSH_INTERVAL
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message, finish_all
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, run_main
from tests.helpers.redesign import (
    TopicSpec,
    create_topics,
    message_counts,
    run_ok,
    unique,
)


@pytest.mark.redesign
def test_pub_header_reaches_tail_and_is_refused_without_an_ext_topic(
    redesign_cluster: Cluster,
) -> None:
    """Each --header goes into every message's JSON header, which %h prints back; on a
    topic without ext support, or with a malformed NAME=VALUE, pub exits 2 with one line
    and the topic stays empty."""
    c, ext, plain = redesign_cluster, unique("kcat-hdr"), unique("kcat-plain")
    asyncio.run(
        create_topics(c.lookupd_http, {ext: TopicSpec(partitions=2, ext=True), plain: TopicSpec()})
    )
    lookupd = ["--lookupd", c.lookupd_http[0]]
    headers = ["--header", "region=eu", "-H", "n=5", "--header", "empty="]
    published = run_main("pub", ext, *headers, "m1", "m2", "m3", *lookupd)
    assert published.returncode == 0, published.stderr
    assert sum(message_counts(c, ext).values()) == 3

    out = run_ok("tail", ext, "-n", "3", "-c", "c", "--format", "%h|%s\\n", *lookupd)
    rows = sorted(line.split("|") for line in out.splitlines())
    assert [body for _, body in rows] == ["m1", "m2", "m3"]
    for head, _ in rows:
        assert sorted(head.split(",")) == ["empty=", "n=5", "region=eu"]

    refused = run_main("pub", plain, "--header", "k=v", "x", "y", *lookupd)
    line = assert_one_line_error(refused, 2)
    assert "not an ext topic" in line and "nothing was published" in line, line
    bad = run_main("pub", ext, "--header", "no-equals-sign", "z", *lookupd)
    assert "NAME=VALUE" in assert_one_line_error(bad, 2)
    assert sum(message_counts(c, plain).values()) == 0
    assert sum(message_counts(c, ext).values()) == 3


@pytest.mark.original
def test_tail_rate_paces_delivery_and_header_is_refused_on_the_original(
    original_cluster: Cluster,
) -> None:
    """tail --rate 20 -n 20 prints 20 messages no faster than 20/s: the bucket lets one
    message through at once at this rate, so the 20th arrives at least 19/20 s after
    the first. The first line is written within about a flush interval of its arrival
    (three allow for a busy machine), so the first and last lines the test reads are at
    least 19/20 s minus three flush intervals apart; without --rate all twenty come
    within about 0.15 s. The messages not printed stay on the channel. An ext header
    has no place on the original family."""
    c, topic = original_cluster, unique("kcat-rate")
    nsqd = [c.nsqd_tcp[0]]
    asyncio.run(_publish(nsqd, topic, [b"r%d" % i for i in range(30)]))

    count, rate = 20, 20
    proc = subprocess.Popen(
        [
            NSQCTL,
            "tail",
            topic,
            "-c",
            "c",
            "-n",
            str(count),
            "--rate",
            str(rate),
            "--nsqd",
            nsqd[0],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    assert proc.stdout is not None
    seen: list[float] = []
    lines = []
    for line in proc.stdout:
        seen.append(time.monotonic())
        lines.append(line)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode(errors="replace")
    assert sorted(lines) == sorted(b"r%d\n" % i for i in range(count))
    least = (count - 1) / rate - 3 * FLUSH_INTERVAL
    assert seen[-1] - seen[0] >= least, (seen[-1] - seen[0], least)
    channel = _channel_depth(c.nsqd_http[0], topic, "c")
    assert channel == 30 - count, channel

    refused = run_main("pub", topic, "--header", "k=v", "x", "--nsqd", nsqd[0])
    assert "nothing was published" in assert_one_line_error(refused, 2)
    assert _channel_depth(c.nsqd_http[0], topic, "c") == 30 - count


async def _publish(nsqd: list[str], topic: str, bodies: list[bytes]) -> None:
    async with Producer(nsqd_tcp=nsqd) as producer:
        await producer.publish_many(topic, bodies)


def _channel_depth(http: str, topic: str, channel: str) -> int:
    """Messages the channel holds: queued, in flight or deferred (a message given back
    by tail's exit is counted whichever of those it is in)."""
    found = read_nsqd_stats(http, topic=topic).channel(topic, channel)
    assert found is not None, f"no channel {channel} on {http}"
    return found.depth + found.in_flight_count + found.deferred_count


@pytest.mark.original
def test_rate_limited_consumer_is_not_held_back_by_messages_in_flight(
    original_cluster: Cluster,
) -> None:
    """max_rate paces by RDY, so a reader that keeps messages in flight (as tail does
    until it has printed them) still gets the rate: ten messages at 20/s, none answered,
    arrive well within the five seconds allowed. Were the refill timer left asleep until
    a FIN or its one-second tick, the same ten would take about ten seconds."""
    c, topic = original_cluster, unique("kcat-held")
    nsqd = [c.nsqd_tcp[0]]
    asyncio.run(_publish(nsqd, topic, [b"h%d" % i for i in range(12)]))
    assert asyncio.run(_held_arrivals(nsqd, topic, want=10, rate=20, within=5.0)) >= 10


async def _held_arrivals(nsqd: list[str], topic: str, want: int, rate: float, within: float) -> int:
    """Messages that arrived within ``within`` seconds, none answered until the end."""
    held: list[Message] = []
    enough = asyncio.Event()

    def hold(msg: Message) -> None:
        msg.disable_auto_response()
        held.append(msg)
        if len(held) >= want:
            enough.set()

    consumer = Consumer(
        topic, "c", hold, nsqd_tcp=nsqd, options=ConsumerOptions(max_rate=rate, max_in_flight=200)
    )
    await consumer.start()
    try:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await enough.wait()
        return len(held)
    finally:
        finish_all(held)
        await consumer.stop(timeout=5)
