"""Redesign benchmark: nsqctl against youzan's own Go tools on a partitioned topic.

One run starts a redesign cluster on 127.0.0.1 through nsqctl's launcher (etcd +
nsqlookupd + ``--nsqds`` (2) youzan nsqd, stopped by PID at the end) and measures, in
the same run, nsqctl and youzan's tools built from the same vendored source
(``nsqctl.servers.build.bin_dir("redesign")``). The topics have ``--partitions`` (2)
partitions and ``--replicas`` (1) replicas, are created through the lookupd leader
(waiting until writable) and deleted at the end. youzan's nsqd keeps every topic in its
disk queue (there is no in-memory mode as in nsqio/nsq): the queue is on disk in every
row. Variants are interleaved, their order rotated each repeat (``--repeats``, 3);
medians and same-repeat ratios are reported.

Publishers (``--messages`` (250k) bodies of ``--size`` (100) bytes):

* ``nsqctl pub`` - ``nsqctl pub TOPIC --lookupd ADDR -q < FILE``, timed spawn to exit
  (interpreter start-up, lookup and connects included); stock options (batch 200).
* ``nsqctl publish_many`` - the library: one Producer through the lookupd, batches of 200,
  8 in flight per partition leader (as ``nsqctl pub``), timed from creating the Producer
  (lookup, connects included) to the last OK, in this process. Information: the row that
  runs like bench_writer does.
* ``to_nsq`` - youzan's ``to_nsq --topic T --lookupd-http-address ADDR < FILE`` (one
  synchronous PUB per line), ``--to-nsq-messages`` lines, timed spawn to exit.
  Reference for >= 20x.
* ``bench_writer`` - youzan's Go benchmark writer. It takes ONE nsqd address and writes
  the partition that nsqd leads, so one process per partition leader runs at once;
  ``--sleepfor=0`` (its default sleeps 1 s between batches), ``--size`` as the others,
  ``--bw-batch`` (200, nsqctl pub's batch) and ``--bw-conns`` (its own default, 100
  connections per process). It runs for a time: ``--runfor`` is aimed at ``--messages`` (a
  probe, then the median rate so far); its rate is the processes' count over the longest
  of their own durations (connects excluded). Reference for >= 1.0x.
* ``bench_writer 1 conn`` - the same with ``-c 1``: one connection per partition, as one
  nsqctl Producer has. Information.

Consumers (each run's topic gets the durable channel ``bench`` first, then the messages,
published with nsqctl's Producer through the lookupd and not timed):

* ``nsqctl tail`` / ``nsq_tail`` - ``nsqctl tail T --lookupd ADDR --channel bench -n N``
  and youzan's ``nsq_tail --topic T --channel bench --lookupd-http-address ADDR -n N``,
  stdout to /dev/null, timed spawn to exit, both at their default max-in-flight (200).
  Reference for >= 2x.
* ``nsqctl tail unbuffered`` - ``nsqctl tail`` with ``--output-buffer none`` (the stock
  tail leaves the redesign's nsqd its buffered output). Information: what unbuffered
  output would cost the redesign, which gains nothing from it (it confirms a channel's
  position at FIN).
* ``nsqctl tail --ordered`` / ``nsq_tail -ordered`` - the same on an ordered topic
  (``--ordered-messages``, messages/10: nsqd hands out one message at a time per
  partition there; nsqctl reads each partition on a thread of its own). Targets: >= 1.0x
  nsq_tail -ordered, >= 0.85x the ordered floor.
* ``nsqctl tail --ordered, before`` - with ``--before TREE``: the same command from
  another source tree (``PYTHONPATH=TREE``, e.g. a worktree of the commit before a
  change), interleaved with the rest: a before/after comparison in one run.
* ``ordered floor`` - ``ordered_floor.py``: the least a client can do on an ordered
  channel (blocking socket and thread per partition, recv -> FIN, no output), timed from
  the first SUB to the last FIN. Information: what nsqd's round trip leaves to any client.
* ``ordered floor, one loop`` - the same round trip on one asyncio event loop for all
  partitions (``--asyncio``), read in the transport's callback: nsqctl's process model
  with nothing of nsqctl's path. Information: what the loop costs against the threads.
* ``ordered floor, a loop each`` - the same with an event loop per partition, each on
  its own thread (``--loops``).
* ``ordered floor, writing lines`` - the thread floor doing what ``tail --ordered`` must
  do before each FIN: check the message's order and write its line (``--write-lines``):
  what a tail on a thread per partition could reach.
* ``ordered floor, writing lines, a process each`` - the same with each partition read in
  a process of its own (``--processes``, forked after connecting): what a tail could reach
  whose partitions never wait for one another's interpreter lock.
* ``nsqctl tail --ordered -n 1`` / ``nsq_tail -ordered -n 1`` - the ordered tails reading
  one message: their start-up (spawn, lookup, connect, SUB, exit). The summary also
  gives the ordered tails' rates with this taken out, comparable with the floor's.
* ``nsqctl Consumer`` - the library Consumer with a no-op handler in its own process
  (``bench_consumer.py``'s child), through the lookupd, ``--max-in-flight`` (2500 per
  partition), timed from creating the Consumer (lookup, connects, SUB included).
* ``bench_reader`` - youzan's Go benchmark reader, one process per partition leader at
  once (it takes one nsqd address and reads the partition that nsqd leads), GOMAXPROCS
  connections each, RDY 2500; ``--runfor`` aimed at ~70% of the messages so it never runs
  dry. Reference for >= 0.8x.

The runs share two topics (one plain, one ordered), created once: creating a redesign
topic takes seconds. A publisher is checked by what each partition gained; a consumer
reads a channel of its own, created before its messages are published (a youzan channel
starts at the end of the queue) and deleted after the run.

Delivery is verified through each partition leader's ``/stats`` in every run: publishers
by what the partitions' ``message_count`` gained (bench_writer: each process's own count
must be what its partition gained); tails and the Consumer by the channel (every message
there, ``depth`` 0 - everything FINed - and nothing in flight; nsq_tail exits at the N-th
message before FINing the last ones, so up to its max-in-flight may stay unconfirmed);
bench_reader's count must lie between what its partition confirmed and what it got (a
count that reaches it ran dry: that run is aimed shorter and done again). A run in which
a Go tool panicked is done again (up to 3 tries), the panic kept in the JSON. A run that
fails a check is reported FAILED and the script exits 1.

Run: ``python -m bench.bench_redesign`` (``--quick`` for a smoke run). See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import _common as c
from bench import bench_cli, bench_consumer
from nsqctl import admin
from nsqctl.cli.commands.pub import WINDOW

PUB = "nsqctl pub"
MANY = "nsqctl publish_many"
TO_NSQ = "to_nsq"
BW = "bench_writer"
BW1 = "bench_writer 1 conn"
TAIL = "nsqctl tail"
NSQ_TAIL = "nsq_tail"
TAIL_UNBUFFERED = "nsqctl tail unbuffered"
OTAIL = "nsqctl tail --ordered"
NSQ_OTAIL = "nsq_tail -ordered"
FLOOR = "ordered floor"
LOOP_FLOOR = "ordered floor, one loop"
LOOPS_FLOOR = "ordered floor, a loop each"
LINES_FLOOR = "ordered floor, writing lines"
PROCS_FLOOR = "ordered floor, writing lines, a process each"
OTAIL1 = "nsqctl tail --ordered -n 1"
NSQ_OTAIL1 = "nsq_tail -ordered -n 1"
OTAIL_BEFORE = "nsqctl tail --ordered, before"  # --before TREE: that tree's nsqctl
CONSUMER = "nsqctl Consumer"
BR = "bench_reader"

#: (row, reference, target ratio): what the summary checks (``--require-targets``).
TARGETS = (
    (PUB, BW, 0.6),
    (PUB, TO_NSQ, 20.0),
    (MANY, BW, 1.0),
    (TAIL, NSQ_TAIL, 2.0),
    (OTAIL, NSQ_OTAIL, 1.0),
    (OTAIL, FLOOR, 0.85),
    (CONSUMER, BR, 0.8),
)
#: The references each row is shown against.
REFERENCES = {
    PUB: (BW, TO_NSQ),
    MANY: (BW, BW1, TO_NSQ),
    TAIL: (NSQ_TAIL,),
    TAIL_UNBUFFERED: (TAIL, NSQ_TAIL),
    OTAIL: (NSQ_OTAIL, FLOOR, OTAIL_BEFORE),
    OTAIL_BEFORE: (NSQ_OTAIL,),
    FLOOR: (NSQ_OTAIL,),
    LOOP_FLOOR: (NSQ_OTAIL, FLOOR),
    LOOPS_FLOOR: (NSQ_OTAIL, FLOOR),
    LINES_FLOOR: (NSQ_OTAIL, FLOOR),
    PROCS_FLOOR: (NSQ_OTAIL, FLOOR, LINES_FLOOR),
    OTAIL1: (NSQ_OTAIL1,),
    CONSUMER: (BR,),
}
#: Start-up rows: the same command reading one message (spawn, lookup, connect, SUB, one
#: message, exit). The ordered tails are timed spawn to exit, so their rate includes this;
#: the floor's does not (timed from its first SUB).
STARTUP = {OTAIL: OTAIL1, NSQ_OTAIL: NSQ_OTAIL1}

RDY = 2500  # youzan nsqd's max RDY per connection; bench_reader's default
TAIL_MAX_IN_FLIGHT = 200  # nsq_tail's and nsqctl tail's default
PUB_BATCH = 200  # nsqctl pub's default batch
PUB_WINDOW = WINDOW  # batches in flight per partition leader, as nsqctl pub keeps


# --------------------------------------------------------------------------- topics


@dataclass(frozen=True, order=True)
class Leader:
    """One partition and the nsqd leading it."""

    partition: int
    http: str
    tcp: str


@dataclass(frozen=True)
class Topic:
    name: str
    leaders: tuple[Leader, ...]

    @property
    def one_leader_per_nsqd(self) -> bool:
        """bench_writer / bench_reader reach a partition through the nsqd leading it: that
        only covers the topic when no nsqd leads two of its partitions."""
        return len({ld.http for ld in self.leaders}) == len(self.leaders)


@dataclass(frozen=True)
class Run:
    """Where one measurement runs: a topic, for a consumer a channel of its own, and the
    counters of each partition at the start (the topic's ``message_count`` for a
    publisher, the channel's - the topic's end when it was created - for a consumer)."""

    topic: Topic
    channel: str | None
    base: tuple[int, ...]

    def added(
        self, stats: Sequence[c.TopicPartitionStats | c.ChannelStats | None]
    ) -> list[int] | None:
        """Messages each partition gained since the start; None if one has no counters."""
        if not all(stats):
            return None
        return [st.message_count - b for st, b in zip(stats, self.base, strict=True)]  # type: ignore[union-attr]


class Redesign:
    """Topics, channels and counters on a running redesign cluster.

    Creating a redesign topic takes seconds (the lookupd leader places the partitions,
    then every nsqd must take its part and report it writable), so the runs share two
    topics - one plain, one ordered - created once: a publisher is checked by what each
    partition gained, a consumer reads a channel of its own, created before its messages
    are published (a youzan channel starts at the end of the queue) and deleted after.
    """

    def __init__(self, cluster: c.Cluster, s: Settings) -> None:
        self.cluster, self.s = cluster, s
        self.lookupd = cluster.lookupd_http[0]
        self.tcp_of = {n.http_address: n.tcp_address for n in cluster.nsqds}
        self.topics: dict[bool, Topic] = {}

    def topic(self, ordered: bool = False) -> Topic:
        """The plain or the ordered topic, created (waiting until every partition is
        writable) the first time it is needed."""
        if ordered not in self.topics:
            name = c.unique_topic("bench_ordered" if ordered else "bench")
            c.say(f"creating topic {name} ({self.s.partitions} partitions, ordered={ordered})")
            admin.create_topic(
                [self.lookupd],
                name,
                partitions=self.s.partitions,
                replicas=self.s.replicas,
                ordered=ordered,
            )
            placement = admin.run_sync(self._locate(name))
            leaders = tuple(
                sorted(
                    Leader(node.partition or 0, node.address, self.tcp_of[node.address])
                    for node in placement.nsqds
                )
            )
            if len(leaders) != self.s.partitions:
                raise SystemExit(f"topic {name}: {len(leaders)} partition leaders")
            self.topics[ordered] = Topic(name, leaders)
        return self.topics[ordered]

    async def _locate(self, name: str) -> admin.Placement:
        async with httpx.AsyncClient(timeout=10.0) as client:
            return await admin.locate_topic(name, [self.lookupd], [], client)

    def _admin(self, kind: str, action: str, name: str, channel: str | None = None) -> None:
        async def run() -> None:
            placement, stages = await admin.prepare(
                kind, name, [self.lookupd], [], action=action, channel=channel
            )
            report = await admin.run_plan(action, placement, stages, channel=channel)
            report.raise_for_failures()

        admin.run_sync(run())

    def close(self) -> None:
        """Delete the topics (the cluster's teardown removes what a failed delete leaves)."""
        for topic in self.topics.values():
            try:
                self._admin("topic", "delete", topic.name)
            except Exception as err:  # the teardown still removes the data directory
                c.say(f"could not delete {topic.name}: {err}")
        self.topics.clear()

    def counts(self, topic: Topic) -> list[c.TopicPartitionStats | None]:
        return [c.topic_stats(ld.http, topic.name, ld.partition) for ld in topic.leaders]

    def publisher_run(self) -> Run:
        topic = self.topic()
        counts = self.counts(topic)
        if not all(counts):
            raise SystemExit(f"no counters for {topic.name}: {counts}")
        return Run(topic, None, tuple(st.message_count for st in counts if st))

    def channels(self, run: Run) -> list[c.ChannelStats | None]:
        assert run.channel is not None
        return [
            c.channel_stats(ld.http, run.topic.name, run.channel, ld.partition)
            for ld in run.topic.leaders
        ]

    def settle(
        self, run: Run, done: Callable[[list[c.ChannelStats | None]], bool], seconds: float
    ) -> list[c.ChannelStats | None]:
        """The run's channel counters on every partition once ``done`` holds, or the last
        read after ``seconds`` (a consumer's last FINs land a moment after it exits)."""
        return c.last_read(lambda: self.channels(run), done, seconds)

    def consumer_run(self, count: int, ordered: bool = False) -> Run:
        """A fresh channel on every partition, then ``count`` messages spread over the
        partitions (nsqctl's Producer through the lookupd, round-robin batches; not timed),
        all of them in the channel before the consumer starts."""
        topic = self.topic(ordered)
        channel = c.unique_topic("bench")  # channel names follow the same rules
        self._admin("channel", "create", topic.name, channel)
        start = Run(topic, channel, ())
        stats = self.channels(start)
        if not all(stats) or any(st.depth for st in stats if st):
            raise SystemExit(f"new channel {channel} of {topic.name} is not empty: {stats}")
        run = Run(topic, channel, tuple(st.message_count for st in stats if st))
        c.publish_bodies(
            topic.name,
            count,
            self.s.size,
            batch=PUB_BATCH,
            window=PUB_WINDOW,
            lookupd_http=[self.lookupd],
        )
        stats = self.settle(run, lambda sts: sum(run.added(sts) or [0]) >= count, 60.0)
        if sum(run.added(stats) or [0]) != count:
            raise SystemExit(f"prefill of {topic.name}/{channel} failed: {stats}")
        return run

    def finish(self, run: Run) -> None:
        """Delete the run's channel, so later runs' messages do not pile up in it."""
        if run.channel is not None:
            try:
                self._admin("channel", "delete", run.topic.name, run.channel)
            except Exception as err:  # the teardown still removes the data directory
                c.say(f"  could not delete channel {run.channel}: {err}")


def _sum(stats: Sequence[Any], attr: str) -> int:
    return sum(getattr(st, attr) for st in stats if st is not None)


def _stats_detail(stats: Sequence[Any]) -> list[dict[str, Any] | None]:
    return [c.counters(st) for st in stats]


# --------------------------------------------------------------------------- publishers


def measure_cli_pub(
    b: Redesign, variant: str, argv_for: Callable[[str], list[str]], count: int, src: Path
) -> c.Measurement:
    """A publishing command fed ``src`` on stdin, timed spawn to exit."""
    run = b.publisher_run()
    peer, server_cpu = c.run_peer_on(
        b.cluster, argv_for(run.topic.name), stdin_from=str(src), timeout=max(300.0, count / 2000)
    )
    added = run.added(b.counts(run.topic))
    ok = peer.returncode == 0 and not peer.timed_out and added is not None and sum(added) == count
    return c.Measurement.of_peer(
        variant,
        peer,
        messages=count,
        verified=ok,
        server_cpu=server_cpu,
        detail={
            "topic": run.topic.name,
            "added_per_partition": added,
        },
    )


def measure_publish_many(b: Redesign, count: int, rss: c.PeakRss) -> c.Measurement:
    """nsqctl's Producer in this process, through the lookupd, PUB_WINDOW batches in flight
    per partition leader."""
    run = b.publisher_run()
    rss.reset()
    srv0 = c.nsqds_cpu_seconds(b.cluster)
    cpu0 = time.process_time()
    seconds = c.publish_bodies(
        run.topic.name,
        count,
        b.s.size,
        batch=PUB_BATCH,
        window=PUB_WINDOW * b.s.partitions,
        lookupd_http=[b.lookupd],
    )
    cpu = time.process_time() - cpu0
    srv1 = c.nsqds_cpu_seconds(b.cluster)
    peak = rss.peak_kb()
    added = run.added(b.counts(run.topic))
    return c.Measurement(
        variant=MANY,
        messages=count,
        seconds=seconds,
        verified=added is not None and sum(added) == count,
        client_cpu=cpu,
        server_cpu=None if srv0 is None or srv1 is None else srv1 - srv0,
        peak_rss_kb=peak,
        detail={"topic": run.topic.name, "added_per_partition": added},
    )


def _go_output(peer: c.PeerResult) -> str:
    """A Go tool's output for the JSON: the summary, or what it died of (a panic's first
    lines)."""
    text = (peer.stderr + peer.stdout).strip()
    if peer.returncode != 0 and "panic" in text:
        return text[text.index("panic") :][:600]
    return text[-300:]


def _crashed(m: c.Measurement) -> list[str]:
    """The panics of a bench_writer / bench_reader row's processes (empty if none)."""
    return [out for out in m.detail.get("output", ()) if out.startswith("panic")]


def _go_runs(peers: Sequence[c.PeerResult]) -> list[tuple[int, float] | None]:
    return [c.go_bench_result(p.stderr + p.stdout) for p in peers]


def _go_measurement(
    variant: str,
    peers: Sequence[c.PeerResult],
    runs: Sequence[tuple[int, float] | None],
    *,
    verified: bool,
    server_cpu: float | None,
    detail: dict[str, Any],
) -> c.Measurement:
    """One row for several concurrent bench_writer / bench_reader processes: their count
    over the longest of their own durations."""
    done = [r for r in runs if r is not None]
    return c.Measurement(
        variant=variant,
        messages=sum(n for n, _ in done),
        seconds=max((sec for _, sec in done), default=0.0),
        verified=verified and len(done) == len(runs),
        client_cpu=sum(p.cpu for p in peers),
        server_cpu=server_cpu,
        peak_rss_kb=max((p.peak_rss_kb for p in peers), default=0),
        detail={
            **detail,
            "processes": [
                {"count": None if r is None else r[0], "seconds": None if r is None else r[1]}
                for r in runs
            ],
            "returncodes": [p.returncode for p in peers],
            "output": [_go_output(p) for p in peers],
        },
    )


def measure_bench_writer(
    b: Redesign, runfor: float, variant: str = BW, conns: int | None = None
) -> c.Measurement:
    """bench_writer, one process per partition leader at once, ``conns`` connections each
    (default ``--bw-conns``)."""
    run = b.publisher_run()
    exe = str(c.nsq_bin("bench_writer", "redesign"))
    argvs = [
        [
            exe,
            f"--nsqd-tcp-address={ld.tcp}",
            f"--topic={run.topic.name}",
            f"--size={b.s.size}",
            f"--batch-size={b.s.bw_batch}",
            f"-c={conns or b.s.bw_conns}",
            "--sleepfor=0s",
            f"--runfor={runfor:.3f}s",
        ]
        for ld in run.topic.leaders
    ]
    peers, server_cpu = c.run_peers_on(b.cluster, argvs, timeout=runfor + 120)
    added = run.added(b.counts(run.topic))
    runs = _go_runs(peers)
    # Each process's own count (it counts a batch even when nsqd answered an error) must be
    # what the partition it wrote gained.
    ok = (
        run.topic.one_leader_per_nsqd
        and added is not None
        and all(
            p.returncode == 0 and r is not None and r[0] == n
            for p, r, n in zip(peers, runs, added, strict=True)
        )
    )
    return _go_measurement(
        variant,
        peers,
        runs,
        verified=ok,
        server_cpu=server_cpu,
        detail={"topic": run.topic.name, "runfor": runfor, "added_per_partition": added},
    )


class Aim:
    """Aims a time-based tool's ``--runfor`` at ``share`` x the messages: a short probe's
    rate first, then the median rate of the measured runs so far (``fixed``: no aiming)."""

    def __init__(self, messages: int, share: float, fixed: float | None) -> None:
        self.messages, self.share, self.fixed = messages, share, fixed
        self.rates: list[float] = []
        self.runfor = fixed if fixed is not None else 0.3

    def aim(self, rate: float) -> None:
        if self.fixed is None and rate > 0:
            self.runfor = min(max(self.share * self.messages / rate, 0.1), 60.0)

    def record(self, m: c.Measurement) -> None:
        if m.verified and m.rate > 0:
            self.rates.append(m.rate)
            self.aim(c.median(self.rates))


# --------------------------------------------------------------------------- consumers


def measure_tail(
    b: Redesign,
    variant: str,
    argv_for: Callable[[str, str], list[str]],
    count: int,
    ordered: bool,
    env: dict[str, str] | None = None,
) -> c.Measurement:
    """A tail command (``argv_for(topic, channel)``) over ``count`` prefilled messages,
    stdout to /dev/null (``env``: added to its environment)."""
    run = b.consumer_run(count, ordered)
    assert run.channel is not None
    peer, server_cpu = c.run_peer_on(
        b.cluster,
        argv_for(run.topic.name, run.channel),
        stdout_to=os.devnull,
        timeout=max(300.0, count / 500),
        env=env,
    )
    stats = b.settle(
        run,
        lambda sts: all(
            st is not None and st.client_count == 0 and st.in_flight_count == 0 for st in sts
        ),
        5.0,
    )
    b.finish(run)
    added = run.added(stats)
    ours = variant in (TAIL, TAIL_UNBUFFERED, OTAIL, OTAIL_BEFORE)
    # nsqctl tail FINs every printed message before it exits; nsq_tail exits (os.Exit) at
    # the N-th message, leaving what it had not FINed yet (at most max-in-flight) behind.
    left = _sum(stats, "depth")
    ok = (
        peer.returncode == 0
        and not peer.timed_out
        and added is not None
        and sum(added) == count
        and (
            left == 0 and _sum(stats, "timeout_count") == 0 if ours else left <= TAIL_MAX_IN_FLIGHT
        )
    )
    return c.Measurement.of_peer(
        variant,
        peer,
        messages=count,
        verified=ok,
        server_cpu=server_cpu,
        detail={
            "topic": run.topic.name,
            "channel": run.channel,
            "channel_stats": _stats_detail(stats),
        },
    )


#: ordered_floor.py's flags for each floor row
FLOOR_FLAGS = {
    LOOP_FLOOR: ("--asyncio",),
    LOOPS_FLOOR: ("--loops",),
    LINES_FLOOR: ("--write-lines",),
    PROCS_FLOOR: ("--write-lines", "--processes"),
}


def measure_floor(b: Redesign, variant: str = FLOOR) -> c.Measurement:
    """``ordered_floor.py`` over the ordered topic's prefilled messages, with the flags of
    ``variant``'s row (:data:`FLOOR_FLAGS`)."""
    count = b.s.ordered_messages
    run = b.consumer_run(count, ordered=True)
    assert run.channel is not None
    argv = [
        sys.executable,
        str(Path(__file__).resolve().parent / "ordered_floor.py"),
        "--lookupd",
        b.lookupd,
        "--topic",
        run.topic.name,
        "--channel",
        run.channel,
        "--count",
        str(count),
        *FLOOR_FLAGS.get(variant, ()),
    ]
    peer, server_cpu = c.run_peer_on(b.cluster, argv, timeout=max(300.0, count / 500))
    return _drained(b, variant, run, count, peer, server_cpu, bench_consumer.child_report(peer))


def measure_consumer(b: Redesign) -> c.Measurement:
    count = b.s.messages
    run = b.consumer_run(count)
    assert run.channel is not None
    peer, server_cpu, report = bench_consumer.run_child(
        b.cluster,
        "nsqctl",
        run.topic.name,
        count,
        b.s.max_in_flight,
        lookupd=b.lookupd,
        channel=run.channel,
    )
    return _drained(b, CONSUMER, run, count, peer, server_cpu, report)


def _drained(
    b: Redesign,
    variant: str,
    run: Run,
    count: int,
    peer: c.PeerResult,
    server_cpu: float | None,
    report: dict[str, Any],
) -> c.Measurement:
    """A consumer child timed by its own report, checked by its channel: it received
    ``count``, and every message is there, FINed, none in flight or timed out."""
    stats = b.settle(
        run,
        lambda sts: all(
            st is not None and st.client_count == 0 and st.in_flight_count == 0 and st.depth == 0
            for st in sts
        ),
        5.0,
    )
    b.finish(run)
    added = run.added(stats)
    ok = (
        peer.returncode == 0
        and report.get("received") == count
        and added is not None
        and sum(added) == count
        and _sum(stats, "depth") == 0
        and _sum(stats, "in_flight_count") == 0
        and _sum(stats, "timeout_count") == 0
    )
    return c.Measurement.of_peer(
        variant,
        peer,
        messages=count,
        seconds=report.get("seconds") or peer.wall,
        verified=ok,
        server_cpu=server_cpu,
        detail={
            "topic": run.topic.name,
            "channel": run.channel,
            "wall_with_startup": peer.wall,
            "report": report,
            "channel_stats": _stats_detail(stats),
        },
    )


def measure_bench_reader(b: Redesign, runfor: float, variant: str = BR) -> c.Measurement:
    count = b.s.messages
    run = b.consumer_run(count)
    assert run.channel is not None
    exe = str(c.nsq_bin("bench_reader", "redesign"))
    argvs = [
        [
            exe,
            f"--nsqd-tcp-address={ld.tcp}",
            f"--topic={run.topic.name}",
            f"--channel={run.channel}",
            f"--size={b.s.size}",
            f"--rdy={RDY}",
            f"--runfor={runfor:.3f}s",
        ]
        for ld in run.topic.leaders
    ]
    peers, server_cpu = c.run_peers_on(b.cluster, argvs, timeout=runfor + 120)
    stats = b.settle(
        run, lambda sts: all(st is not None and st.client_count == 0 for st in sts), 3.0
    )
    b.finish(run)
    added = run.added(stats)
    runs = _go_runs(peers)
    # Per partition: its count is what it read (a redelivery counts again), so at least what
    # nsqd saw confirmed - youzan confirms in offset order: ``depth`` runs from the first
    # message not yet FINed, so it also holds messages FINed out of order or requeued from a
    # closed connection - and below what the partition got: a count that reaches it means
    # it ran dry, and its duration includes idle time (the run is aimed shorter and redone).
    counts: list[int | None] = [*added] if added else [None] * len(runs)
    dry = [
        r is not None and got is not None and r[0] >= got
        for r, got in zip(runs, counts, strict=True)
    ]

    def checks(r: tuple[int, float] | None, st: c.ChannelStats | None, got: int) -> bool:
        if r is None or st is None:
            return False
        return got - st.depth <= r[0] < got

    ok = (
        run.topic.one_leader_per_nsqd
        and added is not None
        and sum(added) == count
        and all(p.returncode == 0 for p in peers)
        and all(checks(r, st, got) for r, st, got in zip(runs, stats, added, strict=True))
    )
    return _go_measurement(
        variant,
        peers,
        runs,
        verified=ok,
        server_cpu=server_cpu,
        detail={
            "topic": run.topic.name,
            "channel": run.channel,
            "runfor": runfor,
            "prefilled": count,
            "added_per_partition": added,
            "dry": dry,
            "channel_stats": _stats_detail(stats),
        },
    )


def aimed(
    b: Redesign, tool: str, measure: Callable[..., c.Measurement], share: float, probe: float
) -> Callable[[], c.Measurement]:
    """Runs of a time-based Go tool (``measure(b, runfor)``) whose ``--runfor`` is aimed at
    ``share`` x the messages (a ``probe``-second run first, unless ``--runfor`` fixes it).
    A bench_reader run that ran dry is aimed shorter and run again (its rate would only be a
    lower bound); a run in which the tool panicked is run again (up to 3 tries), the panic
    kept in the run's ``redone_after``."""
    aim = Aim(b.s.messages, share, b.s.runfor)
    if b.s.runfor is None:
        c.say(f"probing {tool}'s rate to aim its --runfor")
        for _ in range(3):  # it may crash (see below)
            first = measure(b, probe, variant="probe")
            if not _crashed(first):
                break
        # a probe that ran dry still gives a rate (a lower bound); the runs re-aim
        if first.rate <= 0 or not (first.verified or any(first.detail.get("dry", ()))):
            raise SystemExit(f"{tool} probe failed: {first.detail}")
        aim.aim(first.rate)
        c.say(f"{tool} --runfor={aim.runfor:.2f}s")

    def run() -> c.Measurement:
        redone: list[str] = []
        for _ in range(3):
            m = measure(b, aim.runfor)
            aim.record(m)
            m.detail["redone_after"] = redone
            if m.verified:
                return m
            panics = _crashed(m)
            dry = any(m.detail.get("dry", ()))
            if panics:
                # the tool itself died (its own bug, not a lost message): said, kept in the
                # JSON, and the run is done again
                c.say(f"  {tool} crashed: {panics[0].splitlines()[0]}; running it again")
                redone.append(panics[0])
            elif dry and b.s.runfor is None:
                c.say(f"  {tool} ran dry at --runfor={aim.runfor:.2f}s; aiming shorter")
                redone.append("ran dry")
                aim.aim(m.rate * 1.5)
            else:
                return m
        return m

    return run


# --------------------------------------------------------------------------- plan


@dataclass
class Settings:
    messages: int
    to_nsq_messages: int
    ordered_messages: int
    size: int
    nsqds: int
    partitions: int
    replicas: int
    bw_batch: int
    bw_conns: int
    max_in_flight: int
    repeats: int
    runfor: float | None  # fixed --runfor of bench_writer / bench_reader; None = aim
    before: str | None = None  # --before: a source tree whose tail --ordered runs too


def nsqctl_tail_argv(
    exe: str, lookupd: str, n: int, ordered: bool
) -> Callable[[str, str], list[str]]:
    """``nsqctl tail`` of ``n`` messages through ``lookupd``: argv for (topic, channel)."""
    extra = ["--ordered"] if ordered else []
    return lambda t, ch: [
        exe,
        "tail",
        t,
        "--lookupd",
        lookupd,
        "--channel",
        ch,
        "-n",
        str(n),
        *extra,
    ]


def nsq_tail_argv(exe: str, lookupd: str, n: int, ordered: bool) -> Callable[[str, str], list[str]]:
    """youzan's ``nsq_tail`` (at ``exe``) of ``n`` messages: argv for (topic, channel)."""
    extra = ["-ordered"] if ordered else []
    return lambda t, ch: [
        exe,
        f"--topic={t}",
        f"--channel={ch}",
        f"--lookupd-http-address={lookupd}",
        f"-n={n}",
        *extra,
    ]


def plan(
    b: Redesign, files: dict[str, Path], skip: set[str]
) -> list[tuple[str, Callable[[], c.Measurement]]]:
    s = b.s
    exe = bench_cli.nsqctl_exe()
    lookupd = b.lookupd
    yz = {tool: str(c.nsq_bin(tool, "redesign")) for tool in ("to_nsq", "nsq_tail")}
    rss = c.PeakRss()

    def nsqctl_tail(n: int, ordered: bool) -> Callable[[str, str], list[str]]:
        return nsqctl_tail_argv(exe, lookupd, n, ordered)

    def nsq_tail(n: int, ordered: bool) -> Callable[[str, str], list[str]]:
        return nsq_tail_argv(yz["nsq_tail"], lookupd, n, ordered)

    variants: list[tuple[str, Callable[[], c.Measurement]]] = [
        (
            PUB,
            lambda: measure_cli_pub(
                b,
                PUB,
                lambda t: [exe, "pub", t, "--lookupd", lookupd, "-q"],
                s.messages,
                files["lines"],
            ),
        ),
        (MANY, lambda: measure_publish_many(b, s.messages, rss)),
        (
            TO_NSQ,
            lambda: measure_cli_pub(
                b,
                TO_NSQ,
                lambda t: [yz["to_nsq"], f"--topic={t}", f"--lookupd-http-address={lookupd}"],
                s.to_nsq_messages,
                files["to_nsq_lines"],
            ),
        ),
        (TAIL, lambda: measure_tail(b, TAIL, nsqctl_tail(s.messages, False), s.messages, False)),
        (
            TAIL_UNBUFFERED,
            lambda: measure_tail(
                b,
                TAIL_UNBUFFERED,
                lambda t, ch: [*nsqctl_tail(s.messages, False)(t, ch), "--output-buffer", "none"],
                s.messages,
                False,
            ),
        ),
        (
            NSQ_TAIL,
            lambda: measure_tail(b, NSQ_TAIL, nsq_tail(s.messages, False), s.messages, False),
        ),
        (
            OTAIL,
            lambda: measure_tail(
                b, OTAIL, nsqctl_tail(s.ordered_messages, True), s.ordered_messages, True
            ),
        ),
        (
            NSQ_OTAIL,
            lambda: measure_tail(
                b, NSQ_OTAIL, nsq_tail(s.ordered_messages, True), s.ordered_messages, True
            ),
        ),
        (
            OTAIL_BEFORE,
            lambda: measure_tail(
                b,
                OTAIL_BEFORE,
                nsqctl_tail(s.ordered_messages, True),
                s.ordered_messages,
                True,
                env={"PYTHONPATH": s.before or ""},
            ),
        ),
        (FLOOR, lambda: measure_floor(b)),
        (LOOP_FLOOR, lambda: measure_floor(b, LOOP_FLOOR)),
        (LOOPS_FLOOR, lambda: measure_floor(b, LOOPS_FLOOR)),
        (LINES_FLOOR, lambda: measure_floor(b, LINES_FLOOR)),
        (PROCS_FLOOR, lambda: measure_floor(b, PROCS_FLOOR)),
        (OTAIL1, lambda: measure_tail(b, OTAIL1, nsqctl_tail(1, True), 1, True)),
        (NSQ_OTAIL1, lambda: measure_tail(b, NSQ_OTAIL1, nsq_tail(1, True), 1, True)),
        (CONSUMER, lambda: measure_consumer(b)),
    ]
    # the time-based Go tools are aimed (a probe run each) only when they run at all
    if BW1 not in skip:  # one connection per partition, as one nsqctl Producer has

        def one_conn(b: Redesign, runfor: float, variant: str = BW1) -> c.Measurement:
            return measure_bench_writer(b, runfor, variant, conns=1)

        variants.insert(3, (BW1, aimed(b, BW1, one_conn, 1.0, 0.5)))
    if BW not in skip:
        variants.insert(3, (BW, aimed(b, BW, measure_bench_writer, 1.0, 0.5)))
    if BR not in skip:
        variants.append((BR, aimed(b, BR, measure_bench_reader, 0.7, 0.3)))
    if not s.before:
        skip = skip | {OTAIL_BEFORE}
    return [(name, fn) for name, fn in variants if name not in skip]


# --------------------------------------------------------------------------- report


def summarize(results: dict[str, list[c.Measurement]]) -> list[dict[str, Any]]:
    refs = sorted({ref for refs in REFERENCES.values() for ref in refs})
    rows = c.summary_rows(results, refs)
    for row in rows:
        row["references"] = [r for r in REFERENCES.get(row["variant"], ()) if r in results]
    return rows


def print_summary(rows: list[dict[str, Any]], s: Settings) -> None:
    def versus(row: dict[str, Any]) -> str:
        return " ".join(f"{c.ratio_text(row[f'vs_{r}'])} {r}" for r in row["references"]) or "-"

    c.print_table(
        f"Redesign: youzan nsqd x{s.nsqds}, {s.partitions} partitions, replicas "
        f"{s.replicas}, queue on disk; {s.messages:,} x {s.size}-byte messages "
        f"(to_nsq {s.to_nsq_messages:,}, ordered {s.ordered_messages:,}); median of "
        f"{s.repeats}",
        [
            "variant",
            "messages",
            "msgs/s",
            "runs",
            "vs reference",
            "client CPU us/msg",
            "nsqd CPU us/msg",
            "peak RSS MiB",
            "delivery",
        ],
        [
            [
                r["variant"],
                c.fmt_int(r["messages"]),
                c.fmt_int(r["msgs_per_s"]),
                " ".join(f"{x / 1000:.0f}k" for x in r["runs_msgs_per_s"]),
                versus(r),
                c.fixed_text(r["client_cpu_us_per_msg"]),
                c.fixed_text(r["nsqd_cpu_us_per_msg"]),
                f"{r['peak_rss_mib']:.0f}",
                "verified" if r["verified"] else "FAILED",
            ]
            for r in rows
        ],
    )


def check_targets(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {r["variant"]: r for r in rows}
    verdict: dict[str, Any] = {}
    for variant, ref, target in TARGETS:
        row = by.get(variant)
        if row is None or ref not in by:
            continue  # skipped
        value = row[f"vs_{ref}"]
        same = row[f"paired_vs_{ref}"]
        met = value is not None and value >= target
        verdict[f"{variant} vs {ref}"] = {
            "value": value,
            "target": target,
            "met": met,
            "same_repeat": same,
        }
        print(
            f"target {variant} >= {target:g}x {ref}: {c.ratio_text(value)} "
            f"{'met' if met else 'MISSED'}  (same-repeat: "
            f"{', '.join(c.ratio_text(x) for x in same) or '-'})"
        )
    return verdict


def without_startup(results: dict[str, list[c.Measurement]]) -> dict[str, Any]:
    """The ordered tails' rates with their start-up taken out: each run's wall time less
    the median wall time of the same command reading one message (:data:`STARTUP`), so
    they compare with the floor, which is timed from its first SUB. Information."""
    out: dict[str, Any] = {}
    for variant, startup in STARTUP.items():
        runs, first = results.get(variant), results.get(startup)
        if not runs or not first:
            continue
        lead = c.median([m.seconds for m in first])
        rates = [m.messages / (m.seconds - lead) for m in runs if m.seconds > lead]
        if not rates:  # the one-message run waited out its timeout (nsq_tail -n 1 can)
            print(f"{variant}: its one-message run took {lead:.1f} s, no shorter than a full run")
            continue
        out[variant] = {"startup_s": lead, "runs_msgs_per_s": rates, "msgs_per_s": c.median(rates)}
    floor = results.get(FLOOR)
    floor_rate = c.median([m.rate for m in floor]) if floor else None
    for variant, row in out.items():
        extra = f", {row['msgs_per_s'] / floor_rate:.2f}x the floor" if floor_rate else ""
        print(
            f"{variant} without its start-up ({row['startup_s'] * 1000:.0f} ms): "
            f"{row['msgs_per_s']:,.0f} msgs/s (runs "
            f"{' '.join(f'{x / 1000:.1f}k' for x in row['runs_msgs_per_s'])}){extra}"
        )
    if OTAIL in out and NSQ_OTAIL in out:
        ratio = out[OTAIL]["msgs_per_s"] / out[NSQ_OTAIL]["msgs_per_s"]
        out["ratio_without_startup"] = ratio
        print(f"{OTAIL} vs {NSQ_OTAIL}, both without start-up: {ratio:.2f}x")
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Benchmark nsqctl on the redesign against youzan's own Go tools."
    )
    ap.add_argument("--messages", type=int, default=250_000)
    ap.add_argument("--to-nsq-messages", type=int, help="for to_nsq (messages/20, max 50k)")
    ap.add_argument(
        "--ordered-messages", type=int, help="for the ordered tails (messages/10, max 50k)"
    )
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--nsqds", type=int, default=2, help="nsqd nodes in the cluster")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--bw-batch", type=int, default=PUB_BATCH, help="bench_writer --batch-size")
    ap.add_argument("--bw-conns", type=int, default=100, help="bench_writer -c (per process)")
    ap.add_argument("--max-in-flight", type=int, help="of the library Consumer (2500 x partitions)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runfor", type=float, help="fixed bench_writer/bench_reader --runfor (s)")
    ap.add_argument("--skip", action="append", default=[], help="leave a variant out (repeatable)")
    ap.add_argument("--quick", action="store_true", help="20k messages, 1 repeat: a smoke run")
    ap.add_argument(
        "--before",
        metavar="TREE",
        help="also run tail --ordered from another source tree (PYTHONPATH=TREE, e.g. a "
        "worktree of the commit before a change), interleaved with the rest",
    )
    c.add_output_args(ap)
    args = ap.parse_args(argv)
    if args.quick:
        args.messages = min(args.messages, 20_000)
        args.repeats = 1
    if args.to_nsq_messages is None:
        args.to_nsq_messages = max(1, min(50_000, args.messages // 20))
    if args.ordered_messages is None:
        args.ordered_messages = max(1, min(50_000, args.messages // 10))
    if args.max_in_flight is None:
        args.max_in_flight = RDY * args.partitions
    c.require_positive(
        ap,
        args,
        "messages",
        "to_nsq_messages",
        "ordered_messages",
        "size",
        "nsqds",
        "partitions",
        "replicas",
        "bw_batch",
        "bw_conns",
        "max_in_flight",
        "repeats",
    )
    # the rows with references (every floor among them) and the references themselves
    unknown = set(args.skip) - {*REFERENCES, BW, BW1, TO_NSQ, NSQ_TAIL, NSQ_OTAIL, BR}
    if unknown:
        ap.error(f"unknown --skip {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    c.bytecode_as_installed()
    s = Settings(
        messages=args.messages,
        to_nsq_messages=args.to_nsq_messages,
        ordered_messages=args.ordered_messages,
        size=args.size,
        nsqds=args.nsqds,
        partitions=args.partitions,
        replicas=args.replicas,
        bw_batch=args.bw_batch,
        bw_conns=args.bw_conns,
        max_in_flight=args.max_in_flight,
        repeats=args.repeats,
        runfor=args.runfor,
        before=str(Path(args.before).resolve()) if args.before else None,
    )
    payload = c.run_header("redesign", s)
    payload["nsqctl"] = bench_cli.nsqctl_exe()
    payload["nsq_bin_dir"] = str(c.nsq_bin("nsqd", "redesign").parent)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nsqctl-bench-redesign-") as tmp:
        files = {"lines": Path(tmp) / "lines.txt", "to_nsq_lines": Path(tmp) / "to_nsq.txt"}
        bench_cli.write_lines(files["lines"], s.messages, s.size)
        bench_cli.write_lines(files["to_nsq_lines"], s.to_nsq_messages, s.size)
        with c.nsqd_cluster("redesign", nsqd=s.nsqds) as cluster:
            b = Redesign(cluster, s)
            try:
                results = c.run_interleaved(plan(b, files, set(args.skip)), s.repeats)
                payload["topics"] = {
                    "ordered" if k else "plain": t.name for k, t in b.topics.items()
                }
            finally:
                b.close()
    rows = summarize(results)
    print_summary(rows, s)
    verdict = check_targets(rows)
    payload.update(c.results_json(results, rows, verdict))
    payload["without_startup"] = without_startup(results)
    return c.conclude(
        "redesign",
        payload,
        args,
        started=started,
        verified=all(r["verified"] for r in rows),
        targets_met=all(v["met"] for v in verdict.values()),
    )


if __name__ == "__main__":
    sys.exit(main())
