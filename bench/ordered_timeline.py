"""Where the time of an ordered tail goes, run by run: ``nsqctl tail --ordered`` against
``nsq_tail -ordered``, each phase timed apart.

A ratio of two wall times says which tool won a repeat, not why. This times each run's
phases from its output file, whose size is sampled every 2 ms: **start** (spawn to the
first line: interpreter, imports, lookup, connect, SUB, first message), **stream** (first
line to last), **end** (last line to exit: -n detection, the last FINs, CLS, teardown),
and the **longest pause** in the output once it began (a stall: a wait on a timer, a
resend, a partition handed between threads). CPU is the child's own (``os.wait4``);
peak RSS its VmHWM, read every tenth sample (``ru_maxrss`` carries the forking Python's
over the exec).

The runs are interleaved and rotated as in ``bench_redesign.py`` (on a cluster of its
own: etcd, one nsqlookupd, 2 youzan nsqd, a topic of 2 ordered partitions, a fresh
channel filled before each run). ``--before TREE`` adds ``nsqctl tail --ordered`` from
another source tree (``PYTHONPATH=TREE``)::

    python -m bench.ordered_timeline --messages 25000 --repeats 5 [--before TREE]
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import _common as c
from bench import bench_cli
from bench.bench_redesign import Redesign, Settings, nsq_tail_argv, nsqctl_tail_argv

SAMPLE = 0.002  # seconds between two looks at the output file's size


@dataclass(frozen=True)
class Timeline:
    """One run's phases, in seconds (see the module docstring)."""

    start: float
    stream: float
    end: float
    total: float
    pause: float  # the longest time the output did not grow, once it began
    pause_at: float  # when that pause began, from the spawn
    cpu: float
    rss: float  # peak resident set, MiB
    returncode: int


def timed(argv: Sequence[str], env: dict[str, str] | None, out: Path) -> Timeline:
    """Run ``argv`` with stdout to ``out``, timing its phases from the file's growth."""
    full_env = dict(os.environ, **(env or {}))
    with open(out, "wb") as sink:
        began = time.perf_counter()
        proc = subprocess.Popen(list(argv), stdout=sink, stderr=subprocess.DEVNULL, env=full_env)
    growth: list[tuple[float, int]] = []  # (seconds from the spawn, size) at each change
    size = 0
    looks = 0
    peak_kib = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        now = time.perf_counter() - began
        current = out.stat().st_size
        if current != size:
            growth.append((now, current))
            size = current
        looks += 1
        if not pid and looks % 10 == 1:  # not reaped yet: the PID is still the child's
            peak_kib = max(peak_kib, c.status_kb("VmHWM", f"/proc/{proc.pid}/status") or 0)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            break
        time.sleep(SAMPLE)
    first = growth[0][0] if growth else now
    last = growth[-1][0] if growth else now
    pauses = [(b[0] - a[0], a[0]) for a, b in itertools.pairwise(growth)]
    pause, pause_at = max(pauses, default=(0.0, 0.0))
    return Timeline(
        start=first,
        stream=last - first,
        end=now - last,
        total=now,
        pause=pause,
        pause_at=pause_at,
        cpu=usage.ru_utime + usage.ru_stime,
        rss=peak_kib / 1024,
        returncode=proc.returncode,
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--messages", type=int, default=25_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--before", help="also run tail --ordered from this source tree")
    args = ap.parse_args(argv)
    c.bytecode_as_installed()
    n = args.messages
    s = Settings(
        messages=n,
        to_nsq_messages=1,
        ordered_messages=n,
        size=100,
        nsqds=2,
        partitions=2,
        replicas=1,
        bw_batch=200,
        bw_conns=1,
        max_in_flight=5000,
        repeats=args.repeats,
        runfor=None,
    )
    results: dict[str, list[Timeline]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="nsqctl-timeline-") as tmp,
        c.nsqd_cluster("redesign", nsqd=s.nsqds) as cluster,
    ):
        b = Redesign(cluster, s)
        ours = nsqctl_tail_argv(bench_cli.nsqctl_exe(), b.lookupd, n, True)
        peer = nsq_tail_argv(str(c.nsq_bin("nsq_tail", "redesign")), b.lookupd, n, True)
        variants: list[tuple[str, Callable[[str, str], list[str]], dict[str, str] | None]] = [
            ("nsqctl tail --ordered", ours, None),
            ("nsq_tail -ordered", peer, None),
        ]
        if args.before:
            before_env = {"PYTHONPATH": str(Path(args.before).resolve())}
            variants.append(("nsqctl tail --ordered, before", ours, before_env))
        try:
            for rep in range(args.repeats):
                shift = rep % len(variants)
                for name, argv_for, env in variants[shift:] + variants[:shift]:
                    run = b.consumer_run(n, ordered=True)
                    assert run.channel is not None
                    t = timed(argv_for(run.topic.name, run.channel), env, Path(tmp) / "out")
                    b.finish(run)
                    results.setdefault(name, []).append(t)
                    c.say(
                        f"  [{rep + 1}/{args.repeats}] {name:<30} start {t.start:6.3f}s "
                        f"stream {t.stream:6.3f}s end {t.end:6.3f}s total {t.total:6.3f}s "
                        f"pause {t.pause:6.3f}s@{t.pause_at:.2f} cpu {t.cpu:5.2f}s "
                        f"rss {t.rss:5.1f}MiB "
                        f"load {os.getloadavg()[0]:.1f} rc {t.returncode}"
                    )
        finally:
            b.close()
    print(f"\n{n:,} ordered messages, 2 partitions, median of {args.repeats} (runs)")
    for name, runs in results.items():
        cols = []
        for phase in ("start", "stream", "end", "total", "pause", "cpu", "rss"):
            values = [getattr(t, phase) for t in runs]
            each = " ".join(f"{v:.2f}" for v in values)
            cols.append(f"{phase} {c.median(values):.3f} ({each})")
        print(f"{name}:\n  " + "\n  ".join(cols))
    return 0 if all(t.returncode == 0 for runs in results.values() for t in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
