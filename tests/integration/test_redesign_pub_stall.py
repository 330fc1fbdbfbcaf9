"""Keyed ``pub`` while one partition's leader stalls, on real youzan servers.

A keyed chunk of input becomes one batch per route. Batches of one route go stop-and-wait,
so while a partition has no answering leader its batches wait. ``pub`` must then stop
reading input once its window of batches in flight is full: the other partition's OKs
used to make room again and again, so the stalled route's batches, and the input read for
them, grew without bound (the soak saw RSS grow with the backlog, and the piled-up route
then drained slower than input came).

The stall is a SIGSTOP of partition 0's leader (its socket stays open and answers
nothing). The generator that feeds ``pub`` notes at every read how many lines ``pub``
holds unconfirmed; the leader is resumed when the stalled publish times out and reports
its wait, or, without a bound, once ``pub`` has read far past it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nsqctl.cli.commands.pub import WINDOW, PubPlan, PubResult, publish_stream
from nsqctl.cli.commands.pub_input import Batch
from nsqctl.cli.output.lazy_progress import LazyProgress
from nsqctl.connection import ConnectionConfig
from nsqctl.failover import FailoverEvent
from nsqctl.producer import Producer
from nsqctl.servers import cluster, process
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from tests.helpers.cli import NSQCTL, clean_env
from tests.helpers.failover import leader_of, lookup_partitions
from tests.helpers.redesign import (
    TopicSpec,
    by_partition,
    create_topics,
    eventually,
    message_counts,
    read_messages,
    unique,
)

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(180)]

BATCH = 200
KEYS = 16
#: Lines pub may hold read but not OK'd with a bounded window: WINDOW batches plus the
#: chunk that overfills it, the reader's queue (2), the batch the reader thread holds
#: while it waits to hand it over, and one to spare.
BOUND = (WINDOW + 1 + 2 + 1 + 1) * BATCH
#: How far past the bound an unbounded pub reads before the leader is resumed anyway.
BEYOND = 10 * BOUND
BEFORE_STALL = 5  # batches published with both leaders up
MOVED_RATE = 2000  # lines/s of the publish the leaders move under


@pytest.fixture(scope="module")
def cluster3(redesign_bins: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """3 nsqd for both tests: partitions on separate nodes, and replicas to move to (a
    stalled node is always resumed, so one cluster serves both)."""
    c = cluster.start(
        "redesign", tmp_path_factory.mktemp("pubstall"), nsqd=3, bin_dir=redesign_bins
    )
    try:
        yield c
    finally:
        c.kill()  # thrown away: no node need leave gracefully


def _line(i: int) -> bytes:
    return b'{"k":"k%02d","seq":%d}' % (i % KEYS, i // KEYS)


def _stored(c: Cluster, topic: str) -> int:
    return sum(message_counts(c, topic).values())


def _publish_through_stall(
    c: Cluster,
    plan: PubPlan,
    stalled: list[NodeRecord],
    total: int,
    line: Callable[[int], bytes],
    resume_on: Callable[[FailoverEvent], bool],
) -> tuple[PubResult, list[int]]:
    """``publish_stream`` of ``plan`` fed ``total`` lines, a batch of BATCH a read. The
    ``stalled`` nodes are SIGSTOPped once the first BEFORE_STALL batches are stored, and
    resumed on a failover event ``resume_on`` picks, or once the input was read to its end
    (far past any bound), or on the way out whatever happens. Returns pub's result and the
    lines it held read but not OK'd at each read after the stall."""
    result = PubResult()
    unconfirmed: list[int] = []

    def resume() -> None:
        for node in stalled:
            process.resume(node)

    def source() -> Iterator[Batch]:
        for n in itertools.count():
            start = n * BATCH
            if n == BEFORE_STALL:
                # Stored first: only publishes begun after the topic took one ride out a
                # lost leader (the earlier ones would give up as on a typo).
                eventually(
                    lambda: _stored(c, plan.topic) == BEFORE_STALL * BATCH,
                    30,
                    "lines before the stall stored",
                )
                for node in stalled:
                    process.pause(node)
            if n >= BEFORE_STALL:
                unconfirmed.append(start - result.published)
            if start >= total:
                resume()  # read far past the bound: no bound
                return
            yield Batch([line(i) for i in range(start, start + BATCH)], start + 1, None, 0, False)

    def on_failover(event: FailoverEvent) -> None:
        if resume_on(event):
            resume()

    producer = Producer(
        lookupd_http=c.lookupd_http,
        config=ConnectionConfig(request_timeout=2.0, connect_timeout=1.0),
        on_failover=on_failover,
    )
    progress = LazyProgress("", None, enabled=False)
    try:
        asyncio.run(publish_stream(producer, plan, source(), progress, result))
    finally:
        resume()
    return result, unconfirmed


