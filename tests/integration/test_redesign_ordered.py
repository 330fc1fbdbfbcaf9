"""Ordered subscription on real youzan servers: the tail scenario operators run, per-key
order at scale, and gaps/regressions forced with the channel's own offset controls."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nsqctl import protocol as p
from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions, OrderViolation
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers import cluster, process
from tests.conftest import StartCluster
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, cli
from tests.helpers.names import unique
from tests.helpers.redesign import TopicSpec, create_topics
from tests.helpers.wait import wait_for

pytestmark = pytest.mark.redesign

#: Every session-cluster test's topic, by test: youzan's nsqlookupd enables writes on a
#: new topic in a topic check, and drops a check asked for within 6 s of the last one, so
#: topics made one test after another wait about 8 s each; made at once, one check serves
#: them all.
SPECS = {
    "ord20k": TopicSpec(partitions=4, replicas=1, ordered=True),
    "ordgap": TopicSpec(partitions=1, replicas=1, ordered=True),
    "ordstart": TopicSpec(partitions=1, replicas=1, ordered=True),
    "advplain": TopicSpec(partitions=2, replicas=1),
    "ordturn": TopicSpec(partitions=3, replicas=1, ordered=True),
    "ordreq": TopicSpec(partitions=1, replicas=1, ordered=True),
}


@pytest.fixture(scope="module")
def topics(redesign_cluster: cluster.Cluster) -> dict[str, str]:
    """:data:`SPECS`' topics on the session redesign cluster, created at once, no channels
    (each test makes the ones it reads before it publishes)."""
    names = {key: unique(key) for key in SPECS}
    specs = {names[key]: spec for key, spec in SPECS.items()}
    asyncio.run(create_topics(redesign_cluster.lookupd_http, specs, channels=()))
    return names


def test_fresh_sandbox_ordered_tail_prints_in_order_and_leaves_nothing_in_flight(
    tmp_path: Path,
) -> None:
    """The issue's scenario, command for command, on a sandbox that has just started."""
    sbx = ["--dir", str(tmp_path / "sbx")]
    up = cli("sandbox", "up", "--flavor", "redesign", "--nsqd", "2", *sbx)
    assert up.returncode == 0, up.stderr
    try:
        env_lines = cli("sandbox", "env", *sbx).stdout
        env = clean_env(
            dict(
                line.removeprefix("export ").replace("'", "").split("=", 1)
                for line in env_lines.splitlines()
            )
        )

        def run(
            *args: str, data: bytes | None = None, timeout: float = 120
        ) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run(
                [NSQCTL, *args],
                input=data or b"",
                capture_output=True,
                env=env,
                timeout=timeout,
                check=False,
            )

        made = run(
            "sandbox",
            "topic",
            "create",
            "seq",
            "--partitions",
            "2",
            "--replicas",
            "1",
            "--ordered",
            *sbx,
        )
        assert made.returncode == 0, made.stderr
        chan = run("channel", "create", "seq", "c")
        assert chan.returncode == 0, chan.stderr
        body = "".join(f"{i}\n" for i in range(1, 2001)).encode()
        pub = run("pub", "seq", "--shard", "k1", data=body)
        assert pub.returncode == 0, pub.stderr
        tail = run("tail", "seq", "--ordered", "-c", "c", "-n", "2000")
        assert tail.returncode == 0, tail.stderr
        assert tail.stdout == body
        assert b"FIN failed" not in tail.stderr and b"REQ failed" not in tail.stderr
        # Nothing was left in flight: a second ordered tail on the channel gets nothing.
        late = subprocess.Popen(
            [NSQCTL, "tail", "seq", "--ordered", "-c", "c", "-n", "1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            out, _ = late.communicate(timeout=5)
            pytest.fail(f"second tail ended with {late.returncode} and output {out!r}")
        except subprocess.TimeoutExpired:
            late.terminate()
            out, _ = late.communicate(timeout=10)
        assert out == b""
    finally:
        cli("sandbox", "down", *sbx)
    # Its data stays; a new sandbox there would inherit its topics, placed on nsqds it
    # does not have (nsqlookupd then calls the cluster unstable): refused, nothing started
    again = cli("sandbox", "up", "--flavor", "redesign", "--nsqd", "2", *sbx)
    assert "sandbox down --purge" in assert_one_line_error(again, 2)
    assert cli("sandbox", "down", "--purge", *sbx).returncode == 0


def _create_channel(topic: str, channel: str, lookupd: list[str]) -> None:
    proc = cli("channel", "create", topic, channel, "--lookupd", lookupd[0])
    assert proc.returncode == 0, proc.stderr


async def _consume(
    consumer_kwargs: dict[str, Any], until: int, timeout: float = 90
) -> tuple[list[Message], Consumer]:
    got: list[Message] = []
    done = asyncio.Event()

    def handle(msg: Message) -> None:
        got.append(msg)
        if len(got) >= until:
            done.set()

    consumer = Consumer(handler=handle, **consumer_kwargs)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), timeout)
        await asyncio.sleep(0.5)  # anything extra (a duplicate) would arrive now
    finally:
        await consumer.stop()
    return got, consumer


