"""How ``nsqctl tail`` ends: through a real ``| head`` (a broken pipe), on real servers of
both families, and what that leaves on the channel.

A tail that stops must stop intake (RDY 0) before it gives anything back, give each
message still in flight back once, and FIN only what it wrote. The channel's requeue
count and depth are read from nsqd's ``/stats`` through :class:`StatsPoller` (what
``nsqctl stat`` reads); tail's own ``--trace-log`` names every FIN and REQ by id.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nsqctl.servers import cluster
from nsqctl.stats.poller import StatsPoller
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, run_cli
from tests.helpers.names import unique
from tests.helpers.redesign import TopicSpec, create_topics
from tests.helpers.wait import eventually

MESSAGES = 1000
MAX_IN_FLIGHT = 200  # tail's default
SIGPIPE_STATUS = 141  # 128 + SIGPIPE, what `yes | head` reports under pipefail


@dataclass(frozen=True)
class ChannelTotals:
    depth: int
    in_flight: int
    deferred: int
    requeued: int
    timed_out: int


async def _channel_totals(nsqd_http: list[str], topic: str, channel: str) -> ChannelTotals:
    """The channel summed over every nsqd (and partition) holding it."""
    async with StatsPoller([], nsqd_http, topic=topic, channel=channel) as poller:
        snap = await poller.snapshot()
    chans = [
        ch
        for node in snap.nodes
        for t in node.topics
        if t.topic == topic and (t.partition is None or t.is_leader)
        for ch in t.channels
        if ch.name == channel
    ]
    assert chans, f"no channel {topic}/{channel} on {nsqd_http}"
    return ChannelTotals(
        depth=sum(ch.depth for ch in chans),
        in_flight=sum(ch.in_flight_count for ch in chans),
        deferred=sum(ch.deferred_count for ch in chans),
        requeued=sum(ch.requeue_count for ch in chans),
        timed_out=sum(ch.timeout_count for ch in chans),
    )


def _has_in_flight(nsqd_http: list[str], topic: str, channel: str) -> bool:
    """Messages in flight on the channel (False while it does not exist yet)."""

    async def check() -> bool:
        async with StatsPoller([], nsqd_http, topic=topic, channel=channel) as poller:
            snap = await poller.snapshot()
        return any(
            ch.in_flight_count
            for node in snap.nodes
            for t in node.topics
            if t.topic == topic
            for ch in t.channels
            if ch.name == channel
        )

    return asyncio.run(check())


def _settled(nsqd_http: list[str], topic: str, channel: str) -> ChannelTotals:
    """Poll /stats until nothing is in flight or deferred (a deadline, not a sleep)."""
    totals: ChannelTotals | None = None

    def settled() -> bool:
        nonlocal totals
        totals = asyncio.run(_channel_totals(nsqd_http, topic, channel))
        return totals.in_flight == 0 and totals.deferred == 0

    eventually(settled, 30, lambda: f"the channel to settle: {totals}", step=0.05)
    assert totals is not None
    return totals


def _tail_into_head(
    where: list[str], topic: str, channel: str, trace: Path, *extra: str
) -> subprocess.CompletedProcess[bytes]:
    """``set -o pipefail; nsqctl tail ... | head -n 3`` through a real shell pipe."""
    tail = " ".join(
        [
            NSQCTL,
            "tail",
            topic,
            "-c",
            channel,
            "-n",
            str(MESSAGES),
            "--trace-log",
            str(trace),
            *where,
            *extra,
        ]
    )
    return subprocess.run(
        ["bash", "-c", f"set -o pipefail; {tail} | head -n 3"],
        capture_output=True,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def _drain(
    where: list[str], topic: str, channel: str, count: int, *extra: str
) -> list[dict[str, Any]]:
    """Every message still on the channel (``count`` of them), as tail's JSON records."""
    if count == 0:
        return []
    proc = run_cli(
        ["tail", topic, "-c", channel, "-n", str(count), "--format", "json", *where, *extra]
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _check_exit_path(
    nsqd_http: list[str], where: list[str], topic: str, channel: str, tmp: Path, *extra: str
) -> tuple[int, int]:
    """Run tail into head and check the channel afterwards; (requeues, FINs) for the report."""
    trace = tmp / "trace.jsonl"
    proc = _tail_into_head(where, topic, channel, trace, *extra)
    assert proc.returncode == SIGPIPE_STATUS, (proc.returncode, proc.stderr.decode())
    assert proc.stderr == b"", proc.stderr.decode()
    head = proc.stdout.splitlines()
    assert len(head) == 3, head

    totals = _settled(nsqd_http, topic, channel)
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    outcomes = Counter(r["outcome"] for r in records)
    fins = [r["id"] for r in records if r["outcome"] == "FIN"]
    reqs = [r["id"] for r in records if r["outcome"] == "REQ"]
    assert set(outcomes) <= {"FIN", "REQ"}, outcomes
    # Given back once: no id requeued twice, and no more than could be in flight at once.
    assert len(reqs) == len(set(reqs)), Counter(reqs).most_common(3)
    assert totals.requeued == len(reqs) <= MAX_IN_FLIGHT, (totals, len(reqs))
    assert totals.timed_out == 0, totals  # nothing was left in flight to time out
    # Nothing lost: the FINed (handled by the pipe's reader) and the remaining are all
    # 1000. What head read and dropped, and what it printed from its last read (tail
    # cannot tell the two apart), is given back: printed lines may come again. Ids, not
    # records: an ordered redesign channel may resend the message FINed last when its
    # reader is reset, and the consumer FINs that copy again (recorded as a second FIN).
    written = set(fins)
    assert totals.depth + len(written) == MESSAGES, (totals, len(written))
    remaining = _drain(where, topic, channel, totals.depth, *extra)
    assert not {r["id"] for r in remaining} & written
    return totals.requeued, len(written)


def _publish(where: list[str], topic: str) -> None:
    body = "".join(f"{i}\n" for i in range(1, MESSAGES + 1)).encode()
    pub = run_cli(["pub", topic, *where], input=body)
    assert pub.returncode == 0, pub.stderr.decode()


@pytest.mark.original
def test_tail_into_head_gives_back_once_original(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    c = original_cluster
    topic = unique("orig")
    where = ["--nsqd", c.nsqd_tcp[0]]
    _publish(where, topic)
    _check_exit_path(c.nsqd_http, where, topic, "c", tmp_path)


@pytest.fixture(scope="module")
def redesign_topics(redesign_cluster: cluster.Cluster) -> dict[str, str]:
    """A plain and an ordered topic (2 partitions, channel c), made together: each
    creation waits for the same lookupd check."""
    topics = {"plain": unique("rd"), "ordered": unique("ord")}
    specs = {
        topics["plain"]: TopicSpec(partitions=2),
        topics["ordered"]: TopicSpec(partitions=2, ordered=True),
    }
    asyncio.run(create_topics(redesign_cluster.lookupd_http, specs))
    return topics


@pytest.mark.redesign
def test_tail_into_head_gives_back_once_redesign(
    redesign_cluster: cluster.Cluster, redesign_topics: dict[str, str], tmp_path: Path
) -> None:
    c = redesign_cluster
    topic = redesign_topics["plain"]
    where = ["--lookupd", c.lookupd_http[0]]
    _publish(where, topic)
    _check_exit_path(c.nsqd_http, where, topic, "c", tmp_path)


@pytest.mark.redesign
def test_ordered_tail_into_head_gives_back_once_redesign(
    redesign_cluster: cluster.Cluster, redesign_topics: dict[str, str], tmp_path: Path
) -> None:
    c = redesign_cluster
    topic = redesign_topics["ordered"]
    where = ["--lookupd", c.lookupd_http[0]]
    _publish(where, topic)
    requeued, _ = _check_exit_path(c.nsqd_http, where, topic, "c", tmp_path, "--ordered")
    assert requeued <= 2  # one message in flight per partition


@pytest.mark.original
async def test_tail_with_stdout_closed_is_one_line_error(
    original_cluster: cluster.Cluster,
) -> None:
    c = original_cluster
    topic = unique("closed")
    where = ["--nsqd", c.nsqd_tcp[0]]
    _publish(where, topic)
    tail = " ".join([NSQCTL, "tail", topic, "-c", "c", "-n", "2", *where])
    proc = subprocess.run(
        ["bash", "-c", f"{tail} >&-"],
        capture_output=True,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )
    line = assert_one_line_error(proc, 2)
    assert "standard output is closed" in line, line
    # Refused before subscribing: every message is still in the topic, no channel made.
    async with StatsPoller([], [c.nsqd_http[0]], topic=topic) as poller:
        snap = await poller.snapshot()
    [held] = [t for node in snap.nodes for t in node.topics if t.topic == topic]
    assert (held.depth, held.channels) == (MESSAGES, ()), held


@pytest.mark.original
@pytest.mark.spark  # archive needs pyarrow (the archive/spark extra)
def test_archive_write_failure_gives_back_once(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    """A write that fails (``topic=T`` is a file where the archive needs a directory: a
    failure root cannot bypass) gives its messages back once, after RDY 0, and FINs none."""
    c = original_cluster
    topic = unique("arch")
    where = ["--nsqd", c.nsqd_tcp[0]]
    _publish(where, topic)
    out = tmp_path / "archive"
    out.mkdir()
    (out / f"topic={topic}").write_text("not a directory")
    trace = tmp_path / "trace.jsonl"
    proc = run_cli(
        [
            "archive",
            topic,
            "-o",
            str(out),
            "-c",
            "c",
            "--max-in-flight",
            "100",
            "-q",
            "--trace-log",
            str(trace),
            *where,
        ]
    )
    line = assert_one_line_error(proc, 1)
    assert "cannot write the archive" in line, line
    totals = _settled(c.nsqd_http, topic, "c")
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    reqs = [r["id"] for r in records if r["outcome"] == "REQ"]
    assert [r for r in records if r["outcome"] != "REQ"] == []  # nothing FINed
    assert len(reqs) == len(set(reqs)), Counter(reqs).most_common(3)
    assert totals.requeued == len(reqs) <= 100, (totals, len(reqs))
    assert (totals.depth, totals.timed_out) == (MESSAGES, 0), totals


@pytest.mark.original
async def test_filtering_a_durable_channel_discards_only_with_the_flag(
    original_cluster: cluster.Cluster,
) -> None:
    """10 messages, 2 with level=warn, the rest without the field: refused on the durable
    channel without --discard-unmatched (nothing consumed); with it, the unmatched ones
    before the second match are acknowledged, the rest given back: depth 10 -> 3."""
    c = original_cluster
    topic = unique("grep")
    where = ["--nsqd", c.nsqd_tcp[0]]
    bodies = [
        b'{"level": "warn", "i": %d}' % i if i in (3, 6) else b'{"i": %d}' % i for i in range(10)
    ]
    pub = run_cli(["pub", topic, *where], input=b"\n".join(bodies))
    assert pub.returncode == 0, pub.stderr.decode()
    args = ["tail", topic, "-c", "c", "-n", "2", "--jq-field", "level=warn", *where]
    refused = run_cli(args)
    assert "--discard-unmatched" in assert_one_line_error(refused, 2)
    async with StatsPoller([], [c.nsqd_http[0]], topic=topic) as poller:
        snap = await poller.snapshot()
    [held] = [t for node in snap.nodes for t in node.topics if t.topic == topic]
    assert (held.depth, held.channels) == (10, ()), held

    done = run_cli([*args, "--discard-unmatched"])
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.splitlines() == [bodies[3], bodies[6]]
    # A body without the field is no match (FINed), not a handler failure left in flight.
    totals = await asyncio.to_thread(_settled, [c.nsqd_http[0]], topic, "c")
    assert (totals.depth, totals.timed_out) == (3, 0), totals
    assert totals.requeued <= 3, totals


def _trace_outcomes(trace: Path) -> tuple[list[str], list[str]]:
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    fins = [r["id"] for r in records if r["outcome"] == "FIN"]
    reqs = [r["id"] for r in records if r["outcome"] == "REQ"]
    assert len(fins) + len(reqs) == len(records), Counter(r["outcome"] for r in records)
    return fins, reqs


@pytest.mark.original
def test_tail_count_reached_gives_back_the_rest_once(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    c = original_cluster
    topic = unique("count")
    where = ["--nsqd", c.nsqd_tcp[0]]
    _publish(where, topic)
    trace = tmp_path / "trace.jsonl"
    proc = run_cli(["tail", topic, "-c", "c", "-n", "3", "--trace-log", str(trace), *where])
    assert proc.returncode == 0, proc.stderr.decode()
    assert len(proc.stdout.splitlines()) == 3
    totals = _settled(c.nsqd_http, topic, "c")
    fins, reqs = _trace_outcomes(trace)
    assert len(fins) == len(set(fins)) == 3
    assert len(reqs) == len(set(reqs)), Counter(reqs).most_common(3)
    assert totals.requeued == len(reqs) <= MAX_IN_FLIGHT, totals
    assert (totals.depth, totals.timed_out) == (MESSAGES - 3, 0), totals


@pytest.mark.original
def test_tail_sigterm_with_messages_in_flight_gives_back_once(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    """SIGTERM while tail is blocked writing to a full pipe, the rest of its window in
    flight: it prints what it holds, gives the rest back once, and exits 0."""
    c = original_cluster
    topic = unique("term")
    where = ["--nsqd", c.nsqd_tcp[0]]
    body = "".join(f"{i:04d}{'x' * 200}\n" for i in range(MESSAGES)).encode()
    pub = run_cli(["pub", topic, *where], input=body)
    assert pub.returncode == 0, pub.stderr.decode()
    trace = tmp_path / "trace.jsonl"
    tail = subprocess.Popen(
        [NSQCTL, "tail", topic, "-c", "c", "--trace-log", str(trace), *where],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=clean_env(),
    )
    try:
        # Nobody reads yet: 200 KB of lines fill the pipe and tail blocks with messages in
        # flight (its write returns once we read, and the SIGTERM is seen then).
        eventually(
            lambda: _has_in_flight(c.nsqd_http, topic, "c"),
            30,
            "tail to have messages in flight",
            step=0.05,
        )
        tail.terminate()
        out, err = tail.communicate(timeout=60)
    finally:
        if tail.poll() is None:
            tail.kill()
            tail.wait()
    assert tail.returncode == 0, err.decode()
    lines = out.splitlines()
    totals = _settled(c.nsqd_http, topic, "c")
    fins, reqs = _trace_outcomes(trace)
    odd = [(n, len(line)) for n, line in enumerate(lines) if len(line) != 204]  # cut lines
    assert len(fins) == len(set(fins)) == len(lines) == len(set(lines)), (odd, len(out), totals)
    assert len(reqs) == len(set(reqs)), Counter(reqs).most_common(3)
    assert totals.requeued == len(reqs) <= MAX_IN_FLIGHT, totals
    assert (totals.depth + len(lines), totals.timed_out) == (MESSAGES, 0), totals


@pytest.mark.original
@pytest.mark.spark  # archive needs pyarrow (the archive/spark extra)
def test_archive_sigterm_mid_run_writes_what_it_holds_then_fins(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    """SIGTERM mid-archive: RDY 0, what is held is written durably and only then FINed,
    nothing given back, nothing left in flight; the rest stays on the channel."""
    c = original_cluster
    topic = unique("archterm")
    where = ["--nsqd", c.nsqd_tcp[0]]
    _publish(where, topic)
    trace = tmp_path / "trace.jsonl"
    archive = subprocess.Popen(
        [
            NSQCTL,
            "archive",
            topic,
            "-o",
            str(tmp_path / "out"),
            "-c",
            "c",
            "-q",
            "--max-in-flight",
            "20",
            "--trace-log",
            str(trace),
            *where,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=clean_env(),
    )
    try:

        def fins_written() -> bool:
            assert archive.poll() is None, archive.communicate()
            return trace.exists() and trace.read_text().count('"FIN"') >= 20

        eventually(fins_written, 30, "archive to write 20 FINs", step=0.02)
        archive.terminate()
        _, err = archive.communicate(timeout=60)
    finally:
        if archive.poll() is None:
            archive.kill()
            archive.wait()
    assert archive.returncode == 0, err.decode()
    totals = _settled(c.nsqd_http, topic, "c")
    fins, reqs = _trace_outcomes(trace)
    assert reqs == [] and totals.requeued == 0, totals
    assert len(fins) == len(set(fins)) >= 20
    assert (totals.depth + len(fins), totals.timed_out) == (MESSAGES, 0), totals
    import pyarrow.parquet as pq  # here: the module is collected without the extra too

    files = sorted((tmp_path / "out").rglob("part-*.parquet"))
    assert sum(pq.read_metadata(f).num_rows for f in files) == len(fins)  # FINed = on disk


@pytest.mark.parametrize("args", [["completion", "bash"], ["--help"], ["topic", "--help"]])
def test_any_command_writing_to_a_closed_pipe_exits_141_quietly(args: list[str]) -> None:
    """Not only tail: click's own answer to EPIPE (a quiet exit 1) becomes 141 in main."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before nsqctl writes a byte
    try:
        proc = subprocess.run(
            [NSQCTL, *args], stdout=write_end, stderr=subprocess.PIPE, env=clean_env(), timeout=60
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (SIGPIPE_STATUS, b"")
