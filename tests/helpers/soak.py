"""The soak engine: keyed publishing at a steady rate and consumers through faults, on one
cluster, then what was OK'd, stored, consumed, lost, duplicated and reordered, and how each
nsqctl process's RSS and open files moved.

One engine for two callers: ``bench/soak.py`` (30 minutes, a random fault every 2-3 min)
and ``tests/integration/test_soak_short.py`` (3 chosen faults, in CI). It lives beside the
other fault helpers (``failover.py``, which ``bench/bench_faults.py`` uses the same way):
bench/ may import tests/helpers, tests never import bench/, and the library does not ship
a test harness.

Everything the clients do runs as real ``nsqctl`` processes (``pub --shard-field``, ``tail``,
``tail --ordered``, ``topic move``), so the RSS and file descriptors sampled from
``/proc/PID`` are the CLI's. Each line published is ``{"k": KEY, "seq": N}``, N counting
per key, so duplicates and per-key order can be told from the bodies alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from nsqctl.admin.leader import lookupd_leader
from nsqctl.admin.partitions.state import leader_load_factors
from nsqctl.servers import process
from nsqctl.servers.catalog import Flavor
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord, pause, resume
from tests.helpers.cli import NSQCTL, clean_env
from tests.helpers.failover import lookup_partitions, wait_new_leader
from tests.helpers.redesign import TopicSpec, create_topics, message_counts, nsqd_stats, unique
from tests.helpers.soak_losses import (
    TAIL_TEMPLATE,
    FeedLog,
    KillCopy,
    Printed,
    classify,
    copy_queues,
    nearest_kill,
    parse_printed,
    traced,
)
from tests.helpers.wait import eventually

KEYS = 16
CHANNEL = "soak"

#: The faults each family can have: the original has no etcd and no partition leaders.
FAULTS: dict[str, tuple[str, ...]] = {
    "original": ("kill9", "sigstop", "lookupd"),
    "redesign": ("kill9", "sigstop", "lookupd", "etcd", "move"),
}


def line(i: int) -> bytes:
    """The i-th message published: key i mod KEYS, its per-key sequence number i div KEYS."""
    return b'{"k":"k%02d","seq":%d}' % (i % KEYS, i // KEYS)


def key_seq(body: bytes) -> tuple[str, int]:
    record = json.loads(body)
    return str(record["k"]), int(record["seq"])


def order_violations(bodies: Sequence[bytes]) -> int:
    """Per key, first copies that came after a later one (a repeat is a duplicate, not this)."""
    last: dict[str, int] = {}
    seen: set[bytes] = set()
    bad = 0
    for body in bodies:
        if body in seen:
            continue
        seen.add(body)
        key, seq = key_seq(body)
        if seq < last.get(key, -1):
            bad += 1
        last[key] = max(seq, last.get(key, -1))
    return bad


@dataclass
class SoakPlan:
    """What to run. ``faults``: an explicit sequence (CI), else random kinds of the family
    (seeded) every ``interval`` seconds until ``seconds`` are up or ``max_faults`` done."""

    family: Flavor
    seconds: float
    faults: Sequence[str] | None = None
    max_faults: int | None = None
    kinds: Sequence[str] | None = None  # the random faults' kinds (default: the family's)
    interval: tuple[float, float] = (120.0, 180.0)
    first_fault: float = 10.0
    rate: int = 200  # messages per second, per publisher
    seed: int = 0
    # longer than the 30 s heartbeat, and than the redesign nsqlookupd's 15 s nsqd ping
    # timeout (so the hung nsqd also drops out of the cluster)
    stop_seconds: float = 40.0
    sample_every: float = 5.0
    drain_stall: float = 120.0
    say: Callable[[str], None] = print


@dataclass
class FaultRecord:
    kind: str
    target: str
    at_s: float
    took_s: float = 0.0
    outcome: str = "done"


@dataclass
class ProcReport:
    """An nsqctl process: its exit and its RSS (kB) and open fds, first vs peak vs last."""

    name: str
    pid: int
    exit: int | None = None
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, rss_kb, fds)

    def summary(self) -> dict[str, Any]:
        if not self.samples:
            return {"name": self.name, "exit": self.exit, "samples": 0}
        rss = [s[1] for s in self.samples]
        fds = [s[2] for s in self.samples]
        return {
            "name": self.name,
            "exit": self.exit,
            "samples": len(self.samples),
            "rss_kb": {"first": rss[0], "peak": max(rss), "last": rss[-1]},
            "fds": {"first": fds[0], "peak": max(fds), "last": fds[-1]},
        }


@dataclass
class TopicReport:
    topic: str
    written: int = 0  # lines given to pub
    okd: int = 0  # pub's --json "published"
    pub_exit: int | None = None
    pub_error: str | None = None
    failover_notes: int = 0  # "nsqctl pub: ..." failover lines on pub's stderr
    stored: int = 0  # message_count from nsqd /stats (nsqctl.stats.read)


@dataclass
class ConsumerReport:
    name: str
    topic: str
    ordered: bool
    consumed: int = 0
    distinct: int = 0
    duplicates: int = 0
    order_violations: int = 0
    lost: int = 0  # OK'd and never consumed
    exit: int | None = None
    reached_not_printed: int = 0  # in the trace log (answered), never printed
    # each lost message: where it was, whether it reached the tail, its class
    losses: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SoakReport:
    family: str
    seed: int
    seconds: float = 0.0
    rate: int = 0
    faults: list[FaultRecord] = field(default_factory=list)
    kills: list[dict[str, Any]] = field(default_factory=list)  # kill -9s: node, wall clock
    topics: list[TopicReport] = field(default_factory=list)
    consumers: list[ConsumerReport] = field(default_factory=list)
    processes: list[ProcReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "seed": self.seed,
            "seconds": round(self.seconds, 1),
            "rate": self.rate,
            "faults": [vars(f) for f in self.faults],
            "kills": self.kills,
            "topics": [vars(t) for t in self.topics],
            "consumers": [vars(c) for c in self.consumers],
            "processes": [p.summary() for p in self.processes],
            "notes": self.notes,
            "series": {p.name: p.samples for p in self.processes},
        }


def proc_sample(pid: int) -> tuple[int, int] | None:
    """(VmRSS in kB, open file descriptors) of ``pid``; None once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except OSError:
        return None
    for row in status.splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]), fds
    return None