def test_keyed_pub_stops_reading_while_a_partition_leader_stalls(cluster3: Cluster) -> None:
    c = cluster3
    topic = unique("stall")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2, replicas=1)}))
    leaders = lookup_partitions(c.lookupd_http[0], topic)
    assert len(set(leaders.values())) == 2, leaders  # one stalled node leaves a route up
    total = (BEFORE_STALL * BATCH) + BOUND + BEYOND
    result, unconfirmed = _publish_through_stall(
        c,
        PubPlan(topic, BATCH, shard_field="k"),
        [leader_of(c, topic, 0)],
        total,
        _line,
        # the stalled publish timed out: the window is full
        lambda event: event.kind == "waiting",
    )
    assert result.error is None, result.error
    assert result.published == total
    assert max(unconfirmed) <= BOUND, (max(unconfirmed), BOUND)
    # A batch the stalled nsqd took before its reply timed out is stored again by the retry.
    assert total <= _stored(c, topic) <= total + BOUND, (_stored(c, topic), total)


def test_unkeyed_pub_keeps_a_window_per_partition_leader(cluster3: Cluster) -> None:
    """An unkeyed publish pipelines WINDOW batches on each partition leader's connection.
    With both leaders stalled it reads ahead that many per leader, more than one window
    shared by the topic would allow, and no further; once they resume, every line is
    published."""
    c = cluster3
    topic = unique("spread")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2, replicas=1)}))
    assert len(set(lookup_partitions(c.lookupd_http[0], topic).values())) == 2
    per_leader = (2 * WINDOW + 1 + 2 + 1 + 1) * BATCH  # as BOUND, with a window per leader
    total = BEFORE_STALL * BATCH + 2 * per_leader
    result, unconfirmed = _publish_through_stall(
        c,
        PubPlan(topic, BATCH),
        [leader_of(c, topic, partition) for partition in (0, 1)],
        total,
        lambda i: b"spread-%06d" % i,
        lambda event: True,  # a stalled publish gave up waiting on its reply
    )
    assert result.error is None, result.error
    assert result.published == total
    assert BOUND < max(unconfirmed) <= per_leader, (max(unconfirmed), BOUND, per_leader)
    assert total <= _stored(c, topic) <= total + per_leader


def _led_elsewhere(c: Cluster, topic: str, partition: int, old: int) -> bool:
    return lookup_partitions(c.lookupd_http[0], topic).get(partition, old) != old


