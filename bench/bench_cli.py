"""CLI benchmark: ``nsqctl pub`` against ``to_nsq``, ``nsqctl tail`` against ``nsq_tail``,
and ``nsqctl pub`` of a 1 GB input with its peak RSS.

Every row is a real process started the way a user starts it (the ``nsqctl`` console
script next to this interpreter, nsq's Go binaries), timed from spawn to exit - so
interpreter start-up and imports count against nsqctl - with its CPU time (``os.wait4``)
and peak RSS (``/proc/<pid>/status`` VmHWM sampled every 10 ms). One nsqd on 127.0.0.1,
a fresh topic per run (deleted afterwards). ``--nsqd memory`` (default): ``--mem-queue-size``
holds every message, as nsq's bench.sh runs it; ``--nsqd disk``: nsqd's defaults (10,000
messages in memory, the rest through its disk queue) - what operators run. Variants are
interleaved, their order rotated each repeat (``--repeats``, 3); medians and same-run
ratios are reported.

Rows:

* ``nsqctl pub`` - ``nsqctl pub TOPIC --nsqd ADDR -q < FILE`` of ``--messages`` (1M) lines
  of ``--size`` (100) bytes; stock options (batch 200).
* ``to_nsq`` - ``to_nsq --topic TOPIC --nsqd-tcp-address ADDR < FILE`` (reference, target
  >= 20x), ``--to-nsq-messages`` lines (messages/20, at most 50k: it does one synchronous
  PUB per line).
* ``nsqctl tail`` - ``nsqctl tail TOPIC --nsqd ADDR --channel bench -n N > /dev/null`` of
  N = ``--messages`` prefilled messages; stock options (max-in-flight 200).
* ``nsq_tail`` - ``nsq_tail --topic ... --channel bench -n N > /dev/null`` (reference,
  target >= 1.5x); stock options (max-in-flight 200).
* ``nsqctl tail buffered`` - ``nsqctl tail`` as above with ``--output-buffer 250ms``: nsqd
  buffers its output (its default, 250 ms); the stock ``nsqctl tail`` of the durable
  channel ``bench`` asks for it unbuffered (``--output-buffer auto``). The pair is the cost
  of unbuffered output.
* ``nsqctl archive`` / ``nsqctl archive buffered`` - ``nsqctl archive TOPIC --channel bench
  --out DIR --nsqd ADDR --exit-when-idle 0.5 -q`` of the N prefilled messages, stock
  (unbuffered) and with ``--output-buffer 250ms``; both pay the 0.5 s idle wait.
* ``nsqctl pub 1 GB`` - ``nsqctl pub TOPIC --nsqd ADDR -q --file FILE`` of a ``--big-mib``
  (1024) MiB file of ``--big-size`` (1000) byte lines; target: peak RSS < 200 MB. The file
  is generated in a temp dir (free space is checked first) and deleted afterwards.

Delivery is verified through nsqd ``/stats`` every time: publishers by the topic's
``message_count`` and ``message_bytes``; tails by the channel (everything delivered, none
requeued or timed out; nsqctl tail also FINs everything before it exits - nsq_tail exits
at the N-th message without FINing it, so up to its max-in-flight stay in flight).

Run: ``python -m bench.bench_cli`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import _common as c

PUB = "nsqctl pub"
TO_NSQ = "to_nsq"
TAIL = "nsqctl tail"
NSQ_TAIL = "nsq_tail"
TAIL_BUFFERED = "nsqctl tail buffered"
ARCHIVE = "nsqctl archive"
ARCHIVE_BUFFERED = "nsqctl archive buffered"
#: what the buffered rows ask for: nsqd's default output-buffer timeout, said explicitly
BUFFERED = ["--output-buffer", "250ms"]
BIG = "nsqctl pub 1 GB"

TARGET_PUB_VS_TO_NSQ = 20.0
TARGET_TAIL_VS_NSQ_TAIL = 1.5
BIG_RSS_LIMIT_MB = 200  # MB = 10^6 bytes (the budget is in MB, not MiB)
CHANNEL = "bench"


def nsqctl_exe() -> str:
    """The ``nsqctl`` console script of this interpreter (not a pyenv shim)."""
    local = Path(sys.executable).parent / "nsqctl"
    if local.exists():
        return str(local)
    found = shutil.which("nsqctl")
    if not found:
        raise SystemExit("the nsqctl console script is not installed: pip install -e .")
    return found


def write_lines(path: Path, count: int, size: int) -> int:
    """``count`` lines of ``size`` printable bytes + newline; returns the file size."""
    alphabet = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    line = (alphabet * (size // len(alphabet) + 1))[:size] + b"\n"
    block_lines = max(1, min(count, (1 << 20) // len(line)))
    block = line * block_lines
    with path.open("wb") as fh:
        left = count
        while left >= block_lines:
            fh.write(block)
            left -= block_lines
        fh.write(line * left)
    return count * len(line)


# --------------------------------------------------------------------------- measurements


def _pub_check(
    cluster: c.Cluster, topic: str, count: int, size: int
) -> tuple[bool, dict[str, Any]]:
    stats = c.topic_stats(cluster.nsqd_http[0], topic)
    ok = (
        stats is not None
        and stats.message_count == count
        and (stats.message_bytes is None or stats.message_bytes == count * size)
    )
    return ok, {"topic_stats": c.counters(stats)}


def measure_publisher(
    cluster: c.Cluster,
    variant: str,
    argv_for: Callable[[str], list[str]],
    count: int,
    size: int,
    *,
    stdin_from: Path | None,
) -> c.Measurement:
    topic = c.unique_topic("bcli_" + variant.split()[0].replace("-", "_"))
    peer, server_cpu = c.run_peer_on(
        cluster,
        argv_for(topic),
        stdin_from=None if stdin_from is None else str(stdin_from),
        timeout=max(300.0, count / 5000),
    )
    ok, detail = _pub_check(cluster, topic, count, size)
    c.delete_topic(cluster.nsqd_http[0], topic)
    ok = ok and peer.returncode == 0 and not peer.timed_out
    return c.Measurement.of_peer(
        variant,
        peer,
        messages=count,
        verified=ok,
        server_cpu=server_cpu,
        detail={
            "topic": topic,
            "returncode": peer.returncode,
            "bytes": count * size,
            **detail,
            "stderr": peer.stderr.strip()[-800:] if not ok else "",
        },
    )


def measure_tail(
    cluster: c.Cluster, variant: str, argv_for: Callable[[str], list[str]], s: Settings
) -> c.Measurement:
    count = s.messages
    topic = c.fresh_topic(cluster, "bcli_tail", CHANNEL, count, s.size)
    peer, server_cpu = c.run_peer_on(
        cluster, argv_for(topic), timeout=max(300.0, count / 2000), stdout_to=os.devnull
    )
    # a clean close lands its last FINs a moment after the exit
    stats = c.wait_channel(
        cluster.nsqd_http[0], topic, CHANNEL, lambda st: st is None or st.in_flight_count == 0
    )
    c.delete_topic(cluster.nsqd_http[0], topic)
    # nsq_tail exits at the N-th message before FINing it: its last messages stay in flight
    max_in_flight_left = 200 if variant == NSQ_TAIL else 0
    ok = (
        peer.returncode == 0
        and not peer.timed_out
        and c.channel_drained(stats, count)
        and stats is not None
        and stats.in_flight_count <= max_in_flight_left
    )
    return c.Measurement.of_peer(
        variant,
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


# --------------------------------------------------------------------------- plan


@dataclass
class Settings:
    messages: int
    to_nsq_messages: int
    size: int
    big_mib: int
    big_size: int
    repeats: int
    nsqd: str  # "memory" | "disk"


def plan(
    cluster: c.Cluster, s: Settings, files: dict[str, Path], skip: set[str]
) -> list[tuple[str, Callable[[], Any]]]:
    exe = nsqctl_exe()
    addr = cluster.nsqd_tcp[0]
    to_nsq = str(c.nsq_bin("to_nsq"))
    nsq_tail = str(c.nsq_bin("nsq_tail"))
    big_lines = files["big_lines"]

    def tail_argv(topic: str) -> list[str]:
        return [exe, "tail", topic, "--nsqd", addr, "--channel", CHANNEL, "-n", str(s.messages)]

    def archive_argv(topic: str) -> list[str]:
        out = files["archive_dir"] / topic
        idle = ["--exit-when-idle", "0.5", "-q"]
        return [
            exe,
            "archive",
            topic,
            "--channel",
            CHANNEL,
            "--out",
            str(out),
            "--nsqd",
            addr,
            *idle,
        ]

    variants: list[tuple[str, Callable[[], Any]]] = [
        (
            PUB,
            lambda: measure_publisher(
                cluster,
                PUB,
                lambda t: [exe, "pub", t, "--nsqd", addr, "-q"],
                s.messages,
                s.size,
                stdin_from=files["lines"],
            ),
        ),
        (
            TO_NSQ,
            lambda: measure_publisher(
                cluster,
                TO_NSQ,
                lambda t: [to_nsq, f"--topic={t}", f"--nsqd-tcp-address={addr}"],
                s.to_nsq_messages,
                s.size,
                stdin_from=files["to_nsq_lines"],
            ),
        ),
        (TAIL, lambda: measure_tail(cluster, TAIL, tail_argv, s)),
        (
            TAIL_BUFFERED,
            lambda: measure_tail(cluster, TAIL_BUFFERED, lambda t: tail_argv(t) + BUFFERED, s),
        ),
        (ARCHIVE, lambda: measure_tail(cluster, ARCHIVE, archive_argv, s)),
        (
            ARCHIVE_BUFFERED,
            lambda: measure_tail(
                cluster, ARCHIVE_BUFFERED, lambda t: archive_argv(t) + BUFFERED, s
            ),
        ),
        (
            NSQ_TAIL,
            lambda: measure_tail(
                cluster,
                NSQ_TAIL,
                lambda t: [
                    nsq_tail,
                    f"--topic={t}",
                    f"--channel={CHANNEL}",
                    f"--nsqd-tcp-address={addr}",
                    f"-n={s.messages}",
                ],
                s,
            ),
        ),
        (
            BIG,
            lambda: measure_publisher(
                cluster,
                BIG,
                lambda t: [exe, "pub", t, "--nsqd", addr, "-q", "--file", str(files["big"])],
                big_lines,  # type: ignore[arg-type]
                s.big_size,
                stdin_from=None,
            ),
        ),
    ]
    return [(name, fn) for name, fn in variants if name not in skip]


def summarize(results: dict[str, list[c.Measurement]]) -> list[dict[str, Any]]:
    rate = {name: c.median([m.rate for m in ms]) for name, ms in results.items()}
    refs = {PUB: TO_NSQ, TAIL: NSQ_TAIL, TAIL_BUFFERED: TAIL, ARCHIVE_BUFFERED: ARCHIVE}
    rows = []
    for name, ms in results.items():
        ref = refs.get(name)
        row = {
            "variant": name,
            "messages": ms[0].messages if ms else 0,
            "msgs_per_s": rate[name],
            "mb_per_s": c.median([m.detail.get("bytes", 0) / m.seconds / 1e6 for m in ms])
            if ms and ms[0].detail.get("bytes")
            else None,
            "runs_msgs_per_s": [m.rate for m in ms],
            "reference": ref,
            "vs_reference": rate[name] / rate[ref] if ref and rate.get(ref) else None,
            "paired_vs_reference": c.paired_ratios(ms, results[ref]) if ref in results else [],
            "client_cpu_us_per_msg": c.per_msg_us(ms, "client_cpu"),
            "peak_rss_mb": max((m.peak_rss_kb or 0) for m in ms) * 1024 / 1e6,
            "verified": all(m.verified for m in ms),
        }
        rows.append(row)
    return rows


def print_summary(rows: list[dict[str, Any]], s: Settings, big_bytes: int) -> None:
    c.print_table(
        f"CLI: {s.messages:,} x {s.size}-byte messages (to_nsq: {s.to_nsq_messages:,}); "
        f"big input {big_bytes / 2**20:,.0f} MiB of {s.big_size}-byte lines; "
        f"nsqd {s.nsqd} mode; median of {s.repeats}; wall time from spawn to exit",
        [
            "variant",
            "messages",
            "msgs/s",
            "MB/s",
            "vs reference",
            "client CPU us/msg",
            "peak RSS MB",
            "delivery",
        ],
        [
            [
                r["variant"],
                c.fmt_int(r["messages"]),
                c.fmt_int(r["msgs_per_s"]),
                "-" if r["mb_per_s"] is None else f"{r['mb_per_s']:.1f}",
                f"{c.ratio_text(r['vs_reference'])} {r['reference']}" if r["reference"] else "-",
                f"{r['client_cpu_us_per_msg']:.2f}",
                f"{r['peak_rss_mb']:.0f}",
                "verified" if r["verified"] else "FAILED",
            ]
            for r in rows
        ],
    )


def check_targets(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by = {r["variant"]: r for r in rows}
    verdict: dict[str, Any] = {}
    for variant, target in ((PUB, TARGET_PUB_VS_TO_NSQ), (TAIL, TARGET_TAIL_VS_NSQ_TAIL)):
        row = by.get(variant)
        if row is None or row["vs_reference"] is None:
            continue
        met = row["vs_reference"] >= target
        verdict[variant] = {
            "value": row["vs_reference"],
            "target": target,
            "met": met,
            "same_repeat": row["paired_vs_reference"],
        }
        same = ", ".join(c.ratio_text(x) for x in row["paired_vs_reference"])
        print(
            f"target {variant} >= {target:g}x {row['reference']}: "
            f"{c.ratio_text(row['vs_reference'])} {'met' if met else 'MISSED'}"
            f"  (same-repeat: {same or '-'})"
        )
    row = by.get(BIG)
    if row is not None:
        met = row["peak_rss_mb"] < BIG_RSS_LIMIT_MB
        verdict[BIG] = {"value": row["peak_rss_mb"], "target": BIG_RSS_LIMIT_MB, "met": met}
        print(
            f"target {BIG} peak RSS < {BIG_RSS_LIMIT_MB} MB: {row['peak_rss_mb']:.0f} MB "
            f"{'met' if met else 'MISSED'}"
        )
    return verdict


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Benchmark nsqctl pub/tail against to_nsq/nsq_tail.")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--to-nsq-messages", type=int, help="for to_nsq (messages/20, max 50k)")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--big-mib", type=int, default=1024, help="size of the big input (MiB)")
    ap.add_argument("--big-size", type=int, default=1000, help="line size of the big input")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip", action="append", default=[], help="leave a row out (repeatable)")
    ap.add_argument("--quick", action="store_true", help="100k messages, 100 MiB, 1 repeat")
    ap.add_argument("--tmp-dir", type=Path, help="where the input files go (default: $TMPDIR)")
    c.add_nsqd_mode_arg(ap)
    c.add_output_args(ap)
    args = ap.parse_args(argv)
    if args.quick:
        args.messages = min(args.messages, 100_000)
        args.big_mib = min(args.big_mib, 100)
        args.repeats = 1
    if args.to_nsq_messages is None:
        args.to_nsq_messages = max(1, min(50_000, args.messages // 20))
    c.require_positive(
        ap, args, "messages", "to_nsq_messages", "size", "big_mib", "big_size", "repeats"
    )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    c.bytecode_as_installed()
    s = Settings(
        messages=args.messages,
        to_nsq_messages=args.to_nsq_messages,
        size=args.size,
        big_mib=args.big_mib,
        big_size=args.big_size,
        repeats=args.repeats,
        nsqd=args.nsqd,
    )
    skip = set(args.skip)
    big_lines = (s.big_mib << 20) // (s.big_size + 1)
    need = (s.messages + s.to_nsq_messages) * (s.size + 1) + (
        0 if BIG in skip else big_lines * (s.big_size + 1)
    )
    tmp_parent = args.tmp_dir or Path(tempfile.gettempdir())
    free = shutil.disk_usage(tmp_parent).free
    if free < need + (512 << 20):
        raise SystemExit(
            f"not enough free space in {tmp_parent}: {free / 2**30:.1f} GiB free, the inputs "
            f"need {need / 2**30:.1f} GiB (+0.5 GiB margin); use --tmp-dir or --big-mib"
        )
    payload = c.run_header("cli", s)
    payload["nsqctl"] = nsqctl_exe()
    started = time.perf_counter()
    # memory mode: the biggest topic (the 1 GB input) stays in nsqd's memory; each topic is
    # deleted after its run.
    nsqd_args = c.nsqd_mode_args(s.nsqd, max(s.messages, 0 if BIG in skip else big_lines))
    payload["nsqd_args"] = nsqd_args
    payload["nsq_bin_dir"] = str(c.nsq_bin("to_nsq").parent)
    with tempfile.TemporaryDirectory(prefix="nsqctl-bench-cli-", dir=tmp_parent) as tmp:
        files: dict[str, Any] = {"lines": Path(tmp) / "lines.txt"}
        files["to_nsq_lines"] = Path(tmp) / "to_nsq_lines.txt"
        files["big"] = Path(tmp) / "big.txt"
        files["archive_dir"] = Path(tmp) / "archive"
        c.say(f"writing inputs to {tmp} ({free / 2**30:.1f} GiB free)")
        write_lines(files["lines"], s.messages, s.size)
        write_lines(files["to_nsq_lines"], s.to_nsq_messages, s.size)
        files["big_lines"] = big_lines
        big_bytes = 0
        if BIG not in skip:
            big_bytes = write_lines(files["big"], big_lines, s.big_size)
            c.say(f"big input: {big_bytes / 2**20:,.0f} MiB, {big_lines:,} lines")
        with c.nsqd_cluster(nsqd_args=nsqd_args) as cluster:
            results = c.run_interleaved(plan(cluster, s, files, skip), s.repeats)
    rows = summarize(results)
    print_summary(rows, s, big_bytes)
    verdict = check_targets(rows)
    payload.update(c.results_json(results, rows, verdict), big_input_bytes=big_bytes)
    return c.conclude(
        "cli",
        payload,
        args,
        started=started,
        verified=all(r["verified"] for r in rows),
        targets_met=all(v["met"] for v in verdict.values()),
    )


if __name__ == "__main__":
    sys.exit(main())