class _Child:
    """One nsqctl process of the soak."""

    def __init__(self, name: str, args: list[str], workdir: Path, stdin: int | None) -> None:
        self.name = name
        self.err_path = workdir / f"{name}.stderr"
        self._err = self.err_path.open("wb")
        self.proc = subprocess.Popen(
            [NSQCTL, *args],
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env=clean_env(),
        )
        self.report = ProcReport(name, self.proc.pid)

    def stderr(self) -> str:
        if not self._err.closed:
            self._err.flush()
        return self.err_path.read_text(errors="replace")

    def finish(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # our own child, by its PID
            code = self.proc.wait(timeout=10)
        self.report.exit = code
        self._err.close()
        return code


class _Publisher(_Child):
    """``nsqctl pub --shard-field k --json`` fed :func:`line` s at a steady rate."""

    def __init__(self, name: str, topic: str, lookupd: str, workdir: Path, rate: int) -> None:
        args = ["pub", topic, "--lookupd", lookupd, "--shard-field", "k", "--json"]
        super().__init__(name, args, workdir, subprocess.PIPE)
        self.topic, self.rate, self.written = topic, rate, 0
        self.stop = threading.Event()
        self.feed = FeedLog()
        self.out: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._feeder = threading.Thread(target=self._feed, daemon=True)
        self._feeder.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.read().splitlines()

    def _feed(self) -> None:
        """Lines due by now go out every 50 ms; a pub stalled in a failover blocks this
        thread only (its pipe fills), and the backlog then goes out as it can."""
        stdin = self.proc.stdin
        assert stdin is not None
        start = time.monotonic()
        try:
            while not self.stop.is_set():
                due = int((time.monotonic() - start) * self.rate)
                if due > self.written:
                    stdin.write(b"".join(line(i) + b"\n" for i in range(self.written, due)))
                    stdin.flush()
                    self.written = due
                    self.feed.add(due)
                self.stop.wait(0.05)
        except (BrokenPipeError, OSError):
            pass
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def close(self, timeout: float) -> TopicReport:
        """End the input; pub's result once it has published what it read. A pub that
        does not finish within ``timeout`` gets Ctrl-C (it still reports what got OK)."""
        self.stop.set()
        self._feeder.join(5.0)  # a pub that stopped reading leaves it blocked in a write
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGINT)
        code = self.finish(60)
        self._reader.join(10)
        report = TopicReport(self.topic, written=self.written, pub_exit=code)
        try:
            summary = json.loads(self.out[-1]) if self.out else {}
        except ValueError:
            summary = {}
        report.okd = int(summary.get("published", 0))
        report.pub_error = summary.get("error")
        report.failover_notes = sum(
            1 for row in self.stderr().splitlines() if row.startswith("nsqctl pub: ")
        )
        return report


