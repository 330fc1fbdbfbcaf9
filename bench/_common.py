"""Shared helpers for nsqctl's benchmarks.

* start real servers on 127.0.0.1 through nsqctl's own launcher (and stop them by PID);
* run a peer command (nsq's own Go tools) and time it, with its CPU time and peak RSS;
* read a topic's counters from nsqd ``/stats`` (through :mod:`nsqctl.stats`, the one reader)
  so every benchmark verifies delivery;
* measure the peak RSS of this Python process per measurement;
* print a plain-text result table and write the results as JSON to ``bench/results/``.

Speed is measured here, never in unit tests. The machine these run on is shared and
noisy, so results are reported as ratios against peers measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import re
import resource
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import httpx

from nsqctl.servers import build as _build
from nsqctl.servers import cluster as _cluster
from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from nsqctl.stats.model import ChannelStats, TopicPartitionStats
from tests.helpers.wait import eventually

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"

T = TypeVar("T")

__all__ = [
    "GO_BENCH_LINE",
    "NSQD_MODES",
    "RESULTS_DIR",
    "ChannelStats",
    "Cluster",
    "Measurement",
    "PeakRss",
    "PeerResult",
    "TopicPartitionStats",
    "add_nsqd_mode_arg",
    "add_output_args",
    "channel_drained",
    "channel_stats",
    "conclude",
    "counters",
    "create_channel",
    "delete_topic",
    "delivered",
    "fixed_text",
    "fmt_int",
    "fresh_topic",
    "git_state",
    "go_bench_result",
    "last_read",
    "machine_info",
    "median",
    "nsq_bin",
    "nsqd_cluster",
    "nsqd_mode_args",
    "nsqds_cpu_seconds",
    "paired_ratios",
    "parse_go_duration",
    "per_msg_us",
    "prefill",
    "print_table",
    "process_cpu_seconds",
    "publish_bodies",
    "ratio_text",
    "require_positive",
    "results_json",
    "run_header",
    "run_interleaved",
    "run_peer",
    "run_peer_on",
    "run_peers_on",
    "say",
    "summary_rows",
    "topic_stats",
    "unique_topic",
    "wait_channel",
    "write_json",
]


def bytecode_as_installed() -> None:
    """Run nsqctl as a user's install runs it: with its bytecode cached.

    pip compiles what it installs, but nsqctl is installed editable here and an
    environment with ``PYTHONDONTWRITEBYTECODE`` would make every nsqctl process compile
    its modules from source again (tens of milliseconds of start-up in each timed run).
    This compiles the package once and lets the children use the cache.
    """
    import nsqctl

    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(nsqctl.__file__).parent)],
        check=True,
    )


def say(msg: str) -> None:
    """Progress output (stderr, so the result table on stdout stays clean)."""
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- servers


def nsq_bin(tool: str, flavor: str = "original") -> Path:
    """Path of one of nsq's own binaries (built once and cached by nsqctl's launcher)."""
    path = _build.build(flavor) / tool  # type: ignore[arg-type]
    if not os.access(path, os.X_OK):
        raise SystemExit(f"{tool} not found at {path}: run `nsqctl sandbox build`")
    return path


@contextlib.contextmanager
def nsqd_cluster(
    flavor: str = "original", nsqd_args: Sequence[str] = (), keep: bool = False, nsqd: int = 1
) -> Iterator[Cluster]:
    """``nsqd`` nsqd (extra flags ``nsqd_args``) + one nsqlookupd on 127.0.0.1, in a temp
    dir (the redesign adds its etcd).

    Started by ``nsqctl.servers.cluster.start`` and stopped by PID (``Cluster.stop``) on
    the way out, whatever happens; the directory (message data, logs) is removed unless
    ``keep``.
    """
    directory = Path(tempfile.mkdtemp(prefix="nsqctl-bench-"))
    extra = f" with {' '.join(nsqd_args)}" if nsqd_args else ""
    nodes = "nsqd" if nsqd == 1 else f"{nsqd} nsqd"
    say(f"starting {nodes}{extra} + nsqlookupd ({flavor}) in {directory}")
    try:  # start() stops whatever it started when it fails
        cluster = _cluster.start(
            flavor,  # type: ignore[arg-type]
            directory,
            nsqd=nsqd,
            lookupd=1,
            nsqd_args=list(nsqd_args),
        )
    except BaseException:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    try:
        yield cluster
    finally:
        stopped = cluster.stop()
        say(f"stopped {', '.join(stopped) or 'nothing'}")
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)


#: ``--nsqd`` choices of the benchmarks that start an original nsqd.
NSQD_MODES = ("memory", "disk", "nomem")


def add_nsqd_mode_arg(ap: argparse.ArgumentParser) -> None:
    """``--nsqd memory|disk`` (default memory), as every original-nsqd benchmark offers it."""
    ap.add_argument(
        "--nsqd",
        choices=NSQD_MODES,
        default="memory",
        help="memory: nsqd --mem-queue-size large enough to keep every message in memory"
        " (as nsq's own bench.sh does); disk: nsqd defaults (10000 in memory, the rest"
        " spills to its disk queue, fsync every 2500); nomem: --mem-queue-size=0 (every"
        " message through the disk queue, as operators who want durability run it)",
    )


def nsqd_mode_args(mode: str, hold: int) -> list[str]:
    """nsqd flags for ``--nsqd``: ``memory`` keeps ``hold`` messages (x2, at least 10,000)
    in memory; ``disk`` adds nothing (nsqd's defaults); ``nomem`` sends every message
    through the disk queue."""
    if mode not in NSQD_MODES:
        raise ValueError(f"unknown nsqd mode {mode!r}")
    if mode == "nomem":
        return ["--mem-queue-size=0"]
    return [f"--mem-queue-size={max(2 * hold, 10_000)}"] if mode == "memory" else []


_topic_seq = itertools.count(1)


def unique_topic(prefix: str) -> str:
    """A fresh, valid topic name (``[.a-zA-Z0-9_-]``, at most 64 characters)."""
    name = f"{prefix}_{next(_topic_seq)}_{secrets.token_hex(3)}"
    return name[-64:]


def topic_stats(
    nsqd_http: str, topic: str, partition: int | None = None
) -> TopicPartitionStats | None:
    """The topic's counters from nsqd ``/stats`` (one ``partition`` of a redesign topic,
    whose nsqd lists one entry per partition it holds); None if it does not exist."""
    return read_nsqd_stats(nsqd_http, topic=topic).topic(topic, partition)


def delete_topic(nsqd_http: str, topic: str) -> None:
    """Delete a benchmark topic (frees the messages it spilled to disk)."""
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"http://{nsqd_http}/topic/delete", params={"topic": topic}, timeout=30.0)


def channel_stats(
    nsqd_http: str, topic: str, channel: str, partition: int | None = None
) -> ChannelStats | None:
    """The channel's counters from nsqd ``/stats`` (of one ``partition`` of a redesign
    topic): what a consumer benchmark verifies. None if it does not exist."""
    node = read_nsqd_stats(nsqd_http, topic=topic, channel=channel)
    return node.channel(topic, channel, partition)


def delivered(stats: ChannelStats) -> int:
    """Messages that left the channel's queue for a client (finished or still in flight)."""
    return stats.message_count - stats.depth - stats.deferred_count


