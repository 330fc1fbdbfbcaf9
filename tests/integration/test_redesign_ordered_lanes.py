"""`nsqctl tail --ordered` with its partitions read on threads (raw lines to a file: the
path ``nsqctl.consumer.lanes`` serves) through a partition leader's kill -9, and into an
output that cannot be written, and which connections it may read on threads at all.

3 nsqd, an ordered topic of 2 partitions, replicas 3, keyed JSON lines (``--shard-field``:
each key stays on one partition). The leader of partition 0 is killed while the tail is
in the middle of the first half; the second half is published once both partitions
are writable again. Every line must be printed exactly once and each key's
sequence numbers must rise: nothing lost, duplicated or reordered across the hand-back
of the thread's partition to the event loop, the failover and the new lane.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.consumer.lanes import OrderedLanes
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from tests.conftest import StartCluster
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, run_cli
from tests.helpers.failover import kill_leader, leader_of, wait_new_leader
from tests.helpers.lane_sink import Sink
from tests.helpers.redesign import (
    TopicSpec,
    channel_stats,
    create_topics,
    eventually,
    subscribe_ordered_once,
    unique,
)
from tests.helpers.stalled import interrupted_while_stalled
from tests.helpers.wait import wait_for

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(300)]

KEYS = 16
FIRST, SECOND = 50_000, 4_000
WINDOW = ("--failover-window", "150")


def _pub(c: Cluster, topic: str, lines: list[str], source: Path) -> None:
    source.write_text("\n".join(lines) + "\n")
    with source.open("rb") as stdin:
        done = subprocess.run(
            [NSQCTL, "pub", topic, "--lookupd", c.lookupd_http[0], "--shard-field", "k"],
            stdin=stdin,
            capture_output=True,
            env=clean_env(),
            timeout=200,
        )
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def _lines(out: Path) -> list[str]:
    return [line for line in out.read_text().splitlines() if line.endswith("}")]


def test_ordered_tail_on_threads_loses_duplicates_and_reorders_nothing_through_a_leader_kill(
    start_cluster: StartCluster, tmp_path: Path
) -> None:
    c = start_cluster("redesign", nsqd=3)
    topic = unique("lanekill")
    asyncio.run(
        create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2, replicas=3, ordered=True)})
    )
    keyed = [json.dumps({"k": f"k{i % KEYS}", "seq": i}) for i in range(FIRST + SECOND)]
    out = tmp_path / "ordered.txt"
    tail = subprocess.Popen(
        [NSQCTL, "tail", topic, "-c", "c", "--ordered", "--lookupd", c.lookupd_http[0], *WINDOW],
        stdout=out.open("wb"),
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    try:
        eventually(
            lambda: sum(ch.client_count for ch in channel_stats(c, topic, "c").values()) == 2,
            30,
            "the tail subscribed to both partitions",
        )
        _pub(c, topic, keyed[:FIRST], tmp_path / "first.txt")
        eventually(lambda: len(_lines(out)) >= 5_000, 60, "the tail printing the first half")
        killed = kill_leader(c, topic, 0)
        printed_at_kill = len(_lines(out))
        wait_new_leader(c, topic, killed, partitions=(0, 1))
        _pub(c, topic, keyed[FIRST:], tmp_path / "second.txt")
        assert leader_of(c, topic, 0).tcp_port != killed.tcp_port
        eventually(lambda: len(_lines(out)) >= len(keyed), 150, "every line printed")
    finally:
        tail.send_signal(signal.SIGINT)
        _, err = tail.communicate(timeout=30)
    stderr = err.decode()
    print(f"{printed_at_kill} lines printed at the kill", stderr, sep="\n")
    assert tail.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr and "order regression" not in stderr

    lines = _lines(out)
    counts = Counter(lines)
    assert [line for line, n in counts.items() if n > 1] == []  # nothing twice
    assert set(lines) == set(keyed)  # nothing lost
    by_key: dict[str, list[int]] = defaultdict(list)
    for line in lines:
        record = json.loads(line)
        by_key[record["k"]].append(record["seq"])
    for key, seqs in by_key.items():
        assert seqs == sorted(seqs), f"key {key} out of order"


def _channel_holds(c: Cluster, topic: str, count: int, requeued: int, channel: str = "c") -> None:
    """Wait until ``channel`` holds ``count`` messages, none in flight or timed out, and
    check that at most ``requeued`` were ever given back (one in flight per partition)."""
    totals: list[tuple[int, int, int, int]] = []

    def settled() -> bool:
        chans = channel_stats(c, topic, channel).values()
        totals[:] = [
            (
                sum(ch.depth for ch in chans),
                sum(ch.in_flight_count for ch in chans),
                sum(ch.timeout_count for ch in chans),
                sum(ch.requeue_count for ch in chans),
            )
        ]
        return totals[0][:3] == (count, 0, 0)

    eventually(settled, 30, lambda: f"(depth, in flight, timed out, requeued) {totals}")
    assert totals[0][3] <= requeued, totals


def test_ordered_tail_on_threads_fins_only_what_it_wrote_on_a_full_disk_and_at_n(
    redesign_cluster: Cluster, tmp_path: Path
) -> None:
    """Standard output on /dev/full (every write fails with ENOSPC; a file, so the
    partitions are read on threads): the thread leaves its message to the loop, whose
    write fails too. tail says so in one line and exits 1 (it ended in a traceback), and
    FINs nothing: every message stays on the channel, given back at most once each.
    Then ``-n 5`` to a file: 5 lines, those 5 FINed and no other, the message each
    partition had in flight given back once."""
    c = redesign_cluster
    topic, count = unique("lanefull"), 20
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2, ordered=True)}))
    # Made ordered while empty: no reset under the tails below (a REQ of a message the
    # reset took back fails, a warning on stderr).
    asyncio.run(subscribe_ordered_once(c, topic))
    where = ["--lookupd", c.lookupd_http[0]]
    pub = run_cli(["pub", topic, *where], input=b"".join(b"%d\n" % i for i in range(count)))
    assert pub.returncode == 0, pub.stderr.decode()
    tail = ["tail", topic, "-c", "c", "--ordered", *where]
    proc = run_cli([*tail, "-n", str(count)], stdout=Path("/dev/full"))
    line = assert_one_line_error(proc, 1)
    assert "standard output" in line and "No space left on device" in line, line
    _channel_holds(c, topic, count, requeued=2)

    out = tmp_path / "five.txt"
    proc = run_cli([*tail, "-n", "5"], stdout=out)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr.decode()
    printed = out.read_bytes().splitlines()
    assert len(printed) == len(set(printed)) == 5, printed
    _channel_holds(c, topic, count - 5, requeued=4)


def test_ctrl_c_ends_an_ordered_tail_whose_reader_stalled_giving_the_rest_back_once(
    redesign_cluster: Cluster, tmp_path: Path
) -> None:
    """Standard output is a socket whose reader reads nothing (as ``| less`` scrolled
    back, a stopped reader): the tail fills it and waits in a write, on a partition's
    thread (raw lines) or on the loop (a template), one channel each. Ctrl-C must end it
    all the same, as it ends a tail whose reader keeps up: what was written is FINed,
    the rest stays on the durable channel, given back once (one in flight per
    partition), and a second tail reads exactly the messages the first did not print."""
    c = redesign_cluster
    topic, count = unique("lanestall"), 3000
    paths = {"threads": [], "loop": ["--format", "%s\\n"]}
    spec = {topic: TopicSpec(partitions=2, ordered=True)}
    asyncio.run(create_topics(c.lookupd_http, spec, channels=tuple(paths)))
    for channel in paths:
        asyncio.run(subscribe_ordered_once(c, topic, channel))
    where = ["--lookupd", c.lookupd_http[0]]
    bodies = [b"%05d-" % i + b"x" * 90 for i in range(count)]
    pub = run_cli(["pub", topic, *where], input=b"\n".join(bodies) + b"\n")
    assert pub.returncode == 0, pub.stderr.decode()
    for channel, output in paths.items():
        tail = ["tail", topic, "-c", channel, "--ordered", *where]
        lines = interrupted_while_stalled([*tail, *output])
        assert 0 < len(lines) < count and len(set(lines)) == len(lines), (channel, len(lines))
        assert set(lines) <= set(bodies), channel  # whole lines only
        left = count - len(lines)
        _channel_holds(c, topic, left, requeued=2, channel=channel)
        rest = tmp_path / f"{channel}.txt"
        proc = run_cli([*tail, "-n", str(left)], stdout=rest)
        assert proc.returncode == 0, proc.stderr.decode()
        again = rest.read_bytes().splitlines()
        assert sorted(again + lines) == sorted(bodies), channel  # once: printed or left


async def _one_message(
    c: Cluster, topic: str, producer: Producer, compression: str
) -> tuple[bool, list[bytes], list[bytes]]:
    """Subscribe ordered with ``compression``, lend what can be lent, publish one message:
    (lent, bodies handled on the loop, bodies handed to the thread)."""
    on_loop: list[bytes] = []
    consumer = Consumer(
        topic,
        "c",
        lambda msg: on_loop.append(msg.body),
        lookupd_http=c.lookupd_http,
        options=ConsumerOptions(ordered=True),
        config=ConnectionConfig(compression=compression),
    )
    await consumer.start()
    sink = Sink()
    lanes = OrderedLanes(lambda: consumer.connections, consumer.delivery, sink)
    try:
        (conn,) = consumer.connections.values()
        assert conn.identify is not None
        assert conn.identify.deflate == (compression == "deflate")  # really negotiated
        lanes.lend()
        lent = lanes.active == 1
        await producer.publish(topic, compression.encode())
        await wait_for(lambda: on_loop or sink.bodies, 30, f"the {compression} message")
    finally:
        lanes.stop()
        await consumer.close()
    return lent, on_loop, sink.bodies


async def test_a_compressed_connection_stays_on_the_loop_and_a_plain_one_goes_to_a_thread(
    redesign_cluster: Cluster,
) -> None:
    """A lane reads frames straight off the socket: a connection with a codec in between
    (deflate here; snappy and TLS are refused by the same check) must never be lent, and
    its partition is read on the loop as before; without one it is lent. youzan's nsqd
    negotiates deflate, so both are real connections."""
    c = redesign_cluster
    topic = unique("lanecodec")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, ordered=True)})
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        deflate = await _one_message(c, topic, producer, "deflate")
        plain = await _one_message(c, topic, producer, "none")
    assert deflate == (False, [b"deflate"], [])
    assert plain == (True, [], [b"none"])
