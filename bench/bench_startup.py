"""Start-up benchmark: how long an operator waits for nsqctl's cheapest commands.

Each row runs one command as a fresh process (the ``nsqctl`` console script next to this
interpreter, or ``--nsqctl PATH``), timed from spawn to exit with its CPU time
(``os.wait4``) and peak RSS (sampled VmHWM), so interpreter start-up and every import count:

* ``nsqctl --help`` - the top-level help (target < 150 ms);
* ``nsqctl version`` - the client's version only (``version --client``; an nsqctl without
  that flag runs ``version`` with no cluster configured), target < 150 ms;
* ``nsqctl pub`` - ``nsqctl pub TOPIC msg --nsqd ADDR``: connect, IDENTIFY, one PUB, exit
  (target < 300 ms);
* ``to_nsq`` - nsq's Go tool publishing the same one message (``echo msg | to_nsq``): the
  reference every row is compared with (ratio of medians, and same-repeat ratios);
* ``python -c pass`` - the interpreter's own start-up (information: the floor nsqctl
  cannot go below).

One nsqd + nsqlookupd (original family, nsqd defaults) on 127.0.0.1; every ``pub`` run goes
to a fresh topic whose ``message_count`` must be exactly 1 afterwards (delivery check), then
the topic is deleted. The commands run with no ``NSQCTL_*`` variables and an empty config
file, so no profile or environment points them at a cluster. Rows are interleaved, their
order rotated each repeat (``--repeats``, 7, at least 5); medians are reported.

Run: ``python -m bench.bench_startup`` (about 10 s; ``--nsqctl /other/venv/bin/nsqctl``
measures another install, e.g. one made before a change).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import _common as c
from bench import bench_cli

HELP = "nsqctl --help"
VERSION = "nsqctl version"
PUB = "nsqctl pub"
TO_NSQ = "to_nsq"
PYTHON = "python -c pass"

#: the start-up budgets, in milliseconds, spawn to exit
TARGETS_MS = {HELP: 150.0, VERSION: 150.0, PUB: 300.0}


@dataclass
class Settings:
    repeats: int
    nsqctl: str


def script_python(exe: str) -> str:
    """The interpreter a console script runs on (its ``#!`` line), for the floor row."""
    with open(exe, "rb") as fh:
        first = fh.readline().decode(errors="replace").strip()
    return first[2:].split()[0] if first.startswith("#!") else sys.executable


def clean_env(config: Path) -> dict[str, str]:
    """This environment without ``NSQCTL_*``, with a config file that names no profile,
    and with bytecode caching on (as for a user: the warm-up run writes the ``.pyc`` files;
    with ``PYTHONDONTWRITEBYTECODE`` an editable install would recompile every run)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NSQCTL_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["NSQCTL_CONFIG"] = str(config)
    return env


def version_argv(exe: str, env: dict[str, str]) -> list[str]:
    """``version --client`` where the flag exists; plain ``version`` (no cluster) before."""
    out = subprocess.run(
        [exe, "version", "--help"], env=env, capture_output=True, text=True, timeout=60
    )
    return [exe, "version", "--client"] if "--client" in out.stdout else [exe, "version"]


def measure(
    variant: str,
    argv: Sequence[str],
    env: dict[str, str],
    check: Callable[[c.PeerResult], bool],
    *,
    stdin: bytes | None = None,
    after: Callable[[], None] | None = None,
) -> c.Measurement:
    peer = c.run_peer(argv, env=env, stdin=stdin, timeout=60.0)
    ok = not peer.timed_out and check(peer)
    if after is not None:
        after()
    return c.Measurement.of_peer(
        variant,
        peer,
        messages=1,
        verified=ok,
        server_cpu=None,
        detail={
            "argv": list(argv),
            "returncode": peer.returncode,
            "stderr": peer.stderr.strip()[-800:] if not ok else "",
        },
    )


def plan(
    cluster: c.Cluster, s: Settings, env: dict[str, str]
) -> list[tuple[str, Callable[[], c.Measurement]]]:
    exe = s.nsqctl
    addr, http = cluster.nsqd_tcp[0], cluster.nsqd_http[0]
    to_nsq = str(c.nsq_bin("to_nsq"))
    python = script_python(exe)
    version = version_argv(exe, env)

    def published(topic: str) -> Callable[[c.PeerResult], bool]:
        def check(peer: c.PeerResult) -> bool:
            stats = c.topic_stats(http, topic)
            return peer.returncode == 0 and stats is not None and stats.message_count == 1

        return check

    def pub() -> c.Measurement:
        topic = c.unique_topic("bstart_pub")
        return measure(
            PUB,
            [exe, "pub", topic, "startup", "--nsqd", addr],
            env,
            published(topic),
            after=lambda: c.delete_topic(http, topic),
        )

    def to_nsq_one() -> c.Measurement:
        topic = c.unique_topic("bstart_to_nsq")
        return measure(
            TO_NSQ,
            [to_nsq, f"--topic={topic}", f"--nsqd-tcp-address={addr}"],
            env,
            published(topic),
            stdin=b"startup\n",
            after=lambda: c.delete_topic(http, topic),
        )

    return [
        (
            HELP,
            lambda: measure(
                HELP,
                [exe, "--help"],
                env,
                lambda p: p.returncode == 0 and "Usage" in p.stdout,
            ),
        ),
        (
            VERSION,
            lambda: measure(
                VERSION, version, env, lambda p: p.returncode == 0 and "nsqctl" in p.stdout
            ),
        ),
        (PUB, pub),
        (TO_NSQ, to_nsq_one),
        (PYTHON, lambda: measure(PYTHON, [python, "-c", "pass"], env, lambda p: p.returncode == 0)),
    ]


def summarize(results: dict[str, list[c.Measurement]]) -> list[dict[str, Any]]:
    ref = results.get(TO_NSQ, [])
    ref_ms = c.median([m.seconds for m in ref]) * 1000
    rows = []
    for name, ms in results.items():
        wall = [m.seconds * 1000 for m in ms]
        median_ms = c.median(wall)
        target = TARGETS_MS.get(name)
        rows.append(
            {
                "variant": name,
                "argv": ms[0].detail["argv"] if ms else [],
                "median_ms": median_ms,
                "min_ms": min(wall) if wall else 0.0,
                "max_ms": max(wall) if wall else 0.0,
                "runs_ms": wall,
                "cpu_ms": c.median([(m.client_cpu or 0.0) * 1000 for m in ms]),
                "peak_rss_mb": max((m.peak_rss_kb or 0) for m in ms) * 1024 / 1e6,
                "vs_to_nsq": median_ms / ref_ms if ref_ms else None,
                "paired_vs_to_nsq": [
                    m.seconds / r.seconds for m, r in zip(ms, ref, strict=False) if r.seconds
                ],
                "target_ms": target,
                "met": None if target is None else median_ms < target,
                "verified": all(m.verified for m in ms),
            }
        )
    return rows


def print_summary(rows: list[dict[str, Any]], s: Settings) -> None:
    c.print_table(
        f"Start-up: median of {s.repeats} runs, wall time from spawn to exit ({s.nsqctl})",
        ["variant", "median ms", "min", "max", "CPU ms", "peak RSS MB", "x to_nsq", "target"],
        [
            [
                r["variant"],
                f"{r['median_ms']:.0f}",
                f"{r['min_ms']:.0f}",
                f"{r['max_ms']:.0f}",
                f"{r['cpu_ms']:.0f}",
                f"{r['peak_rss_mb']:.0f}",
                c.ratio_text(r["vs_to_nsq"]),
                "-"
                if r["target_ms"] is None
                else f"< {r['target_ms']:.0f} {'met' if r['met'] else 'MISSED'}",
            ]
            for r in rows
        ],
    )
    for r in rows:
        if not r["verified"]:
            print(f"{r['variant']}: FAILED ({r['argv']})")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Benchmark nsqctl start-up against to_nsq.")
    ap.add_argument("--repeats", type=int, default=7, help="runs of each row (at least 5)")
    ap.add_argument("--nsqctl", help="console script to measure (default: this venv's)")
    c.add_output_args(ap)
    args = ap.parse_args(argv)
    if args.repeats < 5:
        ap.error("--repeats must be at least 5 (the medians are the result)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    s = Settings(repeats=args.repeats, nsqctl=args.nsqctl or bench_cli.nsqctl_exe())
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nsqctl-bench-startup-") as tmp:
        config = Path(tmp) / "config.toml"
        config.write_text("")
        env = clean_env(config)
        with c.nsqd_cluster("original") as cluster:
            variants = plan(cluster, s, env)
            for name, fn in variants:  # one warm-up each: page cache, .pyc files
                fn()
                c.say(f"  warmed up {name}")
            results = c.run_interleaved(variants, s.repeats)
    rows = summarize(results)
    print_summary(rows, s)
    verified = all(r["verified"] for r in rows)
    met = all(r["met"] for r in rows if r["met"] is not None)
    payload = c.run_header("bench_startup", s)
    payload.update(
        {
            "summary": rows,
            "targets": {r["variant"]: r["met"] for r in rows if r["met"] is not None},
            "runs": {k: [m.to_json() for m in v] for k, v in results.items()},
        }
    )
    return c.conclude(
        "bench_startup",
        payload,
        args,
        started=started,
        verified=verified,
        targets_met=met,
        mismatch=" (or a command failed: see FAILED rows)",
    )


if __name__ == "__main__":
    sys.exit(main())