def counters(stats: TopicPartitionStats | ChannelStats | None) -> dict[str, Any] | None:
    """A topic's or channel's counters as JSON for the results file (no clients/channels)."""
    if stats is None:
        return None
    names = (
        "message_count",
        "message_bytes",
        "depth",
        "in_flight_count",
        "deferred_count",
        "requeue_count",
        "timeout_count",
        "client_count",
    )
    return {n: getattr(stats, n) for n in names if hasattr(stats, n)}


def create_channel(nsqd_http: str, topic: str, channel: str) -> None:
    """Create a topic and a (durable) channel, so everything published later reaches it."""
    for path, params in (
        ("topic/create", {"topic": topic}),
        ("channel/create", {"topic": topic, "channel": channel}),
    ):
        httpx.post(f"http://{nsqd_http}/{path}", params=params, timeout=10.0).raise_for_status()


def fresh_topic(cluster: Cluster, prefix: str, channel: str, count: int, size: int) -> str:
    """A new topic with ``channel`` on the cluster's first nsqd, prefilled with ``count``
    messages of ``size`` bytes, all of them already in the channel (with a disk queue,
    nsqd's topic pump may still be copying them when the publish returns: a consumer
    timed from then would pay for that copy)."""
    topic = unique_topic(prefix)
    create_channel(cluster.nsqd_http[0], topic, channel)
    prefill(cluster.nsqd_tcp[0], cluster.nsqd_http[0], topic, count, size)
    stats = wait_channel(
        cluster.nsqd_http[0],
        topic,
        channel,
        lambda st: st is not None and st.message_count >= count,
        seconds=120.0,
    )
    if stats is None or stats.message_count != count:
        raise SystemExit(f"prefill of {topic}/{channel} failed: channel counts {stats}")
    return topic


