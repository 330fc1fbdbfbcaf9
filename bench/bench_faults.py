"""Fault suite on the redesign (youzan): what nsqctl's clients do when the cluster breaks.

Each scenario runs real processes on 127.0.0.1: ``nsqctl pub --shard-field k`` of keyed
JSON lines at a fixed rate, and a consumer of the same topic (``nsqctl tail``, ``tail
--ordered`` or ``archive``), then injects one fault a few seconds in:

* ``kill-leader``: kill -9 of the partition leader (3 nsqd, replicas 3: a new leader is
  elected from the ISR without the old one);
* ``kill-leader-ordered``: the same on an ordered topic of 2 partitions, with ``tail
  --ordered``;
* ``kill-leader-archive``: the same with ``nsqctl archive`` as the consumer;
* ``kill-leader-r2``: the same on a topic with replicas 2 (writes need more than half the
  replicas in the ISR, so the surviving copy leads only once nsqlookupd migrated a new
  replica, ~100 s);
* ``move-leader``: ``/topic/partition/move`` of the leader to another ISR node (the one
  youzan elects: the least leader load factor);
* ``restart-lookupd``: kill -9 of the (only) nsqlookupd, started again 3 s later;
* ``restart-etcd``: kill -9 of etcd, started again 3 s later;
* ``quick-restart`` (``--with-quick-restart``): 2 nsqd, replicas 2, kill -9 of the leader
  and start it again 3 s later, as a supervisor would.

For each: messages OK'd (pub's count), messages stored afterwards (a channel made before
publishing, read back in full), lost (OK'd and not stored), duplicates, per-key order
violations (first copies, in storage order and in the consumer's order), the consumer's
count, time to recover (pub's "publishing again … after" line; the consumer's longest
gap) and exit codes. Goal: zero OK'd lost, zero order violations on ordered topics, exit 0.

    python -m bench.bench_faults                  # every scenario, ~15 min
    python -m bench.bench_faults --only kill-leader --only move-leader

Servers are stopped by PID at the end, also on errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench._common import machine_info, print_table, say, write_json
from nsqctl.admin.leader import lookupd_leader
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.errors import NsqctlError
from nsqctl.message import Message
from nsqctl.servers import build, cluster, process
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.parse import parse_cluster_stats
from tests.helpers.cli import NSQCTL, clean_env
from tests.helpers.failover import kill_leader, leader_of, lookup_partitions
from tests.helpers.redesign import (
    TopicSpec,
    by_partition,
    create_topics,
    message_counts,
    unique,
)
from tests.helpers.soak import order_violations
from tests.helpers.wait import eventually

KEYS = 24
RESUMED = re.compile(r"publishing again on \S+ after ([0-9.]+)s")


@dataclass
class Scenario:
    name: str
    fault: str
    consumer: str  # "tail" | "tail --ordered" | "archive"
    spec: TopicSpec
    nsqd: int = 3


SCENARIOS = [
    Scenario("kill-leader", "kill -9 leader", "tail", TopicSpec(1, 3)),
    Scenario(
        "kill-leader-ordered", "kill -9 leader", "tail --ordered", TopicSpec(2, 3, ordered=True)
    ),
    Scenario("kill-leader-archive", "kill -9 leader", "archive", TopicSpec(1, 3)),
    Scenario("kill-leader-r2", "kill -9 leader (replicas 2)", "tail", TopicSpec(1, 2)),
    Scenario("move-leader", "partition move", "tail", TopicSpec(1, 3)),
    Scenario("restart-lookupd", "nsqlookupd restart", "tail", TopicSpec(1, 3)),
    Scenario("restart-etcd", "etcd restart", "tail", TopicSpec(1, 3)),
]
QUICK_RESTART = Scenario(
    "quick-restart", "kill -9 leader, back in 3 s", "tail", TopicSpec(1, 2), nsqd=2
)


@dataclass
class Row:
    scenario: str
    fault: str
    consumer: str
    lines: int = 0
    pub_exit: int | None = None
    okd: int = 0
    stored: int = 0
    lost: int = 0
    duplicates: int = 0
    order_violations: int = 0
    consumed: int = 0
    consumer_dups: int = 0
    consumer_order_violations: int = 0
    consumer_exit: int | None = None
    pub_recover_s: float | None = None
    consumer_gap_s: float | None = None
    fault_at_s: float = 0.0
    fault_s: float = 0.0  # how long injecting took (a move: until the command returned)
    notes: list[str] = field(default_factory=list)


class Lines:
    """A child's stdout lines with their arrival times, read on a thread."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.items: list[tuple[float, bytes]] = []
        self.thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self.thread.start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.items.append((time.monotonic(), line.rstrip(b"\n")))

    def distinct(self) -> int:
        return len({body for _, body in self.items})

    def longest_gap(self, after: float) -> float | None:
        times = [t for t, _ in self.items]
        gaps = [b - a for a, b in itertools.pairwise(times) if b >= after]
        return max(gaps) if gaps else None


