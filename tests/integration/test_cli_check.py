"""``nsqctl check`` and ``nsqctl exporter`` as an operator runs them, on real clusters of
both families: Nagios exit codes and lines, ``--json``, orphan growth over polls, a dead
redesign leader, an unreachable lookupd, and a Prometheus scrape of the exporter."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import time
from collections.abc import AsyncIterator

import httpx

from nsqctl.producer import Producer
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from tests.conftest import StartCluster
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, invoke, run_cli
from tests.helpers.failover import leader_of
from tests.helpers.metrics import metric_samples
from tests.helpers.names import unique
from tests.helpers.poison import poison_consumer, poll_interval_for_poison
from tests.helpers.redesign import TopicSpec, create_topics
from tests.helpers.wait import wait_for

FAST = ("--samples", "2", "--interval", "0.2")
# The default rules (orphan, node-down, ...) judge every topic of the cluster, and the
# session clusters hold other tests' topics (one still filling is an orphan): a test that
# asserts the whole output judges only the rules it gives.
ALONE = ("--no-default-rules",)


async def _topic_with_channel(c: Cluster, prefix: str) -> str:
    """A fresh topic with channel ``c`` (made before publishing, so it keeps every message)."""
    topic = unique(prefix)
    if c.flavor == "redesign":
        await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2, replicas=1)})
    else:
        async with httpx.AsyncClient(timeout=10) as http:
            for path, params in (
                ("/topic/create", {"topic": topic}),
                ("/channel/create", {"topic": topic, "channel": "c"}),
            ):
                resp = await http.post(f"http://{c.nsqd_http[0]}{path}", params=params)
                resp.raise_for_status()
    return topic


def _where(c: Cluster) -> list[str]:
    if c.flavor == "redesign":
        return ["--lookupd", c.lookupd_http[0]]
    return ["--nsqd-http", c.nsqd_http[0]]


async def _publish(c: Cluster, topic: str, count: int) -> None:
    where = {"lookupd_http": c.lookupd_http} if c.flavor == "redesign" else {}
    nsqd = {} if where else {"nsqd_tcp": [c.nsqd_tcp[0]]}
    async with Producer(**where, **nsqd) as producer:  # type: ignore[arg-type]
        await producer.publish_many(topic, [b"m"] * count)


async def test_check_max_depth_exits_2_naming_the_channel_then_0(any_cluster: Cluster) -> None:
    c = any_cluster
    topic = await _topic_with_channel(c, "chk")
    await _publish(c, topic, 150)
    # in-process (the other tests run the entry point): an interpreter start-up less each
    over = await asyncio.to_thread(
        invoke, "check", *_where(c), "--topic", topic, "--max-depth", "100", *ALONE, *FAST
    )
    assert over.exit_code == 2, over.output
    # Nagios: the status line, then the performance data after its "|"
    assert over.stdout.splitlines() == [
        f"CRITICAL: max-depth {topic}/c: depth 150 > 100 | '{topic}/c depth'=150;;100;0"
    ]
    under = await asyncio.to_thread(
        invoke, "check", *_where(c), "--topic", topic, "--max-depth", "200", *ALONE, *FAST
    )
    assert under.exit_code == 0, under.output
    [line] = under.stdout.splitlines()
    assert line.startswith("OK: ") and f"over 2 polls | '{topic}/c depth'=150;;200;0" in line
    warned = await asyncio.to_thread(
        invoke, "check", *_where(c), "--rule", f"max-depth:{topic[:5]}*/c=100,200", "--json", *FAST
    )
    assert warned.exit_code == 1, warned.output
    doc = json.loads(warned.stdout)
    assert (doc["status"], doc["exit_code"], doc["error"], doc["samples"]) == ("warn", 1, None, 2)
    mine = [f for f in doc["findings"] if f["topic"] == topic]
    assert mine == [
        {
            "status": "warn",
            "rule": "max-depth",
            "topic": topic,
            "channel": "c",
            "partition": None,
            "node": None,
            "value": 150,
            "threshold": 100,
            "message": "depth 150 > 100",
        }
    ]


async def test_check_orphan_channel_growing_without_a_client(original_cluster: Cluster) -> None:
    c = original_cluster
    topic = await _topic_with_channel(c, "orph")
    stop = asyncio.Event()

    # Depth must grow between every two polls, with nobody consuming. The trickle shares
    # the test's event loop and the GIL with the command, and a loaded machine stalls
    # either now and then: polls far apart keep one such stall from reading as no growth.
    async def trickle() -> None:
        async with Producer(nsqd_tcp=[c.nsqd_tcp[0]]) as producer:
            while not stop.is_set():
                await producer.publish(topic, b"m")
                await asyncio.sleep(0.02)

    publishing = asyncio.create_task(trickle())
    try:
        scope = ("check", *_where(c), "--topic", topic)
        args = (*scope, "--orphan", "crit", "--samples", "4", "--interval", "1")
        grown = await asyncio.to_thread(invoke, *args)
    finally:
        stop.set()
        await publishing
    assert grown.exit_code == 2, grown.output
    [line] = [ln for ln in grown.stdout.splitlines() if topic in ln]
    assert line.startswith(f"CRITICAL: orphan {topic}/c: depth grew ")
    assert line.endswith("with no client connected")
    # Still: no longer growing, so not an orphan; with one poll, growth cannot be judged.
    still = await asyncio.to_thread(invoke, *scope, "--orphan", "crit", *FAST)
    assert still.exit_code == 0, still.output
    once = await asyncio.to_thread(
        invoke, *scope, "--no-default-rules", "--orphan", "warn", "-n", "1"
    )
    assert once.exit_code == 3, once.output
    assert once.stdout.splitlines() == [
        f"UNKNOWN: orphan {topic}/c: needs 2 polls of the channel, got 1"
    ]


async def test_check_poison_channel_with_perf_data(original_cluster: Cluster) -> None:
    """A consumer requeues its three messages over and over: ``--poison crit`` names the
    channel; the status line carries the depth and time-to-drain data of the --max-* rules
    after its "|" (``U`` for the time when the depth is not falling)."""
    c = original_cluster
    topic = unique("pois")
    consumer, seen = await poison_consumer(c, topic, redesign=False)
    try:
        # long enough for more than twice the held messages to be requeued between the polls
        # at the pace the channel goes round on this machine now
        interval = await poll_interval_for_poison(seen, floor=1)
        began = time.monotonic()
        proc = await asyncio.to_thread(
            invoke,
            "check",
            *_where(c),
            "--topic",
            topic,
            "--poison",
            "crit",
            "--max-depth",
            "100",
            "--max-time-to-drain",
            "60,600",
            "--no-default-rules",
            "--samples",
            "2",
            "--interval",
            f"{interval:g}",
        )
        took = time.monotonic() - began
    finally:
        await consumer.stop(timeout=5)
    assert proc.exit_code == 2, proc.output
    lines = proc.stdout.splitlines()
    # the most urgent first: poison, or a critical time to drain when the depth is not falling
    status = [line.split(" | ")[0] for line in lines]
    [poison] = [line for line in status if line.startswith("CRITICAL: poison")]
    said = re.fullmatch(
        rf"CRITICAL: poison {topic}/retries: \d+ requeues of the 3 message\(s\) it holds in "
        r"(\d+\.\d)s: the same messages fail over and over",
        poison,
    )
    assert said, poison
    # the time between the two polls: they start `interval` apart, and each takes a moment
    # that load stretches, so no closer than that; never more than the whole check ran
    assert interval / 2 <= float(said[1]) <= took, (poison, interval, took)
    _, perf = lines[0].split(" | ")
    data = re.findall(r"'([^']+)'=(\S+)", perf)
    assert " ".join(f"'{label}'={value}" for label, value in data) == perf
    found = dict(data)
    assert set(found) == {f"{topic}/retries depth", f"{topic}/retries time_to_drain"}, perf
    assert re.fullmatch(r"[0-3];;100;0", found[f"{topic}/retries depth"]), perf
    assert re.fullmatch(r"(U|[\d.]+s);60;600;0", found[f"{topic}/retries time_to_drain"]), perf
    assert all(" | " not in line for line in lines[1:])


def test_check_unreachable_lookupd_is_unknown_in_one_line() -> None:
    proc = run_cli(["check", "--lookupd", "127.0.0.1:1", "--timeout", "0.5"])
    assert proc.returncode == 3, proc
    assert proc.stdout.decode().splitlines() == [
        "UNKNOWN: cluster: no nsqlookupd answered (127.0.0.1:1)"
    ]
    bad = invoke("check", "--lookupd", "127.0.0.1:1", "--rule", "max-depth:x")
    assert bad.exit_code == 3 and bad.stdout == ""
    [line] = bad.stderr.splitlines()
    assert line.startswith("nsqctl: error: bad rule 'max-depth:x': max-depth needs a threshold")


def test_check_usage_errors_are_unknown_not_critical() -> None:
    """Nagios reads 2 as CRITICAL: a mistyped check must page nobody, so it answers 3
    (other commands keep click's 2 for a usage error)."""
    for args in (["check", "--no-such-flag"], ["check", "--samples", "x"]):
        line = assert_one_line_error(run_cli(args), 3)
        assert "check --help" in line, line
    assert_one_line_error(run_cli(["stat", "--no-such-flag"]), 2)


async def test_check_dead_redesign_leader_is_node_down_and_no_leader(
    start_cluster: StartCluster,
) -> None:
    c = start_cluster("redesign", nsqd=2)
    topic = unique("dead")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=2)})
    leader = leader_of(c, topic)
    process.kill_hard(leader)
    follower = next(n for n in c.nsqds if n is not leader)
    proc = await asyncio.to_thread(
        invoke,
        "check",
        "--lookupd",
        c.lookupd_http[0],
        *(a for n in c.nsqds for a in ("--nsqd-http", n.http_address)),
        "--timeout",
        "1",
        "--json",
        *FAST,
    )
    assert proc.exit_code == 2, proc.output
    doc = json.loads(proc.stdout)
    found = {(f["rule"], f["node"], f["topic"], f["partition"]) for f in doc["findings"]}
    assert ("node-down", leader.http_address, None, None) in found
    assert ("no-leader", None, topic, 0) in found
    [no_leader] = [f for f in doc["findings"] if f["rule"] == "no-leader"]
    assert no_leader["status"] == "crit"
    assert no_leader["message"] == f"no writable leader (copies on {follower.http_address})"