def wait_channel(
    nsqd_http: str,
    topic: str,
    channel: str,
    done: Callable[[ChannelStats | None], bool],
    seconds: float = 2.0,
) -> ChannelStats | None:
    """The channel's counters once ``done(stats)`` holds, or the last read after ``seconds``
    (a consumer's last FINs land a moment after it exits)."""
    return last_read(lambda: channel_stats(nsqd_http, topic, channel), done, seconds)


def last_read(read: Callable[[], T], done: Callable[[T], bool], seconds: float) -> T:
    """``read()`` once ``done`` holds of it, or its last value after ``seconds``: for
    counters that settle a moment after a run, which the caller then judges."""
    value = read()

    def settled() -> bool:
        nonlocal value
        value = read()
        return done(value)

    if not done(value):
        with contextlib.suppress(AssertionError):  # past ``seconds``: the last read is it
            eventually(settled, seconds, "the counters to settle", step=0.05)
    return value


def channel_drained(stats: ChannelStats | None, count: int) -> bool:
    """The channel got exactly ``count`` messages and every one was consumed once: nothing
    left queued or deferred, nothing requeued or timed out."""
    return (
        stats is not None
        and stats.message_count == count
        and stats.depth == 0
        and stats.deferred_count == 0
        and stats.requeue_count == 0
        and stats.timeout_count == 0
    )


