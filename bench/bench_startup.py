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
  cannot go below);
* ``nsqctl tail --ordered -n 1`` / ``nsq_tail -ordered -n 1`` - with ``--redesign``: the
  first message of an ordered topic of a redesign cluster (2 nsqd, 2 partitions; a fresh
  channel prefilled with one message per run, as ``bench_redesign.py`` does), against
  youzan's Go tool;
* ``..., before`` - with ``--before TREE``: each nsqctl row again with
  ``PYTHONPATH=TREE`` (a source tree of the commit before a change), interleaved with the
  rest: a before/after comparison in one run, at one load.

One nsqd + nsqlookupd (original family, nsqd defaults) on 127.0.0.1; every ``pub`` run goes
to a fresh topic whose ``message_count`` must be exactly 1 afterwards (delivery check), then
the topic is deleted. The commands run with no ``NSQCTL_*`` variables and an empty config
file, so no profile or environment points them at a cluster. Rows are interleaved, their
order rotated each repeat (``--repeats``, 7, at least 5); medians are reported.

Run: ``python -m bench.bench_startup`` (about 20 s; ``--nsqctl /other/venv/bin/nsqctl``
measures another install, ``--before TREE`` another source tree on this one).
"""

from __future__ import annotations

import argparse
import contextlib
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
from bench import bench_cli, bench_redesign

HELP = "nsqctl --help"
VERSION = "nsqctl version"
PUB = "nsqctl pub"
TO_NSQ = "to_nsq"
PYTHON = "python -c pass"
OTAIL1 = bench_redesign.OTAIL1
NSQ_OTAIL1 = bench_redesign.NSQ_OTAIL1
#: a row run from the ``--before`` tree: the nsqctl row's name and this
BEFORE = ", before"
#: each row's Go reference (the rest are compared with to_nsq)
REFERENCE = {OTAIL1: NSQ_OTAIL1, OTAIL1 + BEFORE: NSQ_OTAIL1, NSQ_OTAIL1: NSQ_OTAIL1}

#: the start-up budgets, in milliseconds, spawn to exit
TARGETS_MS = {HELP: 150.0, VERSION: 150.0, PUB: 300.0}


@dataclass
class Settings:
    repeats: int
    nsqctl: str
    before: str | None = None  # --before: a source tree whose nsqctl rows run too
    redesign: bool = False  # --redesign: the ordered tail rows on a redesign cluster


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


def scrub_environment() -> None:
    """Take ``NSQCTL_*`` and ``PYTHONDONTWRITEBYTECODE`` out of this process's environment,
    once the clusters are up (their launcher may read ``NSQCTL_*``): every timed command's
    environment is this one with :func:`clean_env`'s on top (``c.run_peer`` adds variables,
    it cannot take one away), and an inherited ``PYTHONDONTWRITEBYTECODE`` would have a
    changed module compiled again in every run."""
    for name in [k for k in os.environ if k.startswith("NSQCTL_")]:
        del os.environ[name]
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


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

    def nsqctl_rows(
        name: str, env: dict[str, str]
    ) -> list[tuple[str, Callable[[], c.Measurement]]]:
        def pub() -> c.Measurement:
            topic = c.unique_topic("bstart_pub")
            return measure(
                PUB + name,
                [exe, "pub", topic, "startup", "--nsqd", addr],
                env,
                published(topic),
                after=lambda: c.delete_topic(http, topic),
            )

        def helped(p: c.PeerResult) -> bool:
            return p.returncode == 0 and "Usage" in p.stdout

        def versioned(p: c.PeerResult) -> bool:
            return p.returncode == 0 and "nsqctl" in p.stdout

        return [
            (HELP + name, lambda: measure(HELP + name, [exe, "--help"], env, helped)),
            (VERSION + name, lambda: measure(VERSION + name, version, env, versioned)),
            (PUB + name, pub),
        ]

    rows = nsqctl_rows("", env)
    if s.before:
        rows += nsqctl_rows(BEFORE, {**env, "PYTHONPATH": s.before})
    return [
        *rows,
        (TO_NSQ, to_nsq_one),
        (PYTHON, lambda: measure(PYTHON, [python, "-c", "pass"], env, lambda p: p.returncode == 0)),
    ]


def redesign_plan(
    b: bench_redesign.Redesign, s: Settings, env: dict[str, str]
) -> list[tuple[str, Callable[[], c.Measurement]]]:
    """The ordered ``-n 1`` tails on the redesign cluster (``bench_redesign``'s runs: a
    fresh channel with one message, the tail reads it through the lookupd)."""
    nsqctl = bench_redesign.nsqctl_tail_argv(s.nsqctl, b.lookupd, 1, True)
    nsq_tail = bench_redesign.nsq_tail_argv(
        str(c.nsq_bin("nsq_tail", "redesign")), b.lookupd, 1, True
    )

    def tail(
        variant: str, argv: Callable[[str, str], list[str]], env: dict[str, str]
    ) -> c.Measurement:
        return bench_redesign.measure_tail(b, variant, argv, 1, True, env=env)

    rows: list[tuple[str, Callable[[], c.Measurement]]] = [
        (OTAIL1, lambda: tail(OTAIL1, nsqctl, env)),
        (NSQ_OTAIL1, lambda: tail(NSQ_OTAIL1, nsq_tail, env)),
    ]
    if s.before:
        before_env = {**env, "PYTHONPATH": s.before}
        rows.append((OTAIL1 + BEFORE, lambda: tail(OTAIL1 + BEFORE, nsqctl, before_env)))
    return rows


def summarize(results: dict[str, list[c.Measurement]]) -> list[dict[str, Any]]:
    """One row a variant: wall and CPU medians, spread, and the ratios to its Go reference
    (``to_nsq``; ``nsq_tail -ordered -n 1`` for the ordered tails) and, for a row with a
    ``--before`` twin, to that twin (CPU, medians and same-repeat)."""
    rows = []
    for name, ms in results.items():
        ref = results.get(REFERENCE.get(name, TO_NSQ), [])
        ref_ms = c.median([m.seconds for m in ref]) * 1000
        wall = [m.seconds * 1000 for m in ms]
        cpu = [(m.client_cpu or 0.0) * 1000 for m in ms]
        median_ms = c.median(wall)
        target = TARGETS_MS.get(name)
        before = results.get(name + BEFORE, [])
        before_cpu = [(m.client_cpu or 0.0) * 1000 for m in before]
        rows.append(
            {
                "variant": name,
                "argv": ms[0].detail.get("argv", []) if ms else [],
                "median_ms": median_ms,
                "min_ms": min(wall) if wall else 0.0,
                "max_ms": max(wall) if wall else 0.0,
                "runs_ms": wall,
                "cpu_ms": c.median(cpu),
                "min_cpu_ms": min(cpu) if cpu else 0.0,
                "max_cpu_ms": max(cpu) if cpu else 0.0,
                "runs_cpu_ms": cpu,
                "peak_rss_mb": max((m.peak_rss_kb or 0) for m in ms) * 1024 / 1e6,
                "reference": REFERENCE.get(name, TO_NSQ),
                "vs_reference": median_ms / ref_ms if ref_ms else None,
                "paired_vs_reference": [
                    m.seconds / r.seconds for m, r in zip(ms, ref, strict=False) if r.seconds
                ],
                "cpu_vs_before": c.median(cpu) / c.median(before_cpu) if before_cpu else None,
                "paired_cpu_vs_before": [a / b for a, b in zip(cpu, before_cpu, strict=False) if b],
                "target_ms": target,
                "met": None if target is None else median_ms < target,
                "verified": all(m.verified for m in ms),
            }
        )
    return rows


def print_summary(rows: list[dict[str, Any]], s: Settings) -> None:
    c.print_table(
        f"Start-up: median of {s.repeats} runs, wall time from spawn to exit ({s.nsqctl})",
        [
            "variant",
            "median ms",
            "min-max",
            "CPU ms",
            "CPU min-max",
            "CPU x before",
            "peak RSS MB",
            "x Go tool",
            "target",
        ],
        [
            [
                r["variant"],
                f"{r['median_ms']:.0f}",
                f"{r['min_ms']:.0f}-{r['max_ms']:.0f}",
                f"{r['cpu_ms']:.0f}",
                f"{r['min_cpu_ms']:.0f}-{r['max_cpu_ms']:.0f}",
                "-" if r["cpu_vs_before"] is None else f"{r['cpu_vs_before']:.2f}",
                f"{r['peak_rss_mb']:.0f}",
                c.ratio_text(r["vs_reference"]),
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
    ap.add_argument(
        "--before",
        metavar="TREE",
        help="also run every nsqctl row from another source tree (PYTHONPATH=TREE, e.g. a "
        "worktree of the commit before a change), interleaved with the rest",
    )
    ap.add_argument(
        "--redesign",
        action="store_true",
        help="also time tail --ordered -n 1 against nsq_tail -ordered -n 1 on a redesign "
        "cluster (2 nsqd, an ordered topic of 2 partitions)",
    )
    c.add_output_args(ap)
    args = ap.parse_args(argv)
    if args.repeats < 5:
        ap.error("--repeats must be at least 5 (the medians are the result)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    s = Settings(
        repeats=args.repeats,
        nsqctl=args.nsqctl or bench_cli.nsqctl_exe(),
        before=str(Path(args.before).resolve()) if args.before else None,
        redesign=args.redesign,
    )
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="nsqctl-bench-startup-"))
        config = Path(tmp) / "config.toml"
        config.write_text("")
        env = clean_env(config)
        cluster = stack.enter_context(c.nsqd_cluster("original"))
        redesign = stack.enter_context(c.nsqd_cluster("redesign", nsqd=2)) if s.redesign else None
        scrub_environment()
        variants = plan(cluster, s, env)
        if redesign is not None:
            b = bench_redesign.Redesign(redesign, ordered_settings(s))
            stack.callback(b.close)
            variants += redesign_plan(b, s, env)
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


def ordered_settings(s: Settings) -> bench_redesign.Settings:
    """The redesign bench's settings for its topic and prefill helpers: an ordered topic
    of 2 partitions (1 replica) on 2 nsqd, 100-byte messages, one message a run."""
    return bench_redesign.Settings(
        messages=1,
        to_nsq_messages=1,
        ordered_messages=1,
        size=100,
        nsqds=2,
        partitions=2,
        replicas=1,
        bw_batch=bench_redesign.PUB_BATCH,
        bw_conns=1,
        max_in_flight=bench_redesign.TAIL_MAX_IN_FLIGHT,
        repeats=s.repeats,
        runfor=None,
        before=s.before,
    )


if __name__ == "__main__":
    sys.exit(main())