class _Tail(_Child):
    """``nsqctl tail`` (``--ordered``) of the soak channel; its lines read on a thread.

    The unordered tail prints each message's nsqd, id, attempts and publish time before
    its body and keeps a trace log (what it answered), so that a lost message can be told
    apart: never reached the tail, or reached it and was not printed. The ordered tail
    prints raw bodies (its per-partition reader threads serve only raw output)."""

    def __init__(self, name: str, topic: str, lookupd: str, workdir: Path, ordered: bool) -> None:
        args = ["tail", topic, "--lookupd", lookupd, "--channel", CHANNEL]
        self.trace_path: Path | None = None
        if ordered:
            args.append("--ordered")
        else:
            self.trace_path = workdir / f"{name}.trace.jsonl"
            args += ["--format", TAIL_TEMPLATE, "--trace-log", str(self.trace_path)]
        super().__init__(name, args, workdir, None)
        self.topic, self.ordered = topic, ordered
        self.bodies: list[bytes] = []
        self.printed: list[Printed] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for row in self.proc.stdout:
            row = row.rstrip(b"\n")
            if self.trace_path is None:
                self.bodies.append(row)
                continue
            got = parse_printed(row, time.time())
            if got is not None:
                self.printed.append(got)
            self.bodies.append(got.body if got is not None else row)

    def missing(self, okd: int) -> int:
        got = set(self.bodies)
        return sum(1 for i in range(okd) if line(i) not in got)

    def interrupt(self) -> None:
        """Ctrl-C, as a user stops tail (it gives back what it did not print)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)

    def close(self, okd: int, pub_ok: bool, written: int) -> ConsumerReport:
        """After :meth:`interrupt`: its exit and what it printed."""
        code = self.finish(60)
        self._reader.join(10)
        bodies = self.bodies
        distinct = set(bodies)
        report = ConsumerReport(self.name, self.topic, self.ordered, exit=code)
        report.consumed, report.distinct = len(bodies), len(distinct)
        report.duplicates = len(bodies) - len(distinct)
        report.order_violations = order_violations(bodies)
        if pub_ok:  # pub exited 0 on end of input: every line it was given got OK
            report.lost = sum(1 for i in range(okd) if line(i) not in distinct)
        else:
            # Which lines got OK is unknown (keyed routes progress independently, so not
            # the first ``okd``): at least this many were not consumed.
            report.lost = max(0, okd - len(distinct & {line(i) for i in range(written)}))
        return report


class _Sampler:
    """RSS and open fds of every child, every ``every`` seconds, on a thread."""

    def __init__(self, children: Sequence[_Child], every: float) -> None:
        self.children, self.every = children, every
        self.stop = threading.Event()
        self.start = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            now = round(time.monotonic() - self.start, 1)
            for child in self.children:
                if child.proc.poll() is None and (got := proc_sample(child.proc.pid)):
                    child.report.samples.append((now, *got))
            if self.stop.wait(self.every):
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)


# --------------------------------------------------------------------------- faults


class _Faults:
    def __init__(self, c: Cluster, plan: SoakPlan, topics: Sequence[str], workdir: Path) -> None:
        self.c, self.plan, self.topics, self.workdir = c, plan, topics, workdir
        self.rng = random.Random(plan.seed)
        self.lookupd = c.lookupd_http[0]
        self.kills: list[KillCopy] = []

    def choose(self, done: int) -> str:
        if self.plan.faults is not None:
            return self.plan.faults[done]
        return self.rng.choice(list(self.plan.kinds or FAULTS[self.plan.family]))

    def inject(self, kind: str, t0: float) -> FaultRecord:
        record = FaultRecord(kind, "", round(time.monotonic() - t0, 1))
        started = time.monotonic()
        try:
            getattr(self, f"_{kind}")(record)
        except Exception as err:  # a fault that could not be injected is reported, not fatal
            record.outcome = f"failed: {err}"[:300]
        self._heal()
        record.took_s = round(time.monotonic() - started, 1)
        return record

    def _heal(self) -> None:
        """Whatever a fault left down or stopped, back (a failed fault must not leave the
        cluster short for the next one)."""
        for node in self.c.nodes:
            resume(node)
            if not process.pid_runs(node.pid, node.exe):
                self.c.restart(node)

    def _nsqd(self) -> NodeRecord:
        """A random nsqd; on the redesign one leading a partition of the soak's topics (a
        fault there moves leadership, the case that tests the clients)."""
        nodes = self.c.nsqds
        if self.plan.family == "redesign":
            ports = {p for t in self.topics for p in lookup_partitions(self.lookupd, t).values()}
            nodes = [n for n in nodes if n.tcp_port in ports] or nodes
        return self.rng.choice(nodes)

    def _led_by(self, node: NodeRecord) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic in self.topics:
            parts = lookup_partitions(self.lookupd, topic)
            out[topic] = [p for p, port in parts.items() if port == node.tcp_port]
        return out

    def _kill9(self, record: FaultRecord) -> None:
        node = self._nsqd()
        record.target = node.name
        led = self._led_by(node) if self.plan.family == "redesign" else {}
        process.kill_hard(node)
        kill = KillCopy(time.time(), node.name, node.tcp_address, self.workdir / "kills")
        self.kills.append(kill)
        if self.plan.family == "original":  # its disk queues as the kill left them
            kill.directory = kill.directory / f"{len(self.kills)}-{node.name}"
            for topic in self.topics:
                copy_queues(node.data_dir, topic, kill.directory)
        waits = []
        for topic, parts in led.items():
            if parts:  # a new leader first, then the old one back (as a supervisor would)
                waits.append(f"{topic}{parts}:{wait_new_leader(self.c, topic, node, parts):.0f}s")
        if not waits:
            time.sleep(2.0)
        self.c.restart(node)
        record.outcome = "new leaders " + ", ".join(waits) if waits else "restarted"

    def _sigstop(self, record: FaultRecord) -> None:
        node = self._nsqd()
        record.target = node.name
        pause(node)
        try:
            time.sleep(self.plan.stop_seconds)  # the fault itself: a hang this long
        finally:
            resume(node)
        record.outcome = f"stopped {self.plan.stop_seconds:.0f}s"

    def _restart(self, role: str, record: FaultRecord) -> None:
        node = self.c.by_role(role)[0]
        record.target = node.name
        process.kill_hard(node)
        time.sleep(2.0)  # down for a moment, then back as a supervisor would start it
        self.c.restart(node)

    def _lookupd(self, record: FaultRecord) -> None:
        self._restart("nsqlookupd", record)

    def _etcd(self, record: FaultRecord) -> None:
        self._restart("etcd", record)

    def _move(self, record: FaultRecord) -> None:
        """``nsqctl topic move`` of a partition leader to the copy youzan would elect (the
        least leader load factor). The command then waits for a full ISR (minutes on
        youzan): once ``/lookup`` names the new leader it is stopped."""
        topic = self.rng.choice(list(self.topics))
        parts = lookup_partitions(self.lookupd, topic)
        if not parts:
            raise RuntimeError(f"{topic} has no writable partition to move")
        part = self.rng.choice(sorted(parts))
        old = parts[part]
        loads = asyncio.run(_loads(self.lookupd))
        others = [n for n in self.c.nsqds if n.tcp_port != old]
        target = min(others, key=lambda n: loads.get(n.http_address, float("inf")))
        record.target = f"{topic}/{part} -> {target.name}"
        argv = ["topic", "move", topic, "--partition", str(part), "--to", target.http_address]
        mover = _Child(
            "move", [*argv, "--lookupd", self.lookupd, "--wait", "120", "--yes"], self.workdir, None
        )
        moved = False

        def moved_or_ended() -> bool:
            nonlocal moved
            moved = lookup_partitions(self.lookupd, topic).get(part) == target.tcp_port
            return moved or mover.proc.poll() is not None

        with contextlib.suppress(AssertionError):  # overdue: the mover is stopped below
            eventually(moved_or_ended, 150, f"{topic}/{part} to move", step=0.2)
        if mover.proc.poll() is None:
            mover.proc.terminate()  # moved (or overdue): what is left is its ISR wait
        code = mover.finish(30)
        moved = moved or lookup_partitions(self.lookupd, topic).get(part) == target.tcp_port
        if not moved:
            tail = mover.stderr().strip().splitlines()
            raise RuntimeError(f"not moved (exit {code}): {tail[-1] if tail else ''}")


async def _loads(lookupd: str) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=5.0) as client:
        with httpx.Client(timeout=5.0) as sync:
            leader = lookupd_leader(sync, lookupd) or lookupd
        return await leader_load_factors(client, leader)


def _nsqds_registered(c: Cluster) -> bool:
    """Every nsqd back in nsqlookupd's /nodes (redesign) before the next fault."""
    try:
        with httpx.Client(timeout=3.0) as client:
            leader = lookupd_leader(client, c.lookupd_http[0]) or c.lookupd_http[0]
            data = client.get(f"http://{leader}/nodes").json()
        return len(data.get("data", data).get("producers") or []) >= len(c.nsqds)
    except (httpx.HTTPError, ValueError, AttributeError):
        return False