def publish_bodies(
    topic: str,
    messages: int,
    size: int,
    *,
    batch: int = 200,
    window: int = 8,
    **producer: Any,
) -> float:
    """Publish ``messages`` bodies of ``size`` bytes with one nsqctl Producer (keywords
    ``producer``: ``nsqd_tcp=[...]`` or ``lookupd_http=[...]``), ``window`` batches of
    ``batch`` in flight; return the seconds from creating the Producer to the last OK.

    The bodies are ``size`` printable bytes without a newline (so line-oriented tools print
    exactly one line per message). The caller checks delivery.
    """
    import asyncio

    from nsqctl.producer import Producer

    body = (b"0123456789abcdefghijklmnopqrstuvwxyz" * (size // 36 + 1))[:size]

    async def run() -> float:
        todo = iter(range(0, messages, batch))
        start = time.perf_counter()
        async with Producer(**producer) as prod:

            async def worker() -> None:
                for first in todo:
                    await prod.publish_many(topic, [body] * min(batch, messages - first))

            await asyncio.gather(*(worker() for _ in range(window)))
            return time.perf_counter() - start

    return asyncio.run(run())


def prefill(
    nsqd_tcp: str,
    nsqd_http: str,
    topic: str,
    messages: int,
    size: int,
    *,
    batch: int = 200,
    window: int = 8,
) -> float:
    """Publish ``messages`` bodies of ``size`` bytes to one nsqd with nsqctl's Producer
    (:func:`publish_bodies`); return seconds. Checked against the topic's
    ``message_count``.
    """
    seconds = publish_bodies(topic, messages, size, batch=batch, window=window, nsqd_tcp=[nsqd_tcp])
    stats = topic_stats(nsqd_http, topic)
    if stats is None or stats.message_count != messages:
        raise SystemExit(f"prefill of {topic} failed: nsqd counts {stats}, expected {messages}")
    return seconds


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used so far (Linux /proc), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


# --------------------------------------------------------------------------- peers


@dataclass
class PeerResult:
    """One finished peer command."""

    argv: list[str]
    returncode: int
    wall: float  # seconds from spawn to exit
    cpu: float  # user + system seconds of the child
    peak_rss_kb: int  # sampled VmHWM (0 if the child ended before the first sample)
    stdout: str
    stderr: str
    timed_out: bool = False


def run_peer(
    argv: Sequence[str],
    *,
    stdin: bytes | None = None,
    timeout: float = 300.0,
    env: dict[str, str] | None = None,
    stdout_to: str | None = None,
    stdin_from: str | None = None,
) -> PeerResult:
    """Run a command to completion; time it, with its CPU time and peak RSS.

    ``wall`` runs from just before the spawn to the exit, so it includes process start
    (a few milliseconds). CPU is the child's rusage (``os.wait4``). Peak RSS is sampled
    from ``/proc/<pid>/status`` VmHWM every 10 ms: the rusage ``ru_maxrss`` is useless
    here, since Linux carries the pre-exec high-water mark - the forking Python process's
    RSS - over the exec. stdin is fed from a thread; output goes to temporary files (no
    pipe can fill up and stall the child). ``stdout_to`` sends stdout to that file
    instead (``/dev/null`` for a tool whose output is the workload; ``stdout`` is then "");
    ``stdin_from`` feeds a file as stdin (a shell ``< FILE``, for inputs too big for memory).
    A child that outlives ``timeout`` is killed, by its PID, while it is still our unreaped
    child (so the PID cannot be recycled).
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    with contextlib.ExitStack() as stack:
        out: IO[bytes] = stack.enter_context(
            open(stdout_to, "wb") if stdout_to else tempfile.TemporaryFile()  # noqa: SIM115
        )
        err = stack.enter_context(tempfile.TemporaryFile())
        stdin_arg: Any = subprocess.PIPE if stdin is not None else subprocess.DEVNULL
        if stdin_from is not None:
            stdin_arg = stack.enter_context(open(stdin_from, "rb"))
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            stdin=stdin_arg,
            stdout=out,
            stderr=err,
            env=full_env,
        )
        feeder = None
        if stdin is not None:
            assert proc.stdin is not None
            pipe = proc.stdin

            def feed() -> None:
                with contextlib.suppress(BrokenPipeError, OSError):
                    pipe.write(stdin)
                with contextlib.suppress(BrokenPipeError, OSError):
                    pipe.close()

            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
        peak = [0]
        exited = threading.Event()

        def sample() -> None:
            status = f"/proc/{proc.pid}/status"
            while not exited.wait(0.01):  # the PID stays ours until we reap it
                kb = status_kb("VmHWM", status)
                if kb is not None:
                    peak[0] = max(peak[0], kb)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        lock = threading.Lock()
        state = {"reaped": False, "killed": False}

        def kill() -> None:
            with lock:
                if not state["reaped"]:
                    state["killed"] = True
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.daemon = True
        timer.start()
        try:
            # Wait for the exit without reaping, take the time, then reap with rusage.
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
            wall = time.perf_counter() - start
            exited.set()
            sampler.join()
            with lock:
                state["reaped"] = True
            timer.cancel()
            _pid, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            exited.set()
            kill()
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        if feeder is not None:
            feeder.join(timeout=5)
        err.seek(0)
        stdout = ""
        if not stdout_to:
            out.seek(0)
            stdout = out.read().decode(errors="replace")
        return PeerResult(
            argv=list(argv),
            returncode=proc.returncode,
            wall=wall,
            cpu=usage.ru_utime + usage.ru_stime,
            peak_rss_kb=peak[0],
            stdout=stdout,
            stderr=err.read().decode(errors="replace"),
            timed_out=state["killed"],
        )


# --------------------------------------------------------------------------- this process


class PeakRss:
    """Peak resident set size of this process, resettable per measurement (Linux).

    ``reset()`` writes 5 to ``/proc/self/clear_refs`` (resets VmHWM); ``peak_kb()`` reads
    VmHWM. Where that is unavailable it falls back to ``ru_maxrss`` (peak since start).
    """

    def __init__(self) -> None:
        self.resettable = False

    def reset(self) -> None:
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.resettable = True
        except OSError:
            self.resettable = False

    @staticmethod
    def current_kb() -> int | None:
        return status_kb("VmRSS")

    def peak_kb(self) -> int:
        peak = status_kb("VmHWM")
        if peak is not None:
            return peak
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def status_kb(key: str, path: str = "/proc/self/status") -> int | None:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def nsqds_cpu_seconds(cluster: Cluster) -> float | None:
    """CPU seconds the cluster's nsqds have used so far, together (None where /proc
    cannot tell)."""
    total = 0.0
    for node in cluster.nsqds:
        cpu = process_cpu_seconds(node.pid)
        if cpu is None:
            return None
        total += cpu
    return total


def run_peer_on(
    cluster: Cluster, argv: Sequence[str], **kwargs: Any
) -> tuple[PeerResult, float | None]:
    """:func:`run_peer` (same keywords), with the CPU seconds the cluster's nsqds used
    meanwhile (None where /proc cannot tell)."""
    srv0 = nsqds_cpu_seconds(cluster)
    peer = run_peer(argv, **kwargs)
    srv1 = nsqds_cpu_seconds(cluster)
    return peer, None if srv0 is None or srv1 is None else srv1 - srv0


def run_peers_on(
    cluster: Cluster, argvs: Sequence[Sequence[str]], **kwargs: Any
) -> tuple[list[PeerResult], float | None]:
    """Several commands at once, each through :func:`run_peer` (same keywords) in its own
    thread, all spawned together; their results (in ``argvs`` order) and the CPU seconds the
    cluster's nsqds used meanwhile. A tool that takes one nsqd address (nsq's bench_writer,
    bench_reader) covers a topic with partitions on several nsqds this way."""
    srv0 = nsqds_cpu_seconds(cluster)
    results: list[PeerResult | BaseException | None] = [None] * len(argvs)

    def one(i: int) -> None:
        try:
            results[i] = run_peer(argvs[i], **kwargs)
        except BaseException as err:  # re-raised below, in this thread
            results[i] = err

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(argvs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    srv1 = nsqds_cpu_seconds(cluster)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    peers = [r for r in results if isinstance(r, PeerResult)]
    return peers, None if srv0 is None or srv1 is None else srv1 - srv0


#: The summary line of nsq's bench_writer and bench_reader: duration and ops/s.
GO_BENCH_LINE = re.compile(r"duration: (\S+) - [\d.]+mb/s - ([\d.]+)ops/s")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def go_bench_result(output: str) -> tuple[int, float] | None:
    """Messages and seconds of a bench_writer / bench_reader run: its LAST summary line
    (youzan's bench_writer also prints one every 5 s while it runs); None without one."""
    found = GO_BENCH_LINE.findall(output)
    if not found:
        return None
    duration, ops = found[-1]
    seconds = parse_go_duration(duration)
    return round(float(ops) * seconds), seconds


def parse_go_duration(text: str) -> float:
    """Seconds in a Go ``time.Duration`` string such as ``1m2.5s`` or ``950.1ms``."""
    parts = re.findall(r"([\d.]+)(h|ms|us|µs|ns|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


# --------------------------------------------------------------------------- results


@dataclass
class Measurement:
    """One timed run of one variant, with its delivery check."""

    variant: str
    messages: int  # messages acknowledged by the publisher
    seconds: float
    verified: bool  # nsqd's topic counters match what the publisher claims
    client_cpu: float | None = None  # CPU seconds of the publishing process
    server_cpu: float | None = None  # CPU seconds nsqd used during the run
    peak_rss_kb: int | None = None  # of the publishing process
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    @classmethod
    def of_peer(
        cls,
        variant: str,
        peer: PeerResult,
        *,
        messages: int,
        verified: bool,
        server_cpu: float | None,
        detail: dict[str, Any],
        seconds: float | None = None,
    ) -> Measurement:
        """A peer command's run: its CPU and peak RSS; ``seconds`` defaults to its wall time.
        ``detail`` gets the exit code and, for a run that failed its check, the end of its
        stderr (unless it has them already)."""
        detail = {"returncode": peer.returncode, **detail}
        if not verified:
            detail.setdefault("stderr", peer.stderr.strip()[-800:])
        return cls(
            variant=variant,
            messages=messages,
            seconds=peer.wall if seconds is None else seconds,
            verified=verified,
            client_cpu=peer.cpu,
            server_cpu=server_cpu,
            peak_rss_kb=peer.peak_rss_kb,
            detail=detail,
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["msgs_per_s"] = self.rate
        return data


def run_interleaved(
    variants: Sequence[tuple[str, Any]], repeats: int
) -> dict[str, list[Measurement]]:
    """Run every variant ``repeats`` times, interleaved (A B C A B C ...), their order
    rotated each repeat so no variant always runs first or right after a given peer."""
    results: dict[str, list[Measurement]] = {name: [] for name, _ in variants}
    variants = list(variants)
    for rep in range(repeats):
        shift = rep % len(variants)
        for name, fn in variants[shift:] + variants[:shift]:
            m = fn()
            results[name].append(m)
            flag = "ok" if m.verified else "DELIVERY CHECK FAILED"
            rss = f"{m.peak_rss_kb / 1024:6.1f} MiB" if m.peak_rss_kb else ""
            say(
                f"  [{rep + 1}/{repeats}] {name:<24} {m.messages:>9,} msgs "
                f"{m.seconds:7.3f}s {m.rate:>11,.0f} msgs/s {rss}  {flag}"
            )
    return results


def paired_ratios(ms: Sequence[Measurement], refs: Sequence[Measurement]) -> list[float]:
    """Same-repeat ratios: run i of ``ms`` over run i of ``refs`` (close in time and load)."""
    return [m.rate / r.rate for m, r in zip(ms, refs, strict=False) if r.rate]


def summary_rows(
    results: dict[str, list[Measurement]], refs: Sequence[str]
) -> list[dict[str, Any]]:
    """One row a variant: median rate, CPU per message, peak RSS, delivery, and for each
    reference variant ``r`` its ratio to ``r`` (``vs_r``: of the medians; ``paired_vs_r``:
    same-repeat ratios, as runs of one repeat are close in time and machine load)."""
    ref_runs = {ref: results.get(ref, []) for ref in refs}
    ref_rate = {ref: median([m.rate for m in ms]) or None for ref, ms in ref_runs.items()}
    rows = []
    for name, ms in results.items():
        rate = median([m.rate for m in ms])
        row: dict[str, Any] = {
            "variant": name,
            "messages": median([m.messages for m in ms]),
            "msgs_per_s": rate,
            "runs_msgs_per_s": [m.rate for m in ms],
            "client_cpu_us_per_msg": per_msg_us(ms, "client_cpu"),
            "nsqd_cpu_us_per_msg": per_msg_us(ms, "server_cpu"),
            "peak_rss_mib": max((m.peak_rss_kb or 0) for m in ms) / 1024,
            "verified": all(m.verified for m in ms),
        }
        for ref, rr in ref_rate.items():
            row[f"vs_{ref}"] = rate / rr if rr else None
            row[f"paired_vs_{ref}"] = paired_ratios(ms, ref_runs[ref])
        rows.append(row)
    return rows


def ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fixed_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def per_msg_us(ms: Sequence[Measurement], attr: str) -> float | None:
    """Median microseconds per message of a CPU attribute (``client_cpu``, ``server_cpu``)
    over the runs that measured it; None when none did."""
    values = [
        getattr(m, attr) / m.messages * 1e6
        for m in ms
        if getattr(m, attr) is not None and m.messages
    ]
    return median(values) if values else None


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def fmt_int(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain aligned text table on stdout (first column left, the rest right)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    print()
    print(title)
    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))
    sys.stdout.flush()


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on (so a reader can tell two runs apart)."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = None
    with contextlib.suppress(OSError):
        load = os.getloadavg()
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "loadavg_at_start": load,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
    }


def write_json(name: str, payload: dict[str, Any], results_dir: Path | None = None) -> Path:
    """Write ``payload`` as ``<results_dir>/<name>-<UTC timestamp>.json``; return the path."""
    directory = results_dir or RESULTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = directory / f"{name}-{stamp}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path


# --------------------------------------------------------------------------- main


def add_output_args(ap: argparse.ArgumentParser) -> None:
    """``--results-dir``, ``--no-json`` and ``--require-targets``."""
    ap.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    ap.add_argument("--no-json", action="store_true")
    ap.add_argument("--require-targets", action="store_true", help="exit 2 on a missed target")


def require_positive(ap: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Exit with a usage error unless every named option is at least 1."""
    for name in names:
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")


def git_state() -> dict[str, Any]:
    """The checkout measured: HEAD and the files changed since (empty outside git)."""
    state: dict[str, Any] = {}
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        state["head"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout
        state["changed"] = [line[3:] for line in status.splitlines()]
    return state


def run_header(benchmark: str, settings: Any) -> dict[str, Any]:
    """The start of a results payload: what ran, when, where, on which checkout and with
    which settings."""
    return {
        "benchmark": benchmark,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine_info(),
        "git": git_state(),
        "settings": settings.__dict__,
        "command": [sys.executable, *sys.argv],
    }


def results_json(
    results: dict[str, list[Measurement]], rows: list[dict[str, Any]], verdict: Any
) -> dict[str, Any]:
    """The summary rows, the target verdict and every run, for the results payload."""
    return {
        "summary": rows,
        "targets": verdict,
        "runs": {k: [m.to_json() for m in v] for k, v in results.items()},
    }


def conclude(
    name: str,
    payload: dict[str, Any],
    args: argparse.Namespace,
    *,
    started: float,
    verified: bool,
    targets_met: bool,
    mismatch: str = "",
) -> int:
    """Finish a run: write the payload (unless ``--no-json``); exit code 1 if a delivery
    check failed, 2 if a target was missed under ``--require-targets``, else 0."""
    payload["elapsed_s"] = time.perf_counter() - started
    payload["all_verified"] = verified
    if not args.no_json:
        print(f"results: {write_json(name, payload, args.results_dir)}")
    if not verified:
        print(f"DELIVERY CHECK FAILED: nsqd's counters do not match{mismatch}")
        return 1
    if args.require_targets and not targets_met:
        return 2
    return 0
