"""Every view of a redesign cluster with a node down tells the truth, on real servers:
the redesign's cells of the degraded-cluster matrix.

One private cluster (3 nsqd) serves the module: a topic of 3 partitions with 1 replica
(each partition on its own nsqd), one of 1 partition with 2 replicas and one of 1
partition with 3. The healthy cluster is read first (no false alarm, replicas and ISR
shown), then the nsqd leading partition 1 of the first topic is killed with -9, so that
partition has no live copy; every surface (the ``topic delete`` preview too) must still
list it, with no leader. The 3-replica topic's ISR then falls short of its replicas.
With that nsqd still dead, the nsqlookupd is killed (and restarted), then etcd (and
restarted). Last, a second nsqd is stopped (SIGSTOP: its sockets stay open, it answers
nothing) and the views must say, within a bounded time, that they cannot see it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from nsqctl import Producer, admin
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from nsqctl.tui import rows
from tests.helpers.cli import assert_one_line_error, invoke, run_main
from tests.helpers.clusters import running_cluster
from tests.helpers.degraded import (
    BOUND,
    assert_lookupd_down,
    findings,
    ok,
    one_record,
    scrape,
    view_of,
)
from tests.helpers.degraded import check as run_check
from tests.helpers.hang import stopped
from tests.helpers.redesign import TopicSpec, create_topics, eventually, leader_stats, unique

#: the partitions of ``split`` whose only copy is not on the killed nsqd
LIVE_PARTITIONS = (0, 2)


@dataclass
class Degraded:
    c: Cluster
    split: str  # 3 partitions, 1 replica
    copied: str  # 1 partition, 2 replicas
    wide: str  # 1 partition, 3 replicas: the victim holds one, so its ISR falls short
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
        split, copied, wide = unique("split"), unique("copied"), unique("wide")
        asyncio.run(
            create_topics(
                c.lookupd_http,
                {
                    split: TopicSpec(partitions=3, replicas=1),
                    copied: TopicSpec(1, replicas=2),
                    wide: TopicSpec(1, replicas=3),
                },
            )
        )
        where = ["--lookupd", c.lookupd_http[0]]
        healthy_lookup = json.loads(ok("lookup", copied, "--json", *where).stdout)
        healthy_list = ok("topic", "list", "--json", *where)
        victim_http = leader_stats(c, split)[1].node
        victim = next(n for n in c.nsqds if n.http_address == victim_http)
        process.kill_hard(victim)
        yield Degraded(c, split, copied, wide, victim, healthy_lookup, healthy_list)


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
    info = json.loads(ok("lookup", d.split, "--json", *d.lookupd).stdout)
    assert info["meta"]["partition_num"] == 3 and info["partition_count"] == 3
    parts = {p["partition"]: p for p in info["partitions"]}
    assert sorted(parts) == [0, 1, 2]
    assert parts[1]["leader_tcp"] is None and parts[1]["live_copy"] is False
    assert all(parts[p]["leader_http"] and parts[p]["live_copy"] for p in (0, 2))
    assert info["complete"] is False
    assert any(f"{d.split} partition 1: no leader and no live copy" in w for w in info["warnings"])
    text = ok("lookup", d.split, *d.lookupd).stdout
    lines = text.splitlines()
    assert any(line.split()[:2] == ["1", "NO"] and "no live copy" in line for line in lines), text
    [channels] = [line for line in lines if line.startswith("channels")]
    assert channels.startswith("channels  c") and "may be incomplete" in channels


def test_stat_counts_the_partition_as_leaderless(degraded: Degraded) -> None:
    d = degraded
    out = ok("stat", d.split, "--json", "-n", "1", *d.lookupd).stdout
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
    topics = ok("topic", "list", "--json", *d.lookupd)
    listing = json.loads(topics.stdout)
    assert {d.split, d.copied} <= set(listing["topics"]) and listing["complete"] is False
    assert "may be incomplete" in topics.stderr
    channels = ok("channel", "list", d.split, *d.lookupd)
    assert channels.stdout.splitlines() == ["c"]
    assert f"{d.split} partition 1: no leader" in channels.stderr
    # a topic nsqlookupd does not know is not found, however many nsqds are down: its
    # meta is in etcd, so a topic whose every copy died is still listed (as ``split``
    # is); another topic's dead partition is no reason to doubt the answer
    unknown = run_main("channel", "list", unique("nowhere"), *d.lookupd)
    line = assert_one_line_error(unknown, 1)
    assert "not found" in line and "may be incomplete" not in line, line
    assert f"{d.split} partition 1" not in line, line


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


async def test_dashboard_check_and_exporter_flag_the_partition(degraded: Degraded) -> None:
    d = degraded
    view = await view_of(d.c.lookupd_http)
    topic = view.topic(d.split)
    assert topic is not None
    [row] = [cells for key, cells in rows.topic_rows(view) if key == d.split]
    assert row[1] == "3" and "NO LEADER×1" in str(row[8])
    [part1] = [cells for key, cells in rows.partition_rows(topic) if key.startswith("1@")]
    assert "no live copy" in str(part1[1])
    scraped = scrape(view)

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


def test_an_isr_short_of_its_replicas_is_flagged(degraded: Degraded) -> None:
    """The killed nsqd held a copy of ``wide`` (3 replicas on 3 nsqds): once the cluster
    drops it from the ISR, every surface showing the ISR says 2 of 3."""
    d = degraded

    def isr() -> list[str] | None:
        info = json.loads(ok("lookup", d.wide, "--json", *d.lookupd).stdout)
        return info["partitions"][0]["isr"]  # type: ignore[no-any-return]

    eventually(lambda: len(isr() or "abc") == 2, 60, f"{d.victim.name} to leave the ISR")
    info = json.loads(ok("lookup", d.wide, "--json", *d.lookupd).stdout)
    [part] = info["partitions"]
    assert part["isr_short"] is True and d.victim.http_address not in part["isr"]
    assert any("ISR short: 2 of 3 replicas in sync" in w for w in info["warnings"])
    assert info["complete"] is False
    [line] = [x for x in ok("lookup", d.wide, *d.lookupd).stdout.splitlines() if "isr" in x]
    assert line.endswith("ISR SHORT")
    # The view polls again: a partition whose leader was on the victim may show no leader
    # (crit) until the cluster elects one, so wait for the warning rather than one poll.
    view = asyncio.run(view_of(d.c.lookupd_http))

    def warns() -> bool:
        nonlocal view
        view = asyncio.run(view_of(d.c.lookupd_http))
        found = view.topic(d.wide)
        return found is not None and found.severity == "warn"

    def seen() -> str:
        found = view.topic(d.wide)
        if found is None:
            return f"the view to list {d.wide} (it did not)"
        leaders = [p.leader for p in found.partitions]
        return f"{d.wide} to be warn (saw {found.severity}, leaders {leaders})"

    eventually(warns, 30, seen)
    topic = view.topic(d.wide)
    assert topic is not None
    [row] = [cells for key, cells in rows.topic_rows(view) if key == d.wide]
    assert "ISR short×1" in str(row[8])
    [cells] = [cells for _, cells in rows.partition_rows(topic)]
    assert "(short: 2 of 3)" in str(cells[3])
    check = run_check(1, *d.lookupd, off=("node-down", "no-leader", "orphan"))
    [short] = [f for f in findings(check, "isr") if f["topic"] == d.wide]
    assert short["status"] == "warn" and "ISR short: 2 of 3" in short["message"]
    scraped = scrape(view, ["isr=warn"])
    part0 = frozenset({("topic", d.wide), ("partition", "0")})
    assert scraped[("nsq_partition_isr", part0)] == 2.0
    assert scraped[("nsq_partition_replicas", part0)] == 3.0
    status = [
        value
        for (name, labels), value in scraped.items()
        if name == "nsqctl_check_status"
        and ("rule", "isr") in labels
        and ("topic", d.wide) in labels
    ]
    assert status == [1.0]


def test_lookupd_down_every_view_says_so_and_lists_from_the_nsqds(degraded: Degraded) -> None:
    d = degraded
    [lookupd] = d.c.lookupds
    asyncio.run(_publish_to_live_partitions(d))
    process.kill_hard(lookupd)
    view = assert_lookupd_down(lookupd.http_address, d.c.nsqd_http, d.split, "c")
    _assert_peek_reads_the_nsqds(d, lookupd.http_address)
    # the nsqds alone show the partitions they hold; the one with no live copy is not
    # counted (its meta is the lookupd's), which the lookupd warning covers
    topic = view.topic(d.split)
    assert topic is not None
    held = [p.partition for p in topic.partitions]
    assert sorted(n for n in held if n is not None) == [0, 2] and None not in held
    d.c.restart(lookupd)
    # every topic the next cells read (etcd down: the lookupd then keeps what it knew)
    eventually(
        lambda: (
            sorted(leader_stats(d.c, d.split)) == [0, 2]
            and _lookup_leaders(d, d.split) == {0, 2}
            and _lookup_leaders(d, d.copied) == {0}
        ),
        90,  # a loaded machine: youzan's lookupd reloads from etcd, then leaders settle
        "the nsqds to register with the restarted nsqlookupd",
    )


async def _publish_to_live_partitions(d: Degraded) -> None:
    """One message to each partition of ``split`` with a live leader (0 and 2)."""
    async with Producer(lookupd_http=d.c.lookupd_http) as producer:
        for partition in LIVE_PARTITIONS:
            await producer.publish(d.split, f"p{partition}".encode(), partition=partition)


def _assert_peek_reads_the_nsqds(d: Degraded, lookupd: str) -> None:
    """peek with every nsqlookupd down: from the nsqds given, saying they alone were asked;
    without them, a one-line error naming the way round."""
    where = ["--lookupd", lookupd, "--format", "json"]
    nsqds = [a for n in d.c.nsqd_http for a in ("--nsqd-http", n)]
    shown = run_main("peek", d.split, "c", *where, *nsqds)
    assert shown.returncode == 0, shown.stderr
    bodies = sorted(json.loads(line)["body"] for line in shown.stdout.splitlines())
    assert bodies == [f"p{p}" for p in LIVE_PARTITIONS]
    said = f"nsqlookupd {lookupd} not answering: only the nsqds were asked"
    [warning] = [line for line in shown.stderr.splitlines() if said in line]
    assert warning.endswith("the messages shown may be incomplete"), warning
    one = run_main("peek", d.split, "c", "--partition", "2", *where, *nsqds)
    assert [json.loads(line)["body"] for line in one.stdout.splitlines()] == ["p2"], one.stderr
    # the dead partition's leader is unknown without nsqlookupd: not "no such partition"
    led = run_main("peek", d.split, "c", "--partition", "1", *where, *nsqds)
    line = assert_one_line_error(led, 1)
    assert "partition 1 is led by none of the nsqds given" in line, line
    line = assert_one_line_error(run_main("peek", d.split, "c", *where), 1)
    assert lookupd in line and line.endswith("--nsqd-http reads the nsqds without it"), line


def _lookup_leaders(d: Degraded, topic: str) -> set[int]:
    result = invoke("lookup", topic, "--json", *d.lookupd)
    if result.exit_code != 0:
        return set()
    parts = json.loads(result.stdout)["partitions"]
    return {p["partition"] for p in parts if p["leader_http"] is not None}


def test_etcd_down_views_say_the_topology_is_the_last_known(degraded: Degraded) -> None:
    """youzan's nsqlookupd without etcd keeps answering /lookup, /topics and /nodes from
    what it last knew, and answers /listlookup with HTTP 500 (etcd's error); the nsqds keep
    taking writes. Every view keeps working and says it cannot vouch for the topology."""
    d = degraded
    [etcd] = d.c.by_role("etcd")
    [lookupd] = d.c.lookupd_http
    process.kill_hard(etcd)
    said = f"nsqlookupd {lookupd} cannot reach etcd ("

    def warned() -> bool:
        info = json.loads(ok("lookup", d.copied, "--json", *d.lookupd).stdout)
        return any(said in w for w in info["warnings"])

    eventually(warned, 30, "the lookupd to find etcd gone")
    info = json.loads(ok("lookup", d.copied, "--json", *d.lookupd).stdout)
    [part] = info["partitions"]
    assert part["leader_http"] is not None and part["live_copy"] is True  # still served
    assert info["complete"] is False
    text = ok("lookup", d.copied, *d.lookupd).stdout
    assert f"warning   {said}" in text and "no partition can get a new leader" in text
    topics = ok("topic", "list", "--json", *d.lookupd)
    listing = json.loads(topics.stdout)
    assert {d.split, d.copied, d.wide} <= set(listing["topics"])
    assert any(said in w and w.endswith("may be out of date") for w in listing["warnings"])
    channels = ok("channel", "list", d.copied, *d.lookupd)
    assert channels.stdout.splitlines() == ["c"] and said in channels.stderr
    nodes = json.loads(ok("node", "list", "--json", *d.lookupd).stdout)
    assert nodes["complete"] is False and any(said in w for w in nodes["warnings"])
    record = one_record("stat", d.copied, "--json", "-n", "1", *d.lookupd)
    assert any(said in w for w in record["warnings"])
    assert said in ok("stat", d.copied, "-n", "1", *d.lookupd).stderr
    ranking = one_record("top", "--json", "-i", "0.1", *d.lookupd)
    assert any(said in w for w in ranking["warnings"])
    check = run_check(1, *d.lookupd, off=("no-leader", "orphan", "isr"))
    [etcd_finding] = [f for f in findings(check, "node-down") if f["node"] == lookupd]
    assert etcd_finding["status"] == "warn" and "cannot reach etcd" in etcd_finding["message"]
    view = asyncio.run(view_of(d.c.lookupd_http))
    assert f"{lookupd} up, NO ETCD" in rows.lookupd_line(view).plain
    scraped = scrape(view)
    assert scraped[("nsq_lookupd_up", frozenset({("node", lookupd)}))] == 1.0  # it answers
    status = {
        dict(labels)["node"]: value
        for (name, labels), value in scraped.items()
        if name == "nsqctl_check_status" and ("rule", "node-down") in labels
    }
    assert status[lookupd] == 1.0
    d.c.restart(etcd)
    eventually(lambda: not warned(), 60, "the lookupd to reach etcd again")


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