# --------------------------------------------------------------------------- the run


def _make_topics(c: Cluster, family: Flavor) -> list[tuple[str, bool]]:
    """(topic, ordered): the redesign gets an ordered topic (2 partitions, 3 replicas, read
    with ``tail --ordered``) and an unordered one (1 partition, 3 replicas: 3 nsqd hold
    no more); the original one topic on every nsqd. Channels exist before any publish."""
    if family == "redesign":
        topics = {
            unique("soak-ord"): TopicSpec(2, 3, ordered=True),
            unique("soak"): TopicSpec(1, 3),
        }
        asyncio.run(create_topics(c.lookupd_http, topics, (CHANNEL,)))
        return [(t, spec.ordered) for t, spec in topics.items()]
    topic = unique("soak")
    with httpx.Client(timeout=10.0) as client:
        for http in c.nsqd_http:
            for what, params in (
                ("topic", {"topic": topic}),
                ("channel", {"topic": topic, "channel": CHANNEL}),
            ):
                client.post(f"http://{http}/{what}/create", params=params).raise_for_status()
    return [(topic, False)]


def stored(c: Cluster, family: Flavor, topic: str) -> int:
    """Messages the topic holds by nsqd's /stats: each partition's leader (redesign), the
    sum over nsqds (original; an nsqd counts since its last start)."""
    if family == "redesign":
        return sum(message_counts(c, topic).values())
    live = [n.http_address for n in c.nsqds if process.pid_runs(n.pid, n.exe)]
    return sum(t.message_count for http in live for t in nsqd_stats(http, topic))