SPAWNED: list[subprocess.Popen[bytes]] = []


def _spawn(args: list[str], stdin: Any = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [NSQCTL, *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    SPAWNED.append(proc)
    return proc


def _stop_spawned() -> None:
    """Kill (by PID) any nsqctl child a failed scenario left running."""
    while SPAWNED:
        proc = SPAWNED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def inject(c: Cluster, sc: Scenario, topic: str) -> list[process.NodeRecord]:
    """The fault; returns the nodes left down (to restart after the scenario)."""
    if sc.name.startswith("kill-leader"):
        return [kill_leader(c, topic, 0)]
    if sc.name == "quick-restart":
        node = kill_leader(c, topic, 0)
        time.sleep(3.0)
        c.restart(node)
        return []
    if sc.name == "move-leader":
        say(f"  leader moved in {move_leader(c, topic):.1f}s")
        return []
    role = "nsqlookupd" if sc.name == "restart-lookupd" else "etcd"
    node = c.by_role(role)[0]
    process.kill_hard(node)
    time.sleep(3.0)
    c.restart(node)
    return []


def next_leader(c: Cluster, leader: process.NodeRecord) -> process.NodeRecord:
    """The nsqd youzan will elect when ``leader`` is moved away: it elects the in-sync copy
    with the least leader load factor, whatever ``move_to`` says (the first other nsqd
    was often the most loaded after the kill scenarios, and never got elected)."""
    others = [n for n in c.nsqds if n.tcp_port != leader.tcp_port]
    try:
        stats = httpx.get(f"http://{_lookupd_leader(c)}/cluster/stats", timeout=10).json()
        loads = {n.address: n.leader_load_factor for n in parse_cluster_stats(stats).nodes}
    except (httpx.HTTPError, ValueError, NsqctlError):
        loads = {}
    return min(others, key=lambda n: loads.get(n.http_address, float("inf")))


def move_leader(c: Cluster, topic: str) -> float:
    """``nsqctl topic move`` of partition 0's leader to the nsqd youzan will elect; returns
    the seconds until ``/lookup`` names it. The command itself goes on waiting for the ISR
    to be full again, which with replicas = nsqd count takes youzan ~10 min (it re-adds
    the old leader only after that), so it is stopped once the leader moved."""
    leader = leader_of(c, topic, 0)
    target = next_leader(c, leader)
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            NSQCTL,
            "topic",
            "move",
            topic,
            "--partition",
            "0",
            "--to",
            f"127.0.0.1:{target.http_port}",
            "--lookupd",
            c.lookupd_http[0],
            "--wait",
            "240",
            "--yes",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    SPAWNED.append(proc)
    moved: float | None = None
    while proc.poll() is None and moved is None:
        if lookup_partitions(c.lookupd_http[0], topic).get(0) == target.tcp_port:
            moved = time.monotonic() - started
        time.sleep(0.1)
    if moved is not None and proc.poll() is None:
        proc.terminate()  # the move is done; what is left is its wait for a full ISR
    _, err = proc.communicate(timeout=300)
    if moved is None and lookup_partitions(c.lookupd_http[0], topic).get(0) == target.tcp_port:
        moved = time.monotonic() - started  # it finished between two looks
    if moved is None:
        raise RuntimeError(f"topic move: exit {proc.returncode}: {err.decode().strip()[-300:]}")
    return moved


def run(c: Cluster, sc: Scenario, lines_count: int, rate: int, tmp: Path) -> Row:
    row = Row(sc.name, sc.fault, sc.consumer, lines=lines_count)
    topic = unique(sc.name)
    channels = ("t", "nsqctl_archive")
    asyncio.run(create_topics(c.lookupd_http, {topic: sc.spec}, channels))
    lookupd = c.lookupd_http[0]
    lines = [
        json.dumps({"k": f"k{i % KEYS:02d}", "seq": i // KEYS}).encode() for i in range(lines_count)
    ]
    source = tmp / f"{topic}.txt"
    source.write_bytes(b"\n".join(lines) + b"\n")
    out = tmp / f"{topic}-archive"
    if sc.name == "move-leader":
        # nsqlookupd refuses partition moves as "cluster unstable" until its next full topic
        # check after a create (up to ~2 min): one move first, so the measured one lands
        # while pub runs.
        move_leader(c, topic)
    if sc.consumer == "archive":
        consumer = _spawn(
            [
                "archive",
                topic,
                "--out",
                str(out),
                "--lookupd",
                lookupd,
                "--exit-when-idle",
                "90",
                "-q",
            ]
        )
    else:
        ordered = ["--ordered"] if sc.consumer.endswith("--ordered") else []
        consumer = _spawn(["tail", topic, "--lookupd", lookupd, "--channel", "t", *ordered])
    reader = Lines(consumer)
    with source.open("rb") as stdin:
        pub = _spawn(
            [
                "pub",
                topic,
                "--lookupd",
                lookupd,
                "--shard-field",
                "k",
                "--rate",
                str(rate),
                "--json",
            ],
            stdin,
        )
    time.sleep(3.0)
    row.fault_at_s = 3.0
    fault_at = time.monotonic()
    down = inject(c, sc, topic)
    row.fault_s = time.monotonic() - fault_at
    pub_out, pub_err = pub.communicate(timeout=600)
    row.pub_exit = pub.returncode
    summary = json.loads(pub_out.decode().strip().splitlines()[-1])
    row.okd = int(summary["published"])
    resumed = RESUMED.findall(pub_err.decode())
    row.pub_recover_s = max(map(float, resumed)) if resumed else None
    if pub.returncode != 0:
        row.notes.append(pub_err.decode().strip().splitlines()[-1][:200])
    if sc.consumer != "archive":
        with contextlib.suppress(AssertionError):  # overdue: the row reports what it got
            eventually(lambda: reader.distinct() >= row.okd, 120, "every OK'd line", step=0.2)
        consumer.send_signal(signal.SIGINT)
    _, consumer_err = consumer.communicate(timeout=300)
    row.consumer_exit = consumer.returncode
    if consumer.returncode != 0:
        row.notes.append(
            consumer_err.decode().strip().splitlines()[-1][:200]
            if consumer_err.strip()
            else f"exit {consumer.returncode}"
        )
    got = [b for _, b in reader.items]
    if sc.consumer == "archive":
        import pyarrow.dataset as ds

        table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
        got = list(
            table.sort_by([("partition", "ascending"), ("internal_id", "ascending")])
            .column("body")
            .to_pylist()
        )
    row.consumed = len(got)
    row.consumer_dups = len(got) - len(set(got))
    row.consumer_order_violations = order_violations(got)
    row.consumer_gap_s = reader.longest_gap(fault_at) if sc.consumer != "archive" else None
    for node in down:  # back to full strength, from this thread (PR_SET_PDEATHSIG)
        c.restart(node)
    stored_msgs = read_back(c, topic, sc.spec, len(lines))
    stored = [m.body for part in by_partition(stored_msgs).values() for m in part]
    distinct = set(stored)
    row.stored = len(distinct)
    row.duplicates = len(stored) - len(distinct)
    row.lost = (
        sum(1 for body in lines[: row.okd] if body not in distinct)
        if (row.pub_exit == 0)
        else max(0, row.okd - len(distinct))
    )
    row.order_violations = order_violations(stored)
    return row


def read_back(c: Cluster, topic: str, spec: TopicSpec, expect: int) -> list[Message]:
    """Everything the topic holds now, on a channel made after the fault and moved to the
    start of each partition: a new leader need not carry the channels of the old one."""
    total = sum(message_counts(c, topic).values())
    channel = unique("verify")
    lookupd = c.lookupd_http[0]
    _nsqctl("channel", "create", topic, channel, "--lookupd", lookupd, "--yes")
    for part in range(spec.partitions):
        errors = []
        for start in (["--virtual-offset", "0"], ["--timestamp", "1"], ["--msgcount", "1"]):
            try:
                _nsqctl(
                    "channel",
                    "setoffset",
                    topic,
                    channel,
                    *start,
                    "--partition",
                    str(part),
                    "--lookupd",
                    lookupd,
                    "--yes",
                )
                break
            except RuntimeError as err:  # a truncated commit log refuses offset 0
                errors.append(str(err))
        else:
            raise RuntimeError(f"cannot rewind {topic}/{part}: {'; '.join(errors)}")
    options = (
        ConsumerOptions(ordered=True, max_in_flight=spec.partitions)
        if spec.ordered
        else ConsumerOptions(max_in_flight=200)
    )
    return asyncio.run(read_until_idle(c.lookupd_http, topic, channel, max(total, expect), options))


def _nsqctl(*args: str, timeout: float = 120.0) -> None:
    proc = subprocess.run([NSQCTL, *args], capture_output=True, env=clean_env(), timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])}: {proc.stderr.decode().strip()[:300]}")


async def read_until_idle(
    lookupd: list[str],
    topic: str,
    channel: str,
    expect: int,
    options: ConsumerOptions,
    idle: float = 15.0,
    timeout: float = 240.0,
) -> list[Message]:
    """Consume until ``expect`` distinct bodies came, or nothing came for ``idle`` seconds.

    Not a count from the partitions' stats: after a failover a new leader's
    ``message_count`` need not cover what the old leader stored."""
    got: list[Message] = []
    bodies: set[bytes] = set()
    last = time.monotonic()

    def handle(msg: Message) -> None:
        nonlocal last
        got.append(msg)
        bodies.add(msg.body)
        last = time.monotonic()

    consumer = Consumer(topic, channel, handle, lookupd_http=lookupd, options=options)
    await consumer.start()
    try:
        start = time.monotonic()
        while (
            len(bodies) < expect
            and time.monotonic() - last < idle
            and (time.monotonic() - start < timeout)
        ):
            await asyncio.sleep(0.2)
        await asyncio.sleep(0.5)  # an extra copy right behind would be counted too
    finally:
        await consumer.stop()
    return got


def _lookupd_leader(c: Cluster) -> str:
    with httpx.Client(timeout=5) as client:
        return lookupd_leader(client, c.lookupd_http[0]) or c.lookupd_http[0]


def wait_nodes(c: Cluster, count: int, timeout: float = 120.0) -> None:
    def registered() -> bool:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, OSError):
            leader = _lookupd_leader(c)
            nodes = httpx.get(f"http://{leader}/nodes", timeout=3).json()
            return len(nodes.get("data", nodes)["producers"]) >= count
        return False

    try:
        eventually(registered, timeout, f"{count} nsqd registered", step=0.5)
    except AssertionError:
        raise RuntimeError(f"the cluster did not get back {count} nsqd within {timeout}s") from None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", default=[], help="run only these scenarios")
    ap.add_argument("--lines", type=int, default=15_000)
    ap.add_argument("--rate", type=int, default=3_000, help="pub --rate")
    ap.add_argument("--with-quick-restart", action="store_true")
    args = ap.parse_args()
    scenarios = [s for s in SCENARIOS if not args.only or s.name in args.only]
    if args.with_quick_restart or "quick-restart" in args.only:
        scenarios.append(QUICK_RESTART)
    rows: list[Row] = []
    bins = build.build("redesign")
    with tempfile.TemporaryDirectory(prefix="nsqctl-faults-") as tmpdir:
        tmp = Path(tmpdir)
        by_size: dict[int, Cluster] = {}
        try:
            for sc in scenarios:
                c = by_size.get(sc.nsqd)
                if c is None:
                    say(f"starting a redesign cluster with {sc.nsqd} nsqd")
                    c = by_size[sc.nsqd] = cluster.start(
                        "redesign", tmp / f"c{sc.nsqd}", nsqd=sc.nsqd, bin_dir=bins
                    )
                wait_nodes(c, sc.nsqd)
                say(f"scenario {sc.name}: {sc.fault} during pub + {sc.consumer}")
                try:
                    row = run(c, sc, args.lines, args.rate, tmp)
                except Exception as err:  # one broken scenario must not hide the others
                    row = Row(sc.name, sc.fault, sc.consumer, notes=[f"failed: {err}"[:300]])
                    for node in c.nodes:  # a node it killed before failing: back for the next
                        if not process.pid_runs(node.pid, node.exe):
                            c.restart(node)
                finally:
                    _stop_spawned()
                say(f"  {asdict(row)}")
                rows.append(row)
        finally:
            for c in by_size.values():
                c.stop()
    print_table(
        "faults (redesign, youzan v0.3.7-HA.1.12.7)",
        [
            "scenario",
            "OK'd",
            "stored",
            "lost",
            "dups",
            "order",
            "consumed",
            "c.dups",
            "c.order",
            "fault",
            "pub back",
            "c.gap",
            "exits",
        ],
        [
            [
                r.scenario,
                str(r.okd),
                str(r.stored),
                str(r.lost),
                str(r.duplicates),
                str(r.order_violations),
                str(r.consumed),
                str(r.consumer_dups),
                str(r.consumer_order_violations),
                _secs(r.fault_s),
                _secs(r.pub_recover_s),
                _secs(r.consumer_gap_s),
                f"{r.pub_exit}/{r.consumer_exit}",
            ]
            for r in rows
        ],
    )
    for r in rows:
        for note in r.notes:
            print(f"  {r.scenario}: {note}")
    write_json("faults", {"machine": machine_info(), "rows": [asdict(r) for r in rows]})
    return 0


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


if __name__ == "__main__":
    sys.exit(main())