async def test_20k_messages_over_100_keys_on_4_partitions_keep_per_key_order(
    redesign_cluster: cluster.Cluster, topics: dict[str, str]
) -> None:
    lookupd = redesign_cluster.lookupd_http
    topic = topics["ord20k"]
    _create_channel(topic, "c", lookupd)
    keys = [f"key-{k}" for k in range(100)]
    per_key = 200
    async with Producer(lookupd_http=lookupd) as producer:
        for start in range(0, per_key, 50):
            for key in keys:
                bodies = [f"{key}:{i}".encode() for i in range(start, start + 50)]
                await producer.publish_many(topic, bodies, shard_key=key)
    got, consumer = await _consume(
        dict(
            topic=topic,
            channel="c",
            lookupd_http=lookupd,
            options=ConsumerOptions(ordered=True, max_in_flight=4),
        ),
        until=len(keys) * per_key,
    )
    seen: dict[str, list[int]] = {}
    partitions: dict[str, set[int | None]] = {}
    for msg in got:
        key, _, seq = msg.body.decode().partition(":")
        seen.setdefault(key, []).append(int(seq))
        partitions.setdefault(key, set()).add(msg.partition)
    assert len(got) == len(keys) * per_key, "a message was lost or delivered twice"
    assert all(seen[key] == list(range(per_key)) for key in keys)
    assert all(len(parts) == 1 for parts in partitions.values()), "a key spans partitions"
    assert {m.partition for m in got} == {0, 1, 2, 3}
    assert consumer.stats.order_regressions == 0 and consumer.stats.order_gaps == 0


async def test_gap_and_regression_are_reported_when_the_channel_offset_moves(
    redesign_cluster: cluster.Cluster, topics: dict[str, str]
) -> None:
    """A forward setoffset skips messages (a gap); a backward one replays (a regression)."""
    lookupd = redesign_cluster.lookupd_http
    topic = topics["ordgap"]
    _create_channel(topic, "c", lookupd)
    async with Producer(lookupd_http=lookupd) as producer:
        await producer.publish_many(topic, [f"m{i}".encode() for i in range(100)], partition=0)
    got: list[Message] = []
    events: list[OrderViolation] = []
    pause_at = {10, 12}

    def handle(msg: Message) -> None:
        got.append(msg)
        if len(got) in pause_at:
            consumer.set_max_in_flight(0)  # RDY 0 goes out before this message's FIN

    consumer = Consumer(
        topic,
        "c",
        handle,
        lookupd_http=lookupd,
        options=ConsumerOptions(ordered=True),
        on_order_violation=events.append,
    )

    async def arrived(count: int) -> None:
        said = f"{count} messages to arrive"
        await wait_for(lambda: len(got) >= count, 30, lambda: f"{said}, got {len(got)}", 0.05)

    def set_offset(msgcount: int) -> None:
        proc = cli(
            "channel",
            "setoffset",
            topic,
            "c",
            "--partition",
            "0",
            "--msgcount",
            str(msgcount),
            "--yes",
            "--lookupd",
            lookupd[0],
        )
        assert proc.returncode == 0, proc.stderr
        consumer.set_max_in_flight(1)

    await consumer.start()
    try:
        await arrived(10)
        await asyncio.to_thread(set_offset, 60)
        await arrived(12)
        await asyncio.to_thread(set_offset, 5)
        await arrived(14)
    finally:
        await consumer.stop()
    seq = [int(m.body[1:]) for m in got]
    kinds = [e.kind for e in events]
    assert kinds == ["gap", "regression"], (kinds, seq)
    # What the server did, read off the bodies: one jump forward (msgcount 60 lands near
    # m60), then one jump back (near m5), each followed by messages in order.
    steps = [b - a for a, b in itertools.pairwise(seq)]
    jumps = [(i, step) for i, step in enumerate(steps) if step != 1]
    assert len(jumps) == 2 and jumps[0][1] > 1 and jumps[1][1] < 0, seq
    assert seq[: jumps[0][0] + 1] == list(range(jumps[0][0] + 1)) and seq[0] == 0
    assert 55 <= seq[jumps[0][0] + 1] <= 61 and 3 <= seq[jumps[1][0] + 1] <= 6, seq
    gap, regression = events
    assert gap.expected_offset is not None and gap.offset > gap.expected_offset
    assert regression.offset < regression.previous_offset
    assert (consumer.stats.order_gaps, consumer.stats.order_regressions) == (1, 1)