def _move(c: Cluster, topic: str, partition: int) -> None:
    """``nsqctl topic move`` of the partition's leader away; done once ``/lookup`` names
    another leader or the command ends (youzan elects the copy with the least load
    factor, whatever ``--to`` says; the command's wait for a full ISR is cut short)."""
    old = leader_of(c, topic, partition).tcp_port
    target = next(n for n in c.nsqds if n.tcp_port != old)
    argv = ["topic", "move", topic, "--partition", str(partition), "--to", target.http_address]
    mover = subprocess.Popen(
        [NSQCTL, *argv, "--lookupd", c.lookupd_http[0], "--wait", "60", "--yes"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    moved = False

    def done() -> bool:
        nonlocal moved
        moved = moved or _led_elsewhere(c, topic, partition, old)
        return moved or mover.poll() is not None

    try:
        eventually(done, 60, f"{topic}/{partition} led by another nsqd than {old}")
    finally:
        if mover.poll() is None:
            mover.terminate()
        _, err = mover.communicate(timeout=30)
    # Leadership left the old nsqd, maybe to come back to it: youzan may elect it again
    # (the command then says whom it elected in turn).
    assert moved or b"elected" in err, err.decode()[-500:]


def test_keyed_pub_through_leader_moves_publishes_every_line_in_key_order(
    cluster3: Cluster, tmp_path: Path
) -> None:
    """The soak's case: ``pub --shard-field`` at a steady rate while partition leaders
    move; it must end by itself once its input ends, every line OK'd and stored in
    per-key order. Input is fed until both moves are done, however long a loaded
    machine makes them take, so the publish is still running through each move."""
    c = cluster3
    topic = unique("moves")
    spec = TopicSpec(partitions=2, replicas=3, ordered=True)
    asyncio.run(create_topics(c.lookupd_http, {topic: spec}))
    argv = ["pub", topic, "--lookupd", c.lookupd_http[0], "--shard-field", "k"]
    argv += ["--rate", str(MOVED_RATE), "--json"]
    proc = subprocess.Popen(
        [NSQCTL, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    feeder = _Feeder(proc)
    feeder.start()

    def published_past(goal: int) -> bool:
        if proc.poll() is not None:
            assert proc.stderr is not None
            why = proc.stderr.read().decode()[-2000:]
            raise AssertionError(f"pub ended while its input was open ({proc.returncode}): {why}")
        return sum(message_counts(c, topic).values()) > goal

    try:
        for partition in (0, 1):
            goal = sum(message_counts(c, topic).values()) + MOVED_RATE
            eventually(lambda: published_past(goal), 30, "pub publishing between moves")  # noqa: B023
            _move(c, topic, partition)
        goal = sum(message_counts(c, topic).values()) + MOVED_RATE
        eventually(lambda: published_past(goal), 30, "pub publishing after the moves")
        written = feeder.finish()
        out, err = proc.communicate(timeout=60)
    finally:
        feeder.finish()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    lines = [_line(i) for i in range(written)]
    assert json.loads(out)["published"] == len(lines)
    total = sum(message_counts(c, topic).values())
    got = asyncio.run(
        read_messages(c.lookupd_http, topic, "c", total, timeout=60, ordered=True, max_in_flight=4)
    )
    seqs: dict[str, list[int]] = defaultdict(list)
    seen: set[bytes] = set()
    for part in by_partition(got).values():  # storage order
        for msg in part:
            if msg.body not in seen:  # a resent batch's second copy is a duplicate
                seen.add(msg.body)
                record = json.loads(msg.body)
                seqs[record["k"]].append(record["seq"])
    assert seen == set(lines)
    for key, got_seqs in seqs.items():
        fed = len(range(int(key[1:]), written, KEYS))
        assert got_seqs == list(range(fed)), f"{key} out of order across the moves"


class _Feeder:
    """Writes numbered lines into pub's stdin from a thread until :meth:`finish`: pub
    reads at its ``--rate``, so the pipe's back-pressure paces the writes, and the count
    written is what pub must publish. ``communicate()`` closes the pipe afterwards."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None
        self._stdin = proc.stdin
        self._stop = threading.Event()
        self._written = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                chunk = [_line(self._written + i) for i in range(BATCH)]
                self._stdin.write(b"\n".join(chunk) + b"\n")
                self._stdin.flush()
                self._written += BATCH
        except (BrokenPipeError, ValueError):
            pass  # pub ended; the test reports why

    def finish(self) -> int:
        """Stop feeding and return how many lines pub was given."""
        self._stop.set()
        self._thread.join(timeout=30)
        return self._written