def run_soak(c: Cluster, plan: SoakPlan, workdir: Path) -> SoakReport:
    """One soak on a started cluster ``c``; every nsqctl process is stopped by PID before
    this returns, and every fault's node is back."""
    say = plan.say
    report = SoakReport(plan.family, plan.seed, rate=plan.rate)
    workdir.mkdir(parents=True, exist_ok=True)
    lookupd = c.lookupd_http[0]
    topics = _make_topics(c, plan.family)
    say(f"[{plan.family}] topics: {', '.join(t for t, _ in topics)}")
    pubs: list[_Publisher] = []
    tails: list[_Tail] = []
    sampler: _Sampler | None = None
    try:
        for n, (topic, ordered) in enumerate(topics):
            tails.append(
                _Tail(f"tail{'-ordered' if ordered else ''}{n}", topic, lookupd, workdir, ordered)
            )
        for n, (topic, _) in enumerate(topics):
            pubs.append(_Publisher(f"pub{n}", topic, lookupd, workdir, plan.rate))
        children: list[_Child] = [*pubs, *tails]
        _wait(lambda: all(t.bodies for t in tails), 60, "every consumer's first message", children)
        sampler = _Sampler(children, plan.sample_every)
        faults = _Faults(c, plan, [t for t, _ in topics], workdir)
        t0 = time.monotonic()
        next_at = t0 + plan.first_fault
        wanted = len(plan.faults) if plan.faults is not None else plan.max_faults
        while True:
            now = time.monotonic()
            more = wanted is None or len(report.faults) < wanted
            if plan.faults is None and now - t0 >= plan.seconds:
                break
            if not more and now - t0 >= plan.seconds:
                break
            if (gone := _exited(children)) is not None:
                report.notes.append(f"stopped early at {now - t0:.0f}s: {gone}")
                break
            if more and now >= next_at:
                if plan.family == "redesign" and not _until(lambda: _nsqds_registered(c), 120):
                    report.notes.append(f"{now - t0:.0f}s: not every nsqd registered after 120s")
                kind = faults.choose(len(report.faults))
                say(f"[{plan.family}] {now - t0:6.0f}s fault {len(report.faults) + 1}: {kind}")
                record = faults.inject(kind, t0)
                say(f"[{plan.family}]         {record.target}: {record.outcome} ({record.took_s}s)")
                report.faults.append(record)
                next_at = time.monotonic() + faults.rng.uniform(*plan.interval)
                continue
            time.sleep(min(1.0, max(0.05, next_at - now)) if more else 0.5)
        report.seconds = time.monotonic() - t0
        sampler.close()  # the last sample is the steady state's, not an exiting process's
        say(f"[{plan.family}] end of input after {report.seconds:.0f}s; draining")
        for pub in pubs:
            pub.stop.set()  # every input ends at once; then each pub's result
        for pub in pubs:
            report.topics.append(pub.close(timeout=300))
        for pub_report, tail in zip(report.topics, tails, strict=True):
            _drain(tail, pub_report.okd, plan.drain_stall)
        for tail in tails:
            tail.interrupt()
        for pub_report, tail, pub in zip(report.topics, tails, pubs, strict=True):
            consumer = tail.close(pub_report.okd, pub_report.pub_exit == 0, pub_report.written)
            _account(consumer, tail, pub, pub_report, faults.kills)
            report.consumers.append(consumer)
        report.kills = [{"node": k.node, "nsqd": k.tcp_address, "at": k.at} for k in faults.kills]
        for pub_report in report.topics:
            pub_report.stored = stored(c, plan.family, pub_report.topic)
    finally:
        if sampler is not None:
            sampler.close()
        for child in [*pubs, *tails]:
            if child.proc.poll() is None:
                child.proc.kill()  # our own child, by PID: only after a failure above
                child.proc.wait(timeout=10)
        report.processes = [child.report for child in [*pubs, *tails]]
    return report