async def test_a_requeue_with_a_delay_on_an_ordered_partition_comes_back_after_the_delay(
    redesign_cluster: cluster.Cluster, topics: dict[str, str]
) -> None:
    """youzan's nsqd ignores REQ's delay on an ordered subscription (the message stays in
    flight until its timeout and the partition waits for it). The consumer holds such a
    requeue for its delay, TOUCHing it so that a delay longer than the message timeout
    (2 s here) does not have nsqd send it again and again (each an attempt more), and
    sends REQ 0: the message comes back after the delay as its second attempt, then the
    rest follow in order. A requeue still held at close() is given back then: the next
    consumer of the channel gets it at once."""
    lookupd = redesign_cluster.lookupd_http
    topic = topics["ordreq"]
    _create_channel(topic, "c", lookupd)
    async with Producer(lookupd_http=lookupd) as producer:
        await producer.publish_many(topic, [b"m0", b"m1", b"m2", b"held"], partition=0)
    got: list[tuple[bytes, int, float]] = []
    requeued_at: dict[bytes, float] = {}

    def handle(msg: Message) -> None:
        now = asyncio.get_running_loop().time()
        got.append((msg.body, msg.attempts, now))
        if msg.attempts == 1 and msg.body in (b"m1", b"held"):
            requeued_at[msg.body] = now
            msg.requeue(delay=3.0 if msg.body == b"m1" else 600.0, backoff=False)

    options = ConsumerOptions(ordered=True)
    short = ConnectionConfig(msg_timeout_ms=2000)  # shorter than the delay: held, touched
    consumer = Consumer(topic, "c", handle, lookupd_http=lookupd, options=options, config=short)
    async with consumer:
        await wait_for(lambda: b"held" in requeued_at, 30, lambda: f"four deliveries: {got}")
    assert [(body, attempts) for body, attempts, _ in got] == [
        (b"m0", 1),
        (b"m1", 1),
        (b"m1", 2),
        (b"m2", 1),
        (b"held", 1),
    ]
    assert got[2][2] - requeued_at[b"m1"] >= 2.9  # the delay asked, not an immediate retry
    assert consumer.stats.touched >= 2  # nsqd's 2 s timeout never ran out while it was held
    async with Consumer(topic, "c", lookupd_http=lookupd, options=options) as again:
        async with asyncio.timeout(30):  # far below the 600 s held and nsqd's 60 s timeout
            async for msg in again:
                msg.finish()
                break
    assert (msg.body, msg.attempts) == (b"held", 2)


async def test_a_requeue_held_when_nsqd_restarts_is_held_again_and_the_partition_goes_on(
    start_cluster: StartCluster,
) -> None:
    """An ordered requeue held for its delay on a connection that closes (its nsqd
    restarted): nsqd sends the message again on the new connection. That copy is held for
    the rest of the delay and given back, then handled, and the partition goes on: it is
    not taken for a duplicate and dropped unanswered (the partition stuck for good). Its
    own one-nsqd cluster: the test restarts the nsqd."""
    c = start_cluster("redesign", nsqd=1)
    lookupd = c.lookupd_http
    topic = unique("ordlost")
    await create_topics(lookupd, {topic: SPECS["ordreq"]}, channels=())
    await asyncio.to_thread(_create_channel, topic, "c", lookupd)
    async with Producer(lookupd_http=lookupd) as producer:
        await producer.publish_many(topic, [b"m0", b"m1"], partition=0)
    got: list[tuple[bytes, float]] = []
    requeued = asyncio.Event()

    def handle(msg: Message) -> None:
        got.append((msg.body, asyncio.get_running_loop().time()))
        if not requeued.is_set():  # the first m0 (nsqd's restart may count attempts anew)
            requeued.set()
            msg.requeue(delay=8.0, backoff=False)

    options = ConsumerOptions(ordered=True)
    async with Consumer(topic, "c", handle, lookupd_http=lookupd, options=options):
        async with asyncio.timeout(30):
            await requeued.wait()
        [node] = c.nsqds
        await asyncio.to_thread(process.stop, node)
        await asyncio.to_thread(c.restart, node)

        def bodies() -> list[bytes]:
            return [body for body, _ in got]

        await wait_for(lambda: b"m1" in bodies(), 60, lambda: f"m0 again, then m1: {got}")
    assert bodies() == [b"m0", b"m0", b"m1"], got
    assert got[1][1] - got[0][1] >= 7.9  # the delay asked was kept across the restart


