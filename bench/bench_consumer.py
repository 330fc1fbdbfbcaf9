"""Consumer benchmark: nsqctl's Consumer against nsq_tail, bench_reader, pynsq and gnsq.

Every run consumes from one real nsqd on 127.0.0.1: a fresh topic with a durable channel
is created, ``--messages`` bodies of ``--size`` bytes are published into it first (nsqctl's
Producer; not timed) and have reached the channel, then ONE consumer drains the channel.
``--nsqd memory`` (default): nsqd's ``--mem-queue-size`` holds every message, as nsq's
bench.sh runs it; ``--nsqd disk``: nsqd's defaults (10,000 messages in memory, the rest
read back from its disk queue). Every consumer runs as its own process (so each has a
clean interpreter and its own peak RSS, sampled from ``/proc/<pid>/status`` VmHWM every
10 ms). Variants are interleaved, their order rotated each repeat (``--repeats``, 3),
medians reported, and ratios taken against the peers of the same run.

Delivery is verified through nsqd, not the client's count: after a run the channel's
``/stats`` must show everything delivered (``depth`` 0, nothing deferred, requeued or
timed out) and, for the library consumers, everything FINed (``in_flight`` 0).

Variants:

* ``nsqctl no-op`` - ``Consumer`` with a synchronous handler that does nothing (the
  message is FINed when it returns); ``--max-in-flight`` (2500).
* ``nsqctl /dev/null`` - the same, the handler writes body + newline to a buffered
  ``/dev/null`` (what ``nsq_tail > /dev/null`` does).
* ``nsq_tail`` - nsq's Go tail (reference, target >= 1.5x): ``-n N --max-in-flight M``,
  stdout to /dev/null, timed spawn to exit (it exits at the N-th message, before FINing
  it, so up to M messages stay in flight at nsqd: checked, not counted against it).
* ``bench_reader`` - nsq's Go benchmark reader (reference, target >= 0.6x): GOMAXPROCS
  connections, RDY 2500 each, FINs batched. It runs for a time, not a count: its
  ``--runfor`` is aimed at ~70% of the prefilled messages (a probe first, then the median
  rate so far) so it never runs dry; its rate is its count over its own duration, and its
  count must match what nsqd delivered.
* ``pynsq`` / ``gnsq`` - the Python libraries (target >= 10x pynsq), no-op handler, same
  max-in-flight, ``--peer-messages`` (messages / 5) each, since they are slow.

The Python consumers time themselves from creating the consumer (connect + subscribe
included) to the last message handled, and print it as JSON; the Go tools are timed as
described above. Run: ``python -m bench.bench_consumer`` (``--quick`` for a smoke run;
``--cpu`` for the CPU cost per message of nsqctl's consume path alone, no nsqd).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench import _common as c

NSQCTL = "nsqctl no-op"
NSQCTL_DEVNULL = "nsqctl /dev/null"
NSQ_TAIL = "nsq_tail"
BENCH_READER = "bench_reader"
PYNSQ = "pynsq"
GNSQ = "gnsq"

TARGET_VS_NSQ_TAIL = 1.5
TARGET_VS_PYNSQ = 10.0
TARGET_VS_BENCH_READER = 0.6
RSS_LIMIT_MIB = 150

CHANNEL = "bench"
CHILD_KINDS = ("nsqctl", "nsqctl-devnull", "pynsq", "gnsq")
BENCH_READER_RDY = 2500


# --------------------------------------------------------------------------- children


def _child_nsqctl(
    addr: str | None,
    topic: str,
    count: int,
    mif: int,
    devnull: bool,
    lookupd: str | None = None,
    channel: str = CHANNEL,
) -> dict[str, Any]:
    import asyncio

    from nsqctl.consumer import Consumer, ConsumerOptions

    # an nsqd address, or a lookupd (the redesign: every partition of the topic)
    where: dict[str, Any] = {"lookupd_http": [lookupd]} if lookupd else {"nsqd_tcp": [addr]}

    out = open(os.devnull, "wb")  # noqa: SIM115 - closed below
    write = out.write
    result: dict[str, Any] = {}

    async def main() -> None:
        done = asyncio.Event()
        n = 0

        def noop(msg: Any) -> None:
            nonlocal n
            n += 1
            if n >= count:
                done.set()

        def to_devnull(msg: Any) -> None:
            nonlocal n
            write(msg.body)
            write(b"\n")
            n += 1
            if n >= count:
                done.set()

        start = time.perf_counter()
        consumer = Consumer(
            topic,
            channel,
            to_devnull if devnull else noop,
            options=ConsumerOptions(max_in_flight=mif),
            **where,
        )
        await consumer.start()
        await done.wait()
        result["seconds"] = time.perf_counter() - start
        await consumer.stop()  # the last FINs go out, CLS, close
        result["received"] = n
        result["finished"] = consumer.stats.finished

    asyncio.run(main())
    out.close()
    return result


def _child_pynsq(addr: str, topic: str, count: int, mif: int) -> dict[str, Any]:
    import nsq  # pynsq
    import tornado.ioloop

    state: dict[str, Any] = {"n": 0}
    loop = tornado.ioloop.IOLoop.current()

    def stop() -> None:
        reader.close()
        loop.call_later(0.5, loop.stop)  # let the closes finish

    def handler(msg: Any) -> bool:
        state["n"] += 1
        if state["n"] == count:
            state["seconds"] = time.perf_counter() - start
            loop.call_later(0.3, stop)  # the FIN of this message is written after we return
        return True

    start = time.perf_counter()
    reader = nsq.Reader(
        topic=topic,
        channel=CHANNEL,
        message_handler=handler,
        nsqd_tcp_addresses=[addr],
        max_in_flight=mif,
    )
    loop.start()
    return {"received": state["n"], "seconds": state.get("seconds")}


def _child_gnsq(addr: str, topic: str, count: int, mif: int) -> dict[str, Any]:
    import gevent
    import gnsq

    state: dict[str, Any] = {"n": 0}
    consumer = gnsq.Consumer(topic, CHANNEL, nsqd_tcp_addresses=[addr], max_in_flight=mif)

    def handler(_consumer: Any, message: Any) -> None:
        state["n"] += 1
        if state["n"] == count:
            state["seconds"] = time.perf_counter() - start
            gevent.spawn_later(0.3, consumer.close)  # FIN goes out after we return

    consumer.on_message.connect(handler)  # a blinker signal (gnsq ships no types)
    start = time.perf_counter()
    consumer.start(block=True)
    return {"received": state["n"], "seconds": state.get("seconds")}


def child_main(args: argparse.Namespace) -> int:
    kind = args.child
    if kind in ("nsqctl", "nsqctl-devnull"):
        result = _child_nsqctl(
            args.address,
            args.topic,
            args.count,
            args.max_in_flight,
            kind == "nsqctl-devnull",
            lookupd=args.lookupd,
            channel=args.channel,
        )
    elif kind == "pynsq":
        result = _child_pynsq(args.address, args.topic, args.count, args.max_in_flight)
    else:
        result = _child_gnsq(args.address, args.topic, args.count, args.max_in_flight)
    print(json.dumps(result), flush=True)
    return 0


# --------------------------------------------------------------------------- CPU only


def cpu_per_message(messages: int, size: int, max_in_flight: int, repeats: int) -> list[float]:
    """CPU seconds per message of nsqctl's consume path alone, without nsqd or a socket.

    Pre-encoded MESSAGE frames (1,000 per read) go to the connection's socket protocol as
    asyncio hands reads over (``SocketProtocol.data_received``), through the session into
    a ``Consumer`` with a no-op handler, and the FINs into a transport that drops them
    (:mod:`inproc`). This is the Python cost per message that the throughput rows pay on
    top of nsqd and the kernel - stable on a noisy machine, and what a change to the hot
    path should move.
    """
    import asyncio

    from bench.inproc import attach
    from nsqctl.consumer import Consumer, ConsumerOptions
    from nsqctl.protocol.frames import encode_frame
    from nsqctl.protocol.raw_message import RawMessage, encode_message

    per_read = 1000
    body = b"y" * size
    chunk = b"".join(
        encode_frame(
            2, encode_message(RawMessage(1_700_000_000_000_000_000, 1, b"%016x" % i, body))
        )
        for i in range(per_read)
    )

    async def once() -> float:
        handled = 0

        def noop(_msg: Any) -> None:
            nonlocal handled
            handled += 1

        address = "127.0.0.1:9"
        consumer = Consumer(
            "t", "c", noop, nsqd_tcp=[address], options=ConsumerOptions(max_in_flight=max_in_flight)
        )
        sock, transport, _conn = attach(consumer, address)
        reads = messages // per_read
        start = time.process_time()
        for _ in range(reads):
            sock.data_received(chunk)
            await asyncio.sleep(0)  # one event-loop turn per read, as asyncio reads
        seconds = time.process_time() - start
        count = reads * per_read
        if handled != count or transport.written < count * 21:
            raise SystemExit(f"CPU run broken: {handled} handled, {transport.written} bytes of FIN")
        return seconds / count

    return [asyncio.run(once()) for _ in range(repeats)]


# --------------------------------------------------------------------------- parent


@dataclass
class Settings:
    messages: int
    peer_messages: int
    size: int
    max_in_flight: int
    repeats: int
    runfor: float | None  # fixed bench_reader --runfor; None = calibrate
    nsqd: str = "memory"  # "memory" | "disk"


def _fresh_topic(cluster: c.Cluster, prefix: str, count: int, size: int) -> str:
    return c.fresh_topic(cluster, prefix, CHANNEL, count, size)


def _settle(cluster: c.Cluster, topic: str, want_in_flight_zero: bool) -> c.ChannelStats | None:
    """Channel counters once the consumer's last FINs have landed (up to 2 s)."""

    def done(stats: c.ChannelStats | None) -> bool:
        return (
            stats is not None
            and stats.depth == 0
            and stats.client_count == 0
            and (not want_in_flight_zero or stats.in_flight_count == 0)
        )

    return c.wait_channel(cluster.nsqd_http[0], topic, CHANNEL, done)


