"""Every view of a redesign cluster with a node down tells the truth, on real servers.

One private cluster (3 nsqd) serves the module: a topic of 3 partitions with 1 replica
(each partition on its own nsqd) and one of 1 partition with 2 replicas. The healthy
cluster is read first (no false alarm, replicas and ISR shown), then the nsqd leading
partition 1 of the first topic is killed with -9, so that partition has no live copy;
every surface (the ``topic delete`` preview too) must still list it, with no leader.
Last, a second nsqd is stopped (SIGSTOP: its sockets stay open, it answers nothing) and
the views must say, within a bounded time, that they cannot see it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from nsqctl import admin
from nsqctl.health.check import judge
from nsqctl.health.metrics import ClusterCollector
from nsqctl.health.monitor import Latest
from nsqctl.health.spec import RuleSet
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.session import StatsSession
from nsqctl.stats.view import ClusterView
from nsqctl.tui import rows
from tests.helpers.cli import assert_one_line_error, invoke, run_main
from tests.helpers.clusters import running_cluster
from tests.helpers.hang import stopped
from tests.helpers.metrics import Series, metric_samples
from tests.helpers.redesign import TopicSpec, create_topics, leader_stats, unique

#: What a view that meets a hung nsqd may take (it times the nsqd out, then answers).
BOUND = 30.0


@dataclass
class Degraded:
    c: Cluster
    split: str  # 3 partitions, 1 replica
    copied: str  # 1 partition, 2 replicas
    victim: NodeRecord  # killed: held only partition 1 of ``split``
    healthy_lookup: dict[str, Any]  # ``lookup copied --json`` before the kill
    healthy_list: Any  # ``topic list --json`` before the kill

    @property
    def lookupd(self) -> list[str]:
        return ["--lookupd", self.c.lookupd_http[0]]


@pytest.fixture(scope="module")
def degraded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Degraded]:
    directory = tmp_path_factory.mktemp("degraded")
    for c in running_cluster("redesign", directory, nsqd=3):
        split, copied = unique("split"), unique("copied")
        asyncio.run(
            create_topics(
                c.lookupd_http,
                {split: TopicSpec(partitions=3, replicas=1), copied: TopicSpec(1, replicas=2)},
            )
        )
        where = ["--lookupd", c.lookupd_http[0]]
        healthy_lookup = json.loads(_ok("lookup", copied, "--json", *where).stdout)
        healthy_list = _ok("topic", "list", "--json", *where)
        victim_http = leader_stats(c, split)[1].node
        victim = next(n for n in c.nsqds if n.http_address == victim_http)
        process.kill_hard(victim)
        yield Degraded(c, split, copied, victim, healthy_lookup, healthy_list)


def _ok(*args: str) -> Any:
    result = invoke(*args)
    assert result.exit_code == 0, (args, result.output)
    return result


def test_healthy_cluster_raises_no_alarm_and_lookup_shows_replicas_and_isr(
    degraded: Degraded,
) -> None:
    listing = json.loads(degraded.healthy_list.stdout)
    assert {degraded.split, degraded.copied} <= set(listing["topics"])
    assert listing["complete"] is True and listing["warnings"] == []
    assert degraded.healthy_list.stderr == ""
    info = degraded.healthy_lookup
    assert info["complete"] is True and info["warnings"] == []
    [part] = info["partitions"]
    assert part["leader_http"] is not None and part["live_copy"] is True
    # both copies, leader first, and both in sync (as kcat -L lists replicas and isrs)
    assert len(part["replicas"]) == 2 and part["replicas"][0] == part["leader_http"]
    assert sorted(part["isr"]) == sorted(part["replicas"])


def test_lookup_lists_the_partition_without_a_live_copy(degraded: Degraded) -> None:
    d = degraded
    info = json.loads(_ok("lookup", d.split, "--json", *d.lookupd).stdout)
    assert info["meta"]["partition_num"] == 3 and info["partition_count"] == 3
    parts = {p["partition"]: p for p in info["partitions"]}
    assert sorted(parts) == [0, 1, 2]
    assert parts[1]["leader_tcp"] is None and parts[1]["live_copy"] is False
    assert all(parts[p]["leader_http"] and parts[p]["live_copy"] for p in (0, 2))
    assert info["complete"] is False
    assert any(f"{d.split} partition 1: no leader and no live copy" in w for w in info["warnings"])
    text = _ok("lookup", d.split, *d.lookupd).stdout
    lines = text.splitlines()
    assert any(line.split()[:2] == ["1", "NO"] and "no live copy" in line for line in lines), text
    [channels] = [line for line in lines if line.startswith("channels")]
    assert channels.startswith("channels  c") and "may be incomplete" in channels


def test_stat_counts_the_partition_as_leaderless(degraded: Degraded) -> None:
    d = degraded
    out = _ok("stat", d.split, "--json", "-n", "1", *d.lookupd).stdout
    [record] = [json.loads(line) for line in out.splitlines()]
    [topic] = [r for r in record["rows"] if r["scope"] == "topic"]
    assert (topic["partitions"], topic["leaderless"], topic["unseen"]) == (3, 1, 1)
    parts = {r["partition"]: r for r in record["rows"] if r["scope"] == "partition"}
    assert sorted(parts) == [0, 1, 2]
    assert parts[1]["leader"] is None and parts[1]["live"] is False
    assert parts[1]["depth"] is None  # unknown, not 0
    text = invoke("stat", d.split, "-n", "1", *d.lookupd)
    assert text.exit_code == 0, text.output
    assert f"{d.split}#1 has no leader (no live copy" in text.stderr


def test_topic_and_channel_lists_say_they_may_be_incomplete(degraded: Degraded) -> None:
    d = degraded
    topics = _ok("topic", "list", "--json", *d.lookupd)
    listing = json.loads(topics.stdout)
    assert {d.split, d.copied} <= set(listing["topics"]) and listing["complete"] is False
    assert "may be incomplete" in topics.stderr
    channels = _ok("channel", "list", d.split, *d.lookupd)
    assert channels.stdout.splitlines() == ["c"]
    assert f"{d.split} partition 1: no leader" in channels.stderr
    # a topic nobody that answered knows: not "create it", since it may be on the dead nsqd
    unknown = run_main("channel", "list", unique("nowhere"), *d.lookupd)
    line = assert_one_line_error(unknown, 1)
    assert "may be incomplete" in line and "topic create" not in line


async def test_the_delete_preview_names_the_partition_it_cannot_measure(
    degraded: Degraded,
) -> None:
    """What ``topic delete`` shows before asking (the plan is never sent here)."""
    d = degraded
    placement, stages = await admin.prepare("topic", d.split, d.c.lookupd_http, (), action="delete")
    assert placement.leaderless == (1,)
    blast = await admin.measure_plan("delete", placement, stages)
    assert not blast.complete and blast.exceeds(10**9)  # the name must be typed back
    assert (
        "  partition 1: could not ask (no leader and no live copy: its nsqds are down)"
        in blast.lines()
    )


async def _view(d: Degraded) -> ClusterView:
    session = StatsSession(StatsPoller(d.c.lookupd_http, [], focus=None))
    try:
        return await session.refresh()
    finally:
        await session.aclose()


def _scrape(view: ClusterView) -> Series:
    """What the exporter serves for ``view`` (its collector, without the HTTP server)."""
    registry = CollectorRegistry()
    registry.register(ClusterCollector(lambda: Latest(view, judge([view], RuleSet.parse([])))))
    return metric_samples(generate_latest(registry).decode())


async def test_dashboard_check_and_exporter_flag_the_partition(degraded: Degraded) -> None:
    d = degraded
    view = await _view(d)
    topic = view.topic(d.split)
    assert topic is not None
    [row] = [cells for key, cells in rows.topic_rows(view) if key == d.split]
    assert row[1] == "3" and "NO LEADER×1" in str(row[8])
    [part1] = [cells for key, cells in rows.partition_rows(topic) if key.startswith("1@")]
    assert "no live copy" in str(part1[1])
    scraped = _scrape(view)

    def value(name: str, partition: str, topic: str = d.split) -> float | None:
        return scraped.get((name, frozenset({("topic", topic), ("partition", partition)})))

    assert [value("nsq_partition_writable", p) for p in "012"] == [1.0, 0.0, 1.0]
    assert [value("nsq_partition_copies", p) for p in "012"] == [1.0, 0.0, 1.0]
    assert [value("nsq_partition_replicas", p) for p in "012"] == [1.0, 1.0, 1.0]
    assert value("nsq_partition_replicas", "0", d.copied) == 2.0
    leaders = {
        dict(labels)["partition"]: dict(labels)["node"]
        for name, labels in scraped
        if name == "nsq_partition_leader" and ("topic", d.split) in labels
    }
    assert sorted(leaders) == ["0", "2"] and leaders["0"] == topic.partitions[0].leader
    check = await asyncio.to_thread(
        invoke, "check", "--rule", "node-down=off", "--json", "-n", "1", *d.lookupd
    )
    assert check.exit_code == 2, check.output
    found = [
        f
        for f in json.loads(check.stdout)["findings"]
        if f["rule"] == "no-leader" and f["topic"] == d.split and f["status"] == "crit"
    ]
    assert [f["partition"] for f in found] == [1]
    assert "no live copy" in found[0]["message"]


async def test_a_hung_nsqd_makes_views_say_they_cannot_see(degraded: Degraded) -> None:
    d = degraded
    hung = next(
        n
        for n in d.c.nsqds
        if n is not d.victim and n.http_address == leader_stats(d.c, d.split)[0].node
    )
    async with stopped(hung):
        start = time.monotonic()
        looked = await asyncio.to_thread(invoke, "lookup", d.split, "--json", *d.lookupd)
        listed = await asyncio.to_thread(invoke, "topic", "list", *d.lookupd)
        took = time.monotonic() - start
    process.kill_hard(hung)  # the last test: nothing needs it back, and it stops at once
    assert took < 2 * BOUND, took
    assert looked.exit_code == 0, looked.output
    info = json.loads(looked.stdout)
    parts = {p["partition"]: p for p in info["partitions"]}
    # the lookupd still lists the hung leader; the nsqds' account shows it does not answer
    assert parts[0]["leader_http"] == hung.http_address and parts[0]["leader_answering"] is False
    assert any("not answering" in w and hung.http_address in w for w in info["warnings"])
    assert listed.exit_code == 0, listed.output
    [warning] = [line for line in listed.stderr.splitlines() if "nsqd not answering" in line]
    assert hung.http_address in warning and warning.endswith("this list may be incomplete")