def test_a_start_position_on_an_ordered_topic_says_how_to_move_the_channel(
    redesign_cluster: cluster.Cluster, topics: dict[str, str]
) -> None:
    """youzan's SUB_ORDERED takes no start and SUB_ADVANCED is refused on ordered topics."""
    lookupd = redesign_cluster.lookupd_http
    topic = topics["ordstart"]
    for extra in (["--ordered"], []):
        proc = cli("tail", topic, "--from-start", "-n", "1", *extra, "--lookupd", lookupd[0])
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert "channel setoffset" in lines[0] and "Traceback" not in proc.stderr


async def test_a_start_position_on_a_plain_topic_is_not_an_ordered_subscription(
    redesign_cluster: cluster.Cluster, topics: dict[str, str]
) -> None:
    """SUB_ADVANCED frames carry offsets like ordered ones, but the channel is not ordered:
    many messages are in flight and a requeued one comes back after later ones. That is
    no order regression, and the requeued copy must reach the handler again."""
    lookupd = redesign_cluster.lookupd_http
    topic = topics["advplain"]
    bodies = [f"m{i}".encode() for i in range(60)]
    async with Producer(lookupd_http=lookupd) as producer:
        await producer.publish_many(topic, bodies)
    handled: list[bytes] = []
    requeued: list[bytes] = []
    events: list[OrderViolation] = []
    done = asyncio.Event()

    def handle(msg: Message) -> None:
        if msg.attempts == 1 and int(msg.body[1:]) % 3 == 0:
            requeued.append(msg.body)
            msg.requeue(delay=0, backoff=False)
            return
        handled.append(msg.body)
        if len(handled) >= len(bodies):
            done.set()

    consumer = Consumer(
        topic,
        "c",
        handle,
        lookupd_http=lookupd,
        options=ConsumerOptions(start=p.start_msgcount(0), max_in_flight=50),
        on_order_violation=events.append,
    )
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), 60)
        await asyncio.sleep(0.5)  # a duplicate would arrive now
    finally:
        await consumer.stop()
    assert len(requeued) == 20
    assert sorted(handled) == sorted(bodies), "a message was lost or handled twice"
    assert events == [] and consumer.stats.order_regressions == 0
    assert consumer.stats.order_gaps == 0


async def test_an_ordered_partition_with_messages_is_served_while_others_are_empty(
    redesign_cluster: cluster.Cluster, topics: dict[str, str]
) -> None:
    """max_in_flight 1 over 3 ordered partitions: RDY 1 can sit on one partition at a
    time, and the one holding messages must get it within a round of quick turns, not
    after go-nsq's idle rotation (made a minute long here, so a stall cannot pass). Each
    partition in turn holds the messages, for a fresh consumer: whichever partition got
    the first RDY, at least two of the three runs find it on an empty one."""
    lookupd = redesign_cluster.lookupd_http
    topic = topics["ordturn"]
    _create_channel(topic, "ledger", lookupd)
    async with Producer(lookupd_http=lookupd) as producer:
        for partition in range(3):
            bodies = [f"{partition}:{i}".encode() for i in range(5)]
            await producer.publish_many(topic, bodies, partition=partition)
            got, _ = await _consume(
                dict(
                    topic=topic,
                    channel="ledger",
                    lookupd_http=lookupd,
                    options=ConsumerOptions(
                        ordered=True,
                        max_in_flight=1,
                        low_rdy_idle_timeout=60.0,
                        rdy_redistribute_interval=60.0,
                    ),
                ),
                until=5,
                timeout=15,
            )
            assert [m.body for m in got] == bodies