@contextlib.asynccontextmanager
async def _exporter(*args: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``nsqctl exporter ARGS --listen 127.0.0.1:0``; yields it and its /metrics URL, then
    stops it with SIGTERM (by PID) and checks it exited cleanly."""
    proc = await asyncio.create_subprocess_exec(
        NSQCTL,
        "exporter",
        *args,
        "--listen",
        "127.0.0.1:0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(),
    )
    try:
        assert proc.stderr is not None
        line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
        assert line.startswith("nsqctl exporter: serving http://127.0.0.1:"), line
        yield proc, line.split()[-1]
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)
        assert proc.returncode == 0, await proc.stderr.read()
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


async def test_exporter_serves_channel_depth_and_check_status(any_cluster: Cluster) -> None:
    c = any_cluster
    topic = await _topic_with_channel(c, "exp")
    await _publish(c, topic, 7)
    async with _exporter(*_where(c), "--interval", "0.2", "--topic", topic, "--max-depth", "5") as (
        _,
        url,
    ):
        series: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}

        async def scraped() -> bool:
            nonlocal series
            async with httpx.AsyncClient(timeout=5) as http:
                resp = await http.get(url)
            assert resp.status_code == 200
            series = metric_samples(resp.text)
            return {"nsqctl_check_status", "nsq_channel_time_to_drain_seconds"} <= {
                name for name, labels in series if ("topic", topic) in labels
            }

        await wait_for(scraped, 30, "the check status and time to drain of the topic")
    depths = {
        dict(labels)["partition"]: value
        for (name, labels), value in series.items()
        if name == "nsq_channel_depth" and ("topic", topic) in labels
    }
    assert sum(depths.values()) == 7
    assert set(depths) == ({"0", "1"} if c.flavor == "redesign" else {""})
    statuses = {
        (dict(labels)["rule"], dict(labels)["channel"]): v
        for (name, labels), v in series.items()
        if name == "nsqctl_check_status" and ("topic", topic) in labels
    }
    assert statuses[("max-depth", "c")] == 2.0  # critical: 7 > 5
    assert statuses[("orphan", "c")] in (0.0, 3.0)  # a default rule: ok, or unknown at first
    messages = [
        v
        for (name, labels), v in series.items()
        if name == "nsq_channel_messages_total" and ("topic", topic) in labels
    ]
    assert sum(messages) == 7
    # 7 messages and nobody consuming: it never drains, +Inf (what `> N` alerts catch)
    drain = frozenset({("topic", topic), ("channel", "c")})
    assert series[("nsq_channel_time_to_drain_seconds", drain)] == float("inf")
    assert series[("nsqctl_up", frozenset())] == 1.0
    assert series[("nsqctl_scrape_duration_seconds", frozenset())] >= 0.0


def test_exporter_bad_listen_address_is_one_line() -> None:
    proc = run_cli(["exporter", "--lookupd", "127.0.0.1:1", "--listen", "localhost"])
    assert proc.returncode == 2, proc
    [line] = proc.stderr.decode().splitlines()
    assert line.startswith("nsqctl: error: bad address 'localhost'")
