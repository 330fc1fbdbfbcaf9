"""Soak: keyed publishing and consumers for a long while, a random fault every 2-3 minutes.

On a 3-nsqd redesign cluster (an ordered topic read by ``nsqctl tail --ordered``, an
unordered one read by ``nsqctl tail``) and/or a 2-nsqd original cluster (``nsqctl tail``),
``nsqctl pub --shard-field k`` publishes ``{"k", "seq"}`` lines at a steady rate while a
fault, chosen at random (seeded, printed), hits the cluster: kill -9 of an nsqd (then
restarted), SIGSTOP of an nsqd past the heartbeat (then SIGCONT), nsqlookupd restart, and
on the redesign etcd restart and a partition leader move. At the end: OK'd vs stored vs
consumed, duplicates, per-key order violations, lost (OK'd, never consumed: must be 0) and
each nsqctl process's RSS and open fds, first vs peak vs last (a leak shows as growth),
and each lost message's class (see tests/helpers/soak_losses.py).

    python -m bench.soak                                  # 30 min, both families at once
    python -m bench.soak --minutes 5 --family redesign --seed 7
    python -m bench.soak --minutes 2 --faults 1 --json    # a smoke run
    python -m bench.soak --family original --kinds kill9 --interval-min 3 --interval-max 6

The engine is ``tests/helpers/soak.py`` (the CI's short soak runs the same code). Exit 1
when anything OK'd was lost or the ordered consumer saw a key out of order.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

from bench._common import RESULTS_DIR, machine_info, print_table, run_header, say, write_json
from nsqctl.servers import build, cluster
from nsqctl.servers.catalog import Flavor
from tests.helpers.soak import SoakPlan, SoakReport, run_soak

NSQD_COUNT: dict[str, int] = {"redesign": 3, "original": 2}
# The original nsqd keeps a topic's messages in memory up to --mem-queue-size: a kill -9
# loses them by design. On disk only, what a kill -9 can cost is the server's, not hidden.
ORIGINAL_NSQD_ARGS = ["--mem-queue-size=0"]


def run_family(family: Flavor, args: argparse.Namespace, tmp: Path, out: dict[str, Any]) -> None:
    bins = build.build(family)
    say(f"[{family}] starting {NSQD_COUNT[family]} nsqd")
    c = cluster.start(
        family,
        tmp / family,
        nsqd=NSQD_COUNT[family],
        bin_dir=bins,
        nsqd_args=[*ORIGINAL_NSQD_ARGS, *args.nsqd_arg] if family == "original" else None,
    )
    try:
        plan = SoakPlan(
            family,
            seconds=args.minutes * 60,
            max_faults=args.faults,
            kinds=args.kinds.split(",") if args.kinds else None,
            interval=(args.interval_min, args.interval_max),
            first_fault=args.first_fault,
            rate=args.rate,
            seed=args.seed,
            stop_seconds=args.stop_seconds,
            sample_every=args.sample_every,
            say=say,
        )
        out[family] = run_soak(c, plan, tmp / f"{family}-work")
    except Exception as err:  # the other family's run goes on; this one is reported
        out[family] = err
    finally:
        c.stop()


def table(report: SoakReport) -> None:
    print_table(
        f"soak {report.family}: {report.seconds / 60:.1f} min, {report.rate} msg/s per topic, "
        f"{len(report.faults)} faults, seed {report.seed}",
        ["topic", "written", "OK'd", "stored", "pub exit", "failover notes"],
        [
            [
                t.topic,
                str(t.written),
                str(t.okd),
                str(t.stored),
                str(t.pub_exit),
                str(t.failover_notes),
            ]
            for t in report.topics
        ],
    )
    print_table(
        "consumers",
        ["consumer", "consumed", "distinct", "dups", "order", "lost", "answered unprinted", "exit"],
        [
            [
                c.name,
                str(c.consumed),
                str(c.distinct),
                str(c.duplicates),
                str(c.order_violations),
                str(c.lost),
                str(c.reached_not_printed),
                str(c.exit),
            ]
            for c in report.consumers
        ],
    )
    rows = []
    for p in report.processes:
        s = p.summary()
        if s["samples"]:
            r, f = s["rss_kb"], s["fds"]
            rows.append(
                [
                    p.name,
                    str(s["samples"]),
                    f"{r['first'] / 1024:.1f}",
                    f"{r['peak'] / 1024:.1f}",
                    f"{r['last'] / 1024:.1f}",
                    f"{f['first']}/{f['peak']}/{f['last']}",
                ]
            )
    print_table(
        "nsqctl processes",
        ["process", "samples", "RSS MiB first", "peak", "last", "fds first/peak/last"],
        rows,
    )
    losses = [(c.name, loss) for c in report.consumers for loss in c.losses]
    if losses:
        print_table(
            "lost messages",
            ["consumer", "body", "nsqd", "published before kill", "tail", "class"],
            [
                [
                    name,
                    str(loss["body"]),
                    str(loss.get("node", "?")),
                    f"{loss['published_before_kill_s']:.3f}s"
                    if "published_before_kill_s" in loss
                    else "?",
                    str(loss.get("tail_trace") or ("printed" if loss.get("printed") else "-")),
                    str(loss["class"]),
                ]
                for name, loss in losses
            ],
        )
        print_table(
            "lost messages by class",
            ["class", "count"],
            [[k, str(v)] for k, v in Counter(loss["class"] for _, loss in losses).most_common()],
        )
    print_table(
        "faults",
        ["at", "fault", "target", "took", "outcome"],
        [
            [f"{f.at_s:.0f}s", f.kind, f.target, f"{f.took_s:.0f}s", f.outcome]
            for f in report.faults
        ],
    )


def failed(report: SoakReport) -> list[str]:
    bad = [f"{c.name}: {c.lost} OK'd message(s) never consumed" for c in report.consumers if c.lost]
    bad += [
        f"{c.name}: {c.order_violations} per-key order violation(s)"
        for c in report.consumers
        if c.ordered and c.order_violations
    ]
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--faults", type=int, default=None, help="at most this many faults")
    ap.add_argument("--family", choices=("original", "redesign", "both"), default="both")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--kinds",
        default=None,
        help="comma-separated fault kinds to choose from (kill9,sigstop,lookupd,etcd,move); "
        "default: all the family's",
    )
    ap.add_argument(
        "--nsqd-arg",
        action="append",
        default=[],
        help="one more flag for the original family's nsqds (repeatable), e.g. --sync-every=1",
    )
    ap.add_argument("--rate", type=int, default=200, help="messages/s per topic")
    ap.add_argument("--interval-min", type=float, default=120.0)
    ap.add_argument("--interval-max", type=float, default=180.0)
    ap.add_argument("--first-fault", type=float, default=60.0, help="seconds before the first")
    ap.add_argument("--stop-seconds", type=float, default=40.0, help="how long a SIGSTOP lasts")
    ap.add_argument("--sample-every", type=float, default=5.0)
    ap.add_argument("--json", action="store_true", help="print the results as one JSON document")
    ap.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = ap.parse_args()
    families: list[Flavor] = ["original", "redesign"] if args.family == "both" else [args.family]
    header = run_header("soak", args)
    header["settings"] = {k: str(v) for k, v in vars(args).items()}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="nsqctl-soak-") as tmpdir:
        threads = [
            threading.Thread(target=run_family, args=(f, args, Path(tmpdir), out)) for f in families
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    payload: dict[str, Any] = {**header, "machine": machine_info(), "families": {}}
    problems: list[str] = []
    for family in families:
        result = out.get(family)
        if isinstance(result, SoakReport):
            payload["families"][family] = result.to_json()
            problems += [f"{family} {p}" for p in failed(result)]
            if not args.json:
                table(result)
        else:
            payload["families"][family] = {"error": str(result)}
            problems.append(f"{family}: run failed: {result}")
    payload["problems"] = problems
    path = write_json("soak", payload, args.results_dir)
    if args.json:
        print(json.dumps(payload))
    else:
        print(f"results: {path}")
        for p in problems:
            print(f"PROBLEM: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