def _account(
    consumer: ConsumerReport,
    tail: _Tail,
    pub: _Publisher,
    published: TopicReport,
    kills: Sequence[KillCopy],
) -> None:
    """What the unordered tail answered and never printed, and each lost message's class
    (when pub exited 0, so that every line it was given is known to be OK'd)."""
    if tail.trace_path is None:
        return
    trace = traced(tail.trace_path)
    printed = {(p.nsqd, p.id) for p in tail.printed}
    consumer.reached_not_printed = sum(1 for key in trace if key not in printed)
    if published.pub_exit != 0:
        return
    got = set(tail.bodies)
    for i in range(published.okd):
        body = line(i)
        if body in got:
            continue
        record = classify(body, i, tail.topic, CHANNEL, pub.feed, kills, trace, printed)
        record["nearest_kill"] = nearest_kill(record["handed_to_pub"], kills)
        consumer.losses.append(record)


def _exited(children: Sequence[_Child]) -> str | None:
    """What the first nsqctl process that ended before its time said, if one did."""
    for child in children:
        if child.proc.poll() is not None:
            return f"{child.name} exited {child.proc.returncode}: {child.stderr().strip()[-300:]}"
    return None


def _check_running(children: Sequence[_Child]) -> None:
    if (gone := _exited(children)) is not None:
        raise RuntimeError(gone)


def _until(check: Callable[[], bool], timeout: float) -> bool:
    """Whether ``check()`` held within ``timeout`` seconds (the caller notes a no)."""
    try:
        eventually(check, timeout, "the check", step=0.5)
    except AssertionError:
        return False
    return True


def _wait(check: Callable[[], bool], timeout: float, what: str, children: Sequence[_Child]) -> None:
    def done() -> bool:
        if check():
            return True
        _check_running(children)
        return False

    eventually(done, timeout, what, step=0.2)


def _drain(tail: _Tail, okd: int, stall: float) -> None:
    """Until the consumer has every OK'd message, or nothing new came for ``stall`` s (a
    loss shows as a stall; slowness is waited out)."""
    best, since = tail.missing(okd), time.monotonic()
    while best > 0 and time.monotonic() - since < stall and tail.proc.poll() is None:
        time.sleep(0.25)
        now = tail.missing(okd)
        if now < best:
            best, since = now, time.monotonic()