def run_child(
    cluster: c.Cluster,
    kind: str,
    topic: str,
    count: int,
    max_in_flight: int,
    *,
    lookupd: str | None = None,
    channel: str = CHANNEL,
) -> tuple[c.PeerResult, float | None, dict[str, Any]]:
    """One Python consumer (``kind``, :data:`CHILD_KINDS`) in its own process, reading
    ``count`` messages of ``topic``/``channel`` from the cluster's first nsqd, or through
    ``lookupd`` (every partition of a redesign topic); the peer result, the nsqds' CPU
    seconds meanwhile, and the child's own report (``received``, ``seconds``, ...)."""
    where = ["--lookupd", lookupd] if lookupd else ["--address", cluster.nsqd_tcp[0]]
    if channel != CHANNEL:
        where += ["--channel", channel]
    argv = [
        sys.executable,
        "-m",
        "bench.bench_consumer",
        "--child",
        kind,
        *where,
        "--topic",
        topic,
        "--count",
        str(count),
        "--max-in-flight",
        str(max_in_flight),
    ]
    peer, server_cpu = c.run_peer_on(cluster, argv, timeout=max(120.0, count / 2000))
    return peer, server_cpu, child_report(peer)


def child_report(peer: c.PeerResult) -> dict[str, Any]:
    """A child's own report: the last JSON line of its stdout ({} if none)."""
    lines = [ln for ln in peer.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def measure_python(
    cluster: c.Cluster, variant: str, kind: str, count: int, s: Settings
) -> c.Measurement:
    topic = _fresh_topic(cluster, f"bc_{kind.replace('-', '_')}", count, s.size)
    peer, server_cpu, report = run_child(cluster, kind, topic, count, s.max_in_flight)
    stats = _settle(cluster, topic, want_in_flight_zero=True)
    c.delete_topic(cluster.nsqd_http[0], topic)
    seconds = report.get("seconds") or peer.wall
    ok = (
        peer.returncode == 0
        and report.get("received") == count
        and c.channel_drained(stats, count)
        and stats is not None
        and stats.in_flight_count == 0
    )
    return c.Measurement.of_peer(
        variant,
        peer,
        messages=count,
        seconds=seconds,
        verified=ok,
        server_cpu=server_cpu,
        detail={
            "topic": topic,
            "wall_with_startup": peer.wall,
            "returncode": peer.returncode,
            "report": report,
            "channel": c.counters(stats),
            "stderr": peer.stderr.strip()[-800:] if not ok else "",
        },
    )


def measure_nsq_tail(cluster: c.Cluster, s: Settings) -> c.Measurement:
    count = s.messages
    topic = _fresh_topic(cluster, "bc_nsq_tail", count, s.size)
    argv = [
        str(c.nsq_bin("nsq_tail")),
        f"--topic={topic}",
        f"--channel={CHANNEL}",
        f"--nsqd-tcp-address={cluster.nsqd_tcp[0]}",
        f"--max-in-flight={s.max_in_flight}",
        f"-n={count}",
    ]
    peer, server_cpu = c.run_peer_on(
        cluster, argv, timeout=max(120.0, count / 2000), stdout_to=os.devnull
    )
    stats = _settle(cluster, topic, want_in_flight_zero=False)
    c.delete_topic(cluster.nsqd_http[0], topic)
    # It exits (os.Exit) on the N-th message: every message was delivered to it, and what
    # it had not FINed yet (at most max-in-flight) stays in flight at nsqd.
    ok = (
        peer.returncode == 0
        and not peer.timed_out
        and c.channel_drained(stats, count)
        and stats is not None
        and stats.in_flight_count <= s.max_in_flight
    )
    return c.Measurement.of_peer(
        NSQ_TAIL,
        peer,
        messages=count,
        verified=ok,
        server_cpu=server_cpu,
        detail={
            "topic": topic,
            "returncode": peer.returncode,
            "channel": c.counters(stats),
            "stderr": peer.stderr.strip()[-800:] if not ok else "",
        },
    )


def measure_bench_reader(
    cluster: c.Cluster, prefilled: int, runfor: float, s: Settings, variant: str = BENCH_READER
) -> c.Measurement:
    topic = _fresh_topic(cluster, "bc_bench_reader", prefilled, s.size)
    argv = [
        str(c.nsq_bin("bench_reader")),
        f"--runfor={runfor:.3f}s",
        f"--size={s.size}",
        f"--topic={topic}",
        f"--channel={CHANNEL}",
        f"--nsqd-tcp-address={cluster.nsqd_tcp[0]}",
        f"--rdy={BENCH_READER_RDY}",
    ]
    peer, server_cpu = c.run_peer_on(cluster, argv, timeout=runfor + 120)
    stats = c.channel_stats(cluster.nsqd_http[0], topic, CHANNEL)
    c.delete_topic(cluster.nsqd_http[0], topic)
    found = c.GO_BENCH_LINE.search(peer.stderr + peer.stdout)
    count, seconds = 0, peer.wall
    if found is not None:
        seconds = c.parse_go_duration(found.group(1))
        count = round(float(found.group(2)) * seconds)
    workers = os.cpu_count() or 1
    delivered = c.delivered(stats) if stats is not None else -1
    # Its count is what it read; nsqd delivered that plus what was still on the wire when
    # it closed (at most RDY per connection). It must not have run dry (depth > 0), or its
    # duration would include idle time.
    ok = (
        peer.returncode == 0
        and found is not None
        and stats is not None
        and stats.message_count == prefilled
        and stats.depth > 0
        and count <= delivered + 1
        and delivered - count <= BENCH_READER_RDY * workers
    )
    return c.Measurement.of_peer(
        variant,
        peer,
        messages=count,
        seconds=seconds,
        verified=ok,
        server_cpu=server_cpu,
        detail={
            "topic": topic,
            "runfor": runfor,
            "prefilled": prefilled,
            "delivered_by_nsqd": delivered,
            "connections": workers,
            "channel": c.counters(stats),
            "output": (peer.stderr + peer.stdout).strip()[-400:],
        },
    )


class BenchReader:
    """Aims bench_reader's ``--runfor`` at ~70% of the prefilled messages (never dry)."""

    SHARE = 0.7

    def __init__(self, cluster: c.Cluster, s: Settings) -> None:
        self.cluster, self.s = cluster, s
        self.rates: list[float] = []
        if s.runfor is not None:
            self.runfor = s.runfor
        else:
            probe = measure_bench_reader(
                cluster, min(s.messages, 200_000), 0.1, s, variant="calibration"
            )
            if not probe.verified or probe.rate <= 0:
                raise SystemExit(f"bench_reader calibration failed: {probe.detail}")
            self.runfor = self._aim(probe.rate)

    def _aim(self, rate: float) -> float:
        return min(max(self.SHARE * self.s.messages / rate, 0.1), 60.0)

    def __call__(self) -> c.Measurement:
        for _ in range(3):
            m = measure_bench_reader(self.cluster, self.s.messages, self.runfor, self.s)
            if self.s.runfor is not None:
                return m
            if m.verified:
                self.rates.append(m.rate)
                self.runfor = self._aim(c.median(self.rates))
                return m
            channel = m.detail.get("channel") or {}
            if channel.get("depth") != 0 or m.rate <= 0:
                return m
            # It ran dry (the machine got quieter than when aimed): its rate is only a lower
            # bound. Aim again, shorter, and run it again rather than report a wrong rate.
            print(f"  bench_reader ran dry at --runfor={self.runfor:.2f}s; aiming shorter")
            self.runfor = self._aim(m.rate * 1.5)
        return m


def plan(cluster: c.Cluster, s: Settings, skip: set[str]) -> list[tuple[str, Callable[[], Any]]]:
    variants: list[tuple[str, Callable[[], Any]]] = []
    if BENCH_READER not in skip:
        c.say("calibrating bench_reader --runfor (also warms nsqd up)")
        br = BenchReader(cluster, s)
        c.say(f"bench_reader --runfor={br.runfor:.2f}s")
        variants.append((BENCH_READER, br))
    variants += [
        (NSQ_TAIL, lambda: measure_nsq_tail(cluster, s)),
        (NSQCTL, lambda: measure_python(cluster, NSQCTL, "nsqctl", s.messages, s)),
        (
            NSQCTL_DEVNULL,
            lambda: measure_python(cluster, NSQCTL_DEVNULL, "nsqctl-devnull", s.messages, s),
        ),
        (PYNSQ, lambda: measure_python(cluster, PYNSQ, "pynsq", s.peer_messages, s)),
        (GNSQ, lambda: measure_python(cluster, GNSQ, "gnsq", s.peer_messages, s)),
    ]
    return [(name, fn) for name, fn in variants if name not in skip]


def summarize(results: dict[str, list[c.Measurement]]) -> list[dict[str, Any]]:
    return c.summary_rows(results, (NSQ_TAIL, BENCH_READER, PYNSQ))


def print_summary(rows: list[dict[str, Any]], s: Settings, repeats: int) -> None:
    c.print_table(
        f"Consumer: {s.messages:,} x {s.size}-byte messages from one nsqd "
        f"(pynsq/gnsq: {s.peer_messages:,}), nsqd {s.nsqd} mode, max-in-flight "
        f"{s.max_in_flight}, median of {repeats}",
        [
            "variant",
            "msgs/s",
            "vs nsq_tail",
            "vs bench_reader",
            "vs pynsq",
            "client CPU us/msg",
            "nsqd CPU us/msg",
            "peak RSS MiB",
            "delivery",
        ],
        [
            [
                r["variant"],
                c.fmt_int(r["msgs_per_s"]),
                c.ratio_text(r["vs_nsq_tail"]),
                c.ratio_text(r["vs_bench_reader"]),
                c.ratio_text(r["vs_pynsq"]),
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
    checks = [
        ("vs_nsq_tail", NSQCTL_DEVNULL, TARGET_VS_NSQ_TAIL),
        ("vs_nsq_tail", NSQCTL, TARGET_VS_NSQ_TAIL),
        ("vs_pynsq", NSQCTL, TARGET_VS_PYNSQ),
        ("vs_bench_reader", NSQCTL, TARGET_VS_BENCH_READER),
    ]
    verdict: dict[str, Any] = {}
    for key, variant, target in checks:
        row = by.get(variant)
        if row is None or key.removeprefix("vs_") not in by:
            continue  # a skipped variant or reference: nothing to judge
        value = row.get(key)
        met = value is not None and value >= target
        verdict[f"{variant} {key}"] = {
            "value": value,
            "target": target,
            "met": met,
            "same_repeat": row.get(f"paired_{key}") if row else None,
        }
        same = ", ".join(c.ratio_text(x) for x in (row or {}).get(f"paired_{key}", []))
        print(
            f"target {variant} {key.replace('_', ' ')} >= {target:g}x: "
            f"{c.ratio_text(value)} {'met' if met else 'MISSED'}  (same-repeat: {same or '-'})"
        )
    for variant in (NSQCTL, NSQCTL_DEVNULL):
        row = by.get(variant)
        if row:
            met = row["peak_rss_mib"] < RSS_LIMIT_MIB
            verdict[f"{variant} rss"] = {"value": row["peak_rss_mib"], "met": met}
            print(
                f"target {variant} peak RSS < {RSS_LIMIT_MIB} MiB: "
                f"{row['peak_rss_mib']:.0f} MiB {'met' if met else 'MISSED'}"
            )
    return verdict


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description="Benchmark nsqctl's Consumer against nsq_tail, bench_reader, pynsq, gnsq."
    )
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--peer-messages", type=int, help="for pynsq and gnsq (messages/5)")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--max-in-flight", type=int, default=2500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runfor", type=float, help="fixed bench_reader --runfor in seconds")
    ap.add_argument("--skip", action="append", default=[], help="leave a variant out (repeatable)")
    ap.add_argument("--quick", action="store_true", help="100k messages, 1 repeat")
    c.add_nsqd_mode_arg(ap)
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="only the CPU cost per message of nsqctl's consume path (no nsqd, no socket)",
    )
    c.add_output_args(ap)
    # child mode (internal): one consumer in its own process
    ap.add_argument("--child", choices=CHILD_KINDS, help=argparse.SUPPRESS)
    ap.add_argument("--address", help=argparse.SUPPRESS)  # an nsqd's TCP address
    ap.add_argument("--lookupd", help=argparse.SUPPRESS)  # or a lookupd's HTTP address
    ap.add_argument("--channel", default=CHANNEL, help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.messages = min(args.messages, 100_000)
        args.repeats = 1
    if args.peer_messages is None:
        args.peer_messages = max(1, args.messages // 5)
    c.require_positive(ap, args, "messages", "peer_messages", "size", "max_in_flight", "repeats")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    if args.cpu:
        per_msg = cpu_per_message(args.messages, args.size, args.max_in_flight, args.repeats)
        print(
            f"nsqctl consume path: {c.median(per_msg) * 1e6:.3f} us CPU/msg (median of "
            f"{len(per_msg)}; runs {', '.join(f'{x * 1e6:.3f}' for x in per_msg)}) for "
            f"{args.messages:,} x {args.size}-byte messages, no-op handler"
        )
        return 0
    s = Settings(
        messages=args.messages,
        peer_messages=args.peer_messages,
        size=args.size,
        max_in_flight=args.max_in_flight,
        repeats=args.repeats,
        runfor=args.runfor,
        nsqd=args.nsqd,
    )
    payload = c.run_header("consumer", s)
    started = time.perf_counter()
    # memory: every prefilled message stays in nsqd's memory (as nsq's bench.sh runs it)
    nsqd_args = c.nsqd_mode_args(s.nsqd, s.messages)
    payload["nsqd_args"] = nsqd_args
    payload["nsq_bin_dir"] = str(c.nsq_bin("nsq_tail").parent)
    with c.nsqd_cluster(nsqd_args=nsqd_args) as cluster:
        variants = plan(cluster, s, set(args.skip))
        results = c.run_interleaved(variants, s.repeats)
    rows = summarize(results)
    print_summary(rows, s, s.repeats)
    verdict = check_targets(rows)
    payload.update(c.results_json(results, rows, verdict))
    return c.conclude(
        "consumer",
        payload,
        args,
        started=started,
        verified=all(r["verified"] for r in rows),
        targets_met=all(v["met"] for v in verdict.values()),
        mismatch=" what was consumed",
    )


if __name__ == "__main__":
    sys.exit(main())
