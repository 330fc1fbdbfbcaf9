"""Producer benchmark: nsqctl's Producer against nsq's own bench_writer and to_nsq.

All publishers in one run talk to the same real nsqd on 127.0.0.1, each to a fresh topic
(deleted afterwards), messages of ``--size`` bytes (100). Every measurement is repeated
(``--repeats``, 3), the variants interleaved and their order rotated per repeat, and the
median is reported. Every run is verified against nsqd's own counters (``/stats``:
``message_count`` and ``message_bytes`` of the topic) - a run that does not check out
fails the benchmark.

nsqd: by default (``--nsqd memory``) with ``--mem-queue-size`` large enough to hold every
message in memory, as nsq's own bench.sh runs it, so the publishers and the protocol are
measured; ``--nsqd disk`` keeps nsqd's defaults (10,000 messages in memory, the rest go
through its disk queue), which caps every publisher at nsqd's disk path.

Variants:

* ``bench_writer`` - nsq's Go benchmark publisher (reference): GOMAXPROCS workers (one TCP
  connection each), stop-and-wait MPUB batches of ``--batch``. It runs for a time, not a
  count, so its ``--runfor`` is calibrated to publish about ``--messages``; its rate is
  its count (from nsqd) over its own measured duration.
* ``bench_writer 1 conn`` - the same with GOMAXPROCS=1 (one connection), for information.
* ``to_nsq`` - nsq's stdin-to-topic tool (reference): one synchronous PUB per line, fed
  ``--to-nsq-messages`` lines of ``--size`` characters + newline; timed spawn to exit.
* ``nsqctl publish_many`` - the headline: ONE Producer (one connection), ``--messages``
  split in ``--batch`` batches, ``--window`` publish_many calls in flight (pipelined).
* ``nsqctl publish_many xP`` - P Producers (P connections, as many as bench_writer uses).
* ``nsqctl publish`` - plain PUB, ``--publish-concurrency`` tasks pipelining on one
  connection, for information.

Run: ``python -m bench.bench_producer --messages 1000000`` (``--quick`` for a smoke run,
``--sweep`` to compare batch sizes and windows). See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import _common as c
from nsqctl.producer import Producer

# Chosen with --sweep (see bench/README.md): bench_writer's own default batch size, so the
# reference runs stock; 8 batches in flight keep nsqd busy while replies travel back.
DEFAULT_BATCH = 200
DEFAULT_WINDOW = 8
TARGET_VS_BENCH_WRITER = 1.0
TARGET_VS_TO_NSQ = 20.0

BW = "bench_writer"
BW1 = "bench_writer 1 conn"
TO_NSQ = "to_nsq"
MANY = "nsqctl publish_many"
PUB = "nsqctl publish"


def many_multi(producers: int) -> str:
    return f"nsqctl publish_many x{producers}"


# --------------------------------------------------------------------------- nsqctl runs


async def _publish_many(
    addr: str, topic: str, messages: int, size: int, batch: int, window: int, producers: int
) -> float:
    """Publish ``messages`` in MPUB batches, ``window`` batches in flight per Producer.

    Timed from creating the Producer(s) (so connecting is included) to the last OK.
    """
    body = b"x" * size
    full = [body] * batch
    batches = [full] * (messages // batch)
    if messages % batch:
        batches.append([body] * (messages % batch))
    todo = iter(batches)
    start = time.perf_counter()
    prods = [Producer(nsqd_tcp=[addr]) for _ in range(producers)]
    try:

        async def worker(prod: Producer) -> None:
            for chunk in todo:
                await prod.publish_many(topic, chunk)

        await asyncio.gather(*(worker(prods[i % producers]) for i in range(window * producers)))
        return time.perf_counter() - start
    finally:
        for prod in prods:
            await prod.close()


async def _publish(addr: str, topic: str, messages: int, size: int, concurrency: int) -> float:
    """Plain PUB: ``concurrency`` tasks share one Producer (requests pipeline on it)."""
    body = b"x" * size
    todo = iter(range(messages))
    start = time.perf_counter()
    async with Producer(nsqd_tcp=[addr]) as prod:

        async def worker() -> None:
            for _ in todo:
                await prod.publish(topic, body)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - start


def _check_topic(
    cluster: c.Cluster, topic: str, messages: int, size: int
) -> tuple[bool, dict[str, Any]]:
    stats = c.topic_stats(cluster.nsqd_http[0], topic)
    if stats is None:
        return False, {"stats": None}
    ok = stats.message_count == messages and (
        stats.message_bytes is None or stats.message_bytes == messages * size
    )
    return ok, {"message_count": stats.message_count, "message_bytes": stats.message_bytes}


def measure_nsqctl(
    cluster: c.Cluster,
    variant: str,
    messages: int,
    size: int,
    run: Callable[[str, str], Any],
    rss: c.PeakRss,
    **detail: Any,
) -> c.Measurement:
    """Run one nsqctl publishing coroutine in this process; verify; clean up."""
    topic = c.unique_topic("bench_nsqctl")
    nsqd_pid = cluster.nsqds[0].pid
    rss.reset()
    base_rss = rss.current_kb()
    srv0 = c.process_cpu_seconds(nsqd_pid)
    cpu0 = time.process_time()
    seconds = asyncio.run(run(cluster.nsqd_tcp[0], topic))
    cpu = time.process_time() - cpu0
    srv1 = c.process_cpu_seconds(nsqd_pid)
    peak = rss.peak_kb()
    ok, counts = _check_topic(cluster, topic, messages, size)
    c.delete_topic(cluster.nsqd_http[0], topic)
    return c.Measurement(
        variant=variant,
        messages=messages,
        seconds=seconds,
        verified=ok,
        client_cpu=cpu,
        server_cpu=None if srv0 is None or srv1 is None else srv1 - srv0,
        peak_rss_kb=peak,
        detail={"topic": topic, "rss_before_kb": base_rss, **counts, **detail},
    )


# --------------------------------------------------------------------------- peers


def measure_bench_writer(
    cluster: c.Cluster,
    variant: str,
    runfor: float,
    size: int,
    batch: int,
    gomaxprocs: int | None = None,
) -> c.Measurement:
    topic = c.unique_topic("bench_bw")
    argv = [
        str(c.nsq_bin("bench_writer")),
        f"--runfor={runfor:.3f}s",
        f"--size={size}",
        f"--batch-size={batch}",
        f"--topic={topic}",
        f"--nsqd-tcp-address={cluster.nsqd_tcp[0]}",
    ]
    env = {"GOMAXPROCS": str(gomaxprocs)} if gomaxprocs else None
    peer, server_cpu = c.run_peer_on(cluster, argv, env=env, timeout=runfor + 120)
    found = c.GO_BENCH_LINE.search(peer.stderr + peer.stdout)
    stats = c.topic_stats(cluster.nsqd_http[0], topic)
    c.delete_topic(cluster.nsqd_http[0], topic)
    count = stats.message_count if stats else 0
    detail: dict[str, Any] = {
        "topic": topic,
        "runfor": runfor,
        "gomaxprocs": gomaxprocs or os.cpu_count(),
        "returncode": peer.returncode,
        "wall": peer.wall,
        "output": (peer.stderr + peer.stdout).strip()[-500:],
        "message_count": count,
        "message_bytes": stats.message_bytes if stats else None,
    }
    ok = peer.returncode == 0 and found is not None and count > 0
    seconds = peer.wall
    if found is not None:
        seconds = c.parse_go_duration(found.group(1))
        reported = float(found.group(2))
        detail["reported_msgs_per_s"] = reported
        # Its own count (ops/s x duration) must be what nsqd stored, to rounding.
        ok = ok and abs(reported * seconds - count) <= 1 + 1e-6 * count
    if stats is not None and stats.message_bytes is not None:
        ok = ok and stats.message_bytes == count * size
    return c.Measurement.of_peer(
        variant,
        peer,
        messages=count,
        seconds=seconds,
        verified=ok,
        server_cpu=server_cpu,
        detail=detail,
    )


def measure_to_nsq(cluster: c.Cluster, messages: int, size: int) -> c.Measurement:
    topic = c.unique_topic("bench_to_nsq")
    # to_nsq strips the delimiter: size characters + newline make a size-byte message.
    data = (b"y" * size + b"\n") * messages
    argv = [
        str(c.nsq_bin("to_nsq")),
        f"--topic={topic}",
        f"--nsqd-tcp-address={cluster.nsqd_tcp[0]}",
    ]
    peer, server_cpu = c.run_peer_on(cluster, argv, stdin=data, timeout=600)
    ok, counts = _check_topic(cluster, topic, messages, size)
    c.delete_topic(cluster.nsqd_http[0], topic)
    return c.Measurement.of_peer(
        TO_NSQ,
        peer,
        messages=messages,
        verified=ok and peer.returncode == 0,
        server_cpu=server_cpu,
        detail={"topic": topic, "returncode": peer.returncode, **counts},
    )


# --------------------------------------------------------------------------- plan


@dataclass
class Settings:
    messages: int
    size: int
    batch: int
    window: int
    producers: int
    publish_messages: int
    publish_concurrency: int
    to_nsq_messages: int
    repeats: int
    quick: bool
    runfor: float | None  # fixed bench_writer --runfor; None = calibrate


class BenchWriter:
    """bench_writer runs for a time, not a count: aim its ``--runfor`` at ~``messages``.

    A short probe gives a first rate; after every run the duration is re-aimed with the
    median rate seen so far. (A fixed ``--runfor`` is used as given.)
    """

    def __init__(
        self,
        cluster: c.Cluster,
        variant: str,
        s: Settings,
        batch: int,
        gomaxprocs: int | None = None,
    ) -> None:
        self.cluster, self.variant, self.s = cluster, variant, s
        self.batch, self.gomaxprocs = batch, gomaxprocs
        self.rates: list[float] = []
        self.runfor = s.runfor if s.runfor is not None else self._probe()

    def _probe(self) -> float:
        probe = measure_bench_writer(
            self.cluster, "calibration", 0.5, self.s.size, self.batch, self.gomaxprocs
        )
        if not probe.verified or probe.rate <= 0:
            raise SystemExit(f"bench_writer calibration failed: {probe.detail.get('output')}")
        return self._aim(probe.rate)

    def _aim(self, rate: float) -> float:
        return min(max(self.s.messages / rate, 0.2), 60.0)

    def __call__(self) -> c.Measurement:
        m = measure_bench_writer(
            self.cluster, self.variant, self.runfor, self.s.size, self.batch, self.gomaxprocs
        )
        if m.verified and self.s.runfor is None:
            self.rates.append(m.rate)
            self.runfor = self._aim(c.median(self.rates))
        return m


def plan(cluster: c.Cluster, s: Settings, rss: c.PeakRss) -> list[tuple[str, Callable[[], Any]]]:
    """The variants, each a callable producing one Measurement."""
    c.say("calibrating bench_writer --runfor (also warms nsqd up)")
    bw = BenchWriter(cluster, BW, s, s.batch)
    bw1 = BenchWriter(cluster, BW1, s, s.batch, gomaxprocs=1)
    c.say(f"bench_writer --runfor={bw.runfor:.2f}s; with GOMAXPROCS=1 --runfor={bw1.runfor:.2f}s")
    c.say("warming nsqctl up")
    measure_nsqctl(
        cluster,
        "warm-up",
        min(s.messages, 50_000),
        s.size,
        lambda a, t: _publish_many(a, t, min(s.messages, 50_000), s.size, s.batch, s.window, 1),
        rss,
    )

    def nsqctl_many(producers: int) -> c.Measurement:
        return measure_nsqctl(
            cluster,
            MANY if producers == 1 else many_multi(producers),
            s.messages,
            s.size,
            lambda a, t: _publish_many(a, t, s.messages, s.size, s.batch, s.window, producers),
            rss,
            batch=s.batch,
            window=s.window,
            producers=producers,
        )

    variants: list[tuple[str, Callable[[], Any]]] = [
        (BW, bw),
        (BW1, bw1),
        (TO_NSQ, lambda: measure_to_nsq(cluster, s.to_nsq_messages, s.size)),
        (MANY, lambda: nsqctl_many(1)),
    ]
    if s.producers > 1:
        variants.append((many_multi(s.producers), lambda: nsqctl_many(s.producers)))
    variants.append(
        (
            PUB,
            lambda: measure_nsqctl(
                cluster,
                PUB,
                s.publish_messages,
                s.size,
                lambda a, t: _publish(a, t, s.publish_messages, s.size, s.publish_concurrency),
                rss,
                concurrency=s.publish_concurrency,
            ),
        )
    )
    return variants


def summarize(results: dict[str, list[c.Measurement]]) -> list[dict[str, Any]]:
    rows = c.summary_rows(results, (BW, TO_NSQ))
    for row in rows:
        row["messages"] = int(row["messages"])
    return rows


def print_summary(rows: list[dict[str, Any]], s: Settings) -> None:
    c.print_table(
        f"Producer: {s.size}-byte messages to one nsqd on 127.0.0.1, median of {s.repeats}"
        f" (batch {s.batch}, window {s.window})",
        [
            "variant",
            "messages",
            "msgs/s",
            "vs bench_writer",
            "vs to_nsq",
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
                c.ratio_text(r["vs_bench_writer"]),
                c.ratio_text(r["vs_to_nsq"]),
                c.fixed_text(r["client_cpu_us_per_msg"]),
                c.fixed_text(r["nsqd_cpu_us_per_msg"]),
                f"{r['peak_rss_mib']:.0f}",
                "verified" if r["verified"] else "FAILED",
            ]
            for r in rows
        ],
    )
    print(
        "peak RSS: of the publishing process (peers: sampled VmHWM; nsqctl rows: this"
        " Python process, reset before each run, interpreter baseline included)"
    )


def check_targets(rows: list[dict[str, Any]]) -> dict[str, Any]:
    head = next(r for r in rows if r["variant"] == MANY)
    vs_bw, vs_tn = head["vs_bench_writer"], head["vs_to_nsq"]
    verdict = {
        "vs_bench_writer": vs_bw,
        "vs_to_nsq": vs_tn,
        "target_vs_bench_writer": TARGET_VS_BENCH_WRITER,
        "target_vs_to_nsq": TARGET_VS_TO_NSQ,
        "met_vs_bench_writer": vs_bw is not None and vs_bw >= TARGET_VS_BENCH_WRITER,
        "met_vs_to_nsq": vs_tn is not None and vs_tn >= TARGET_VS_TO_NSQ,
    }
    print(
        f"target ({MANY}): >= {TARGET_VS_BENCH_WRITER:.1f}x bench_writer -> {c.ratio_text(vs_bw)} "
        f"{'met' if verdict['met_vs_bench_writer'] else 'MISSED'}; "
        f">= {TARGET_VS_TO_NSQ:.0f}x to_nsq -> {c.ratio_text(vs_tn)} "
        f"{'met' if verdict['met_vs_to_nsq'] else 'MISSED'}"
    )
    print(
        "  same-repeat ratios vs bench_writer: "
        + ", ".join(c.ratio_text(x) for x in head["paired_vs_bench_writer"])
        + "; vs to_nsq: "
        + ", ".join(c.ratio_text(x) for x in head["paired_vs_to_nsq"])
    )
    return verdict


# --------------------------------------------------------------------------- sweep


def sweep(cluster: c.Cluster, s: Settings, rss: c.PeakRss) -> list[dict[str, Any]]:
    """publish_many over batch sizes x windows (one Producer), with bench_writer per batch."""
    batches = [100, 200, 500, 1000, 2000, 5000]
    windows = [1, 2, 4, 8]
    measure_nsqctl(  # warm-up
        cluster,
        "warm-up",
        50_000,
        s.size,
        lambda a, t: _publish_many(a, t, 50_000, s.size, 1000, 4, 1),
        rss,
    )
    rows: list[dict[str, Any]] = []
    for batch in batches:
        bs = Settings(**{**s.__dict__, "batch": batch})
        variants: list[tuple[str, Callable[[], Any]]] = [
            (f"bench_writer b={batch}", BenchWriter(cluster, BW, bs, batch))
        ]
        for window in windows:
            variants.append(
                (f"publish_many b={batch} w={window}", _many_thunk(cluster, s, rss, batch, window))
            )
        results = c.run_interleaved(variants, s.repeats)
        bw = c.median([m.rate for m in results[variants[0][0]]])
        for name, ms in results.items():
            rate = c.median([m.rate for m in ms])
            rows.append(
                {
                    "variant": name,
                    "batch": batch,
                    "msgs_per_s": rate,
                    "vs_bench_writer_same_batch": rate / bw if bw else None,
                    "client_cpu_us_per_msg": c.per_msg_us(ms, "client_cpu"),
                    "verified": all(m.verified for m in ms),
                }
            )
    c.print_table(
        f"Sweep: {s.messages:,} x {s.size}-byte messages, one Producer, median of {s.repeats}",
        ["variant", "msgs/s", "vs bench_writer (same batch)", "client CPU us/msg", "delivery"],
        [
            [
                r["variant"],
                c.fmt_int(r["msgs_per_s"]),
                c.ratio_text(r["vs_bench_writer_same_batch"]),
                c.fixed_text(r["client_cpu_us_per_msg"]),
                "verified" if r["verified"] else "FAILED",
            ]
            for r in rows
        ],
    )
    return rows


def _many_thunk(
    cluster: c.Cluster, s: Settings, rss: c.PeakRss, batch: int, window: int
) -> Callable[[], Any]:
    return lambda: measure_nsqctl(
        cluster,
        MANY,
        s.messages,
        s.size,
        lambda a, t: _publish_many(a, t, s.messages, s.size, batch, window, 1),
        rss,
        batch=batch,
        window=window,
    )


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Settings]:
    ap = argparse.ArgumentParser(
        description="Benchmark nsqctl's Producer against nsq's bench_writer and to_nsq.",
    )
    ap.add_argument("--messages", type=int, default=1_000_000, help="for publish_many")
    ap.add_argument("--size", type=int, default=100, help="message size in bytes")
    ap.add_argument("--batch", type=int, default=DEFAULT_BATCH, help="messages per MPUB")
    ap.add_argument(
        "--window", type=int, default=DEFAULT_WINDOW, help="publish_many calls in flight"
    )
    ap.add_argument(
        "--producers",
        type=int,
        default=os.cpu_count() or 1,
        help="Producers (connections) of the multi-connection row; 1 drops the row"
        " (default: CPU count = bench_writer's connections)",
    )
    ap.add_argument("--publish-messages", type=int, help="for plain publish (messages/5)")
    ap.add_argument("--publish-concurrency", type=int, default=100)
    ap.add_argument("--to-nsq-messages", type=int, help="for to_nsq (messages/20, max 50k)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--nsqd",
        choices=["memory", "disk"],
        default="memory",
        help="memory: nsqd --mem-queue-size large enough to keep every message in memory"
        " (as nsq's own bench.sh does); disk: nsqd defaults (10000 in memory, the rest"
        " spills to its disk queue, fsync every 2500)",
    )
    ap.add_argument("--runfor", type=float, help="fixed bench_writer --runfor in seconds")
    ap.add_argument("--quick", action="store_true", help="small smoke run (seconds)")
    ap.add_argument("--sweep", action="store_true", help="compare batch sizes and windows")
    ap.add_argument("--results-dir", type=Path, default=c.RESULTS_DIR)
    ap.add_argument("--no-json", action="store_true", help="do not write the JSON results")
    ap.add_argument("--require-targets", action="store_true", help="exit 2 when a target is missed")
    args = ap.parse_args(argv)
    if args.quick:
        args.messages = min(args.messages, 20_000)
        args.repeats = 1
        if args.runfor is None:
            args.runfor = 0.1
    publish_messages = args.publish_messages or max(1, args.messages // 5)
    to_nsq_messages = args.to_nsq_messages or max(1, min(50_000, args.messages // 20))
    c.require_positive(ap, args, "messages", "size", "batch", "window", "producers", "repeats")
    s = Settings(
        messages=args.messages,
        size=args.size,
        batch=args.batch,
        window=args.window,
        producers=args.producers,
        publish_messages=publish_messages,
        publish_concurrency=args.publish_concurrency,
        to_nsq_messages=to_nsq_messages,
        repeats=args.repeats,
        quick=args.quick,
        runfor=args.runfor,
    )
    return args, s


def main(argv: Sequence[str] | None = None) -> int:
    args, s = parse_args(argv)
    rss = c.PeakRss()
    payload = c.run_header("producer", s)
    started = time.perf_counter()
    nsqd_args = []
    if args.nsqd == "memory":
        # bench_writer may publish a little more than --messages: leave room.
        nsqd_args.append(f"--mem-queue-size={max(2 * s.messages, 10_000)}")
    payload["nsqd_args"] = nsqd_args
    payload["nsq_bin_dir"] = str(c.nsq_bin("bench_writer").parent)  # names the nsq version
    with c.nsqd_cluster(nsqd_args=nsqd_args) as cluster:
        if args.sweep:
            rows = sweep(cluster, s, rss)
            payload["sweep"] = rows
            verified = all(r["verified"] for r in rows)
            verdict = None
        else:
            results = c.run_interleaved(plan(cluster, s, rss), s.repeats)
            rows = summarize(results)
            print_summary(rows, s)
            verdict = check_targets(rows)
            verified = all(r["verified"] for r in rows)
            payload.update(c.results_json(results, rows, verdict))
    return c.conclude(
        "producer-sweep" if args.sweep else "producer",
        payload,
        args,
        started=started,
        verified=verified,
        targets_met=verdict is None
        or (verdict["met_vs_bench_writer"] and verdict["met_vs_to_nsq"]),
        mismatch=" what was published",
    )


if __name__ == "__main__":
    sys.exit(main())
