"""The operator commands on real youzan servers, each effect read back from the servers:
``topic create|delete`` (partitions, replicas, ordered, ext), ``channel create|delete|
pause|skip|unskip|setoffset --partition``, ``lookup``, ``stat``, and ``tail --from-start |
--from-time | --from-offset`` (SUB_ADVANCED) starting exactly where asked."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from nsqctl.cli.commands.stat import state_marker
from nsqctl.message import body_from_json
from nsqctl.servers.cluster import Cluster
from tests.conftest import StartCluster
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, cli, invoke
from tests.helpers.redesign import (
    channel_depths,
    channel_stats,
    eventually,
    leader_stats,
    message_counts,
    nsqctl,
    nsqctl_all,
    nsqd_stats,
    run_ok,
    tail_json,
    unique,
)

pytestmark = pytest.mark.redesign


@dataclass(frozen=True)
class Topics:
    admin: str  # 2 partitions, channel c
    tail: str  # 2 partitions, channel c
    empty: str  # 2 partitions, channel c; partition 1 empty until a test publishes


@pytest.fixture(scope="module")
def topics(redesign_cluster: Cluster) -> Topics:
    names = Topics(unique("cli-adm"), unique("cli-tail"), unique("cli-empty"))
    every = (names.admin, names.tail, names.empty)
    lk = ["--lookupd", redesign_cluster.lookupd_http[0]]
    nsqctl_all(
        *(["topic", "create", name, "--partitions", "2", "--replicas", "1", *lk] for name in every)
    )
    nsqctl_all(*(["channel", "create", name, "c", *lk] for name in every))
    return names


def lines(*bodies: bytes) -> bytes:
    return b"".join(b + b"\n" for b in bodies)


def stat_rows(c: Cluster, *args: str) -> list[dict[str, Any]]:
    out = nsqctl("stat", *args, "--lookupd", c.lookupd_http[0], "--json", "--count", "1")
    rows: list[dict[str, Any]] = json.loads(out)["rows"]
    return rows


def test_replicated_ordered_ext_topic_create_lookup_stat_delete(
    start_cluster: StartCluster,
) -> None:
    c = start_cluster("redesign", nsqd=3)
    lk = ["--lookupd", c.lookupd_http[0]]
    topic = unique("cli-repl")
    # Unordered, each partition replica needs its own nsqd: refused before asking lookupd.
    refused = cli("topic", "create", topic, "--partitions", "2", "--replicas", "2", *lk)
    assert "4 nodes and 3 registered" in assert_one_line_error(refused, 2)
    assert "not found" in assert_one_line_error(cli("lookup", topic, *lk), 1)

    out = nsqctl(
        "topic",
        "create",
        topic,
        "--partitions",
        "2",
        "--replicas",
        "2",
        "--ordered",
        "--ext",
        "--json",
        *lk,
    )
    assert json.loads(out)["ok"] is True
    holders: dict[int, list[str]] = {}
    for http in c.nsqd_http:
        for t in nsqd_stats(http, topic):
            assert t.partition is not None  # a redesign topic's copies are partitions
            holders.setdefault(t.partition, []).append(http)
            assert t.ordered and t.ext, t
    leaders = {p: t.node for p, t in leader_stats(c, topic).items()}
    assert sorted(holders) == sorted(leaders) == [0, 1]
    assert all(len(set(h)) == 2 for h in holders.values()), holders  # two replicas each

    info = json.loads(run_ok("lookup", topic, "--json", *lk))
    assert info["family"] == "redesign" and info["partition_count"] == 2
    assert info["meta"] == {
        "partition_num": 2,
        "replicas": 2,
        "ordered": True,
        "ext": True,
        "multi_part": False,
        "disable_channel_auto_create": False,
    }
    assert {p["partition"]: p["leader_http"] for p in info["partitions"]} == leaders
    text = run_ok("lookup", topic, *lk).splitlines()
    assert "meta      partitions=2 replicas=2 ordered=true ext=true" in text

    nsqctl("pub", topic, "--partition", "1", *lk, "-q", stdin=lines(b"x1", b"x2", b"x3"))
    parts = {r["partition"]: r for r in stat_rows(c, topic) if r["scope"] == "partition"}
    assert sorted(parts) == [0, 1]
    for part, row in parts.items():
        assert row["leader"] == leaders[part]
        assert sorted(row["isr"]) == sorted(holders[part])  # both replicas in sync
        assert row["replicas"] == [h for h in holders[part] if h != leaders[part]]
    assert (parts[0]["messages"], parts[1]["messages"]) == (0, 3)

    run_ok("topic", "delete", topic, "--yes", *lk)
    eventually(lambda: not any(nsqd_stats(h, topic) for h in c.nsqd_http), 30, "partitions deleted")
    assert "not found" in assert_one_line_error(cli("lookup", topic, *lk), 1)
    assert topic not in run_ok("topic", "list", *lk).split()


def test_topic_pause_is_refused_with_the_channel_alternative(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    proc = cli("topic", "pause", topics.admin, "--lookupd", redesign_cluster.lookupd_http[0])
    # an action the family lacks is bad input for that cluster: exit 2
    assert f"nsqctl channel pause {topics.admin} CHANNEL" in assert_one_line_error(proc, 2)
    assert not any(ch.paused for ch in channel_stats(redesign_cluster, topics.admin, "c").values())


def test_channel_create_pause_per_partition_and_delete(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    c, topic = redesign_cluster, topics.admin
    lk = ["--lookupd", c.lookupd_http[0]]

    def paused() -> dict[int, bool]:
        return {p: ch.paused for p, ch in channel_stats(c, topic, "c2").items()}

    # created on partition 1 only: the wait for its replicas looks at partition 1, not
    # at partition 0, which lacks it on purpose (no 30 s wait, no warning about it)
    only = invoke("channel", "create", topic, "c2", "--partition", "1", *lk)
    assert only.exit_code == 0, only.output
    # the partition asked, not "the topic's 1 partition(s)" of a 2-partition topic
    assert "note: channel c2 is on every copy of partition 1 (" in only.stdout, only.output
    assert "warning" not in only.stderr, only.stderr
    assert set(channel_stats(c, topic, "c2")) == {1}
    out = run_ok("channel", "create", topic, "c2", *lk)
    assert "note: channel c2 is on every copy of the topic's 2 partition(s)" in out, out
    assert paused() == {0: False, 1: False}
    run_ok("channel", "pause", topic, "c2", "--partition", "0", *lk)
    assert paused() == {0: True, 1: False}
    every = stat_rows(c, topic, "c2")
    rows = {r["partition"]: r for r in every if r["partition"] is not None}
    assert {p: r["paused"] for p, r in rows.items()} == {0: True, 1: False}
    # the channel's own row says it is paused on 1 of the 2 partitions, not everywhere
    [whole] = [r for r in every if r["scope"] == "channel"]
    assert (whole["paused_partitions"], whole["partitions"]) == (1, 2), whole
    assert state_marker(whole) == "PAUSED 1/2"
    run_ok("channel", "unpause", topic, "c2", "--partition", "0", *lk)
    assert paused() == {0: False, 1: False}
    run_ok("channel", "pause", topic, "c2", *lk)
    assert paused() == {0: True, 1: True}
    run_ok("channel", "delete", topic, "c2", "--yes", *lk)
    assert channel_stats(c, topic, "c2") == {}
    assert set(channel_stats(c, topic, "c")) == {0, 1}  # the other channel is untouched


def test_channel_setoffset_skip_unskip_per_partition(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    c, topic = redesign_cluster, topics.admin
    lk = ["--lookupd", c.lookupd_http[0]]

    def setoffset(*how: str) -> None:
        run_ok("channel", "setoffset", topic, "c", "--partition", "0", *how, "--yes", *lk)

    # 4-byte bodies: every message takes 34 bytes on disk (4 length + 26 header + body).
    nsqctl(
        "pub",
        topic,
        "--partition",
        "0",
        "--batch",
        "3",
        *lk,
        "-q",
        stdin=lines(*(b"m-%02d" % i for i in range(20))),
    )
    nsqctl(
        "pub", topic, "--partition", "1", *lk, "-q", stdin=lines(*(b"n-%d" % i for i in range(6)))
    )
    assert channel_depths(c, topic, "c") == {0: 20, 1: 6}
    rows = [r for r in stat_rows(c, topic, "c") if r["scope"] == "channel_partition"]
    leaders = {p: t.node for p, t in leader_stats(c, topic).items()}
    assert {r["partition"]: (r["depth"], r["node"]) for r in rows} == {
        p: (d, leaders[p]) for p, d in ((0, 20), (1, 6))
    }

    setoffset("--msgcount", "5")  # the server counts from 1: the 5th message is next
    assert channel_depths(c, topic, "c") == {0: 16, 1: 6}
    setoffset("--virtual-offset", str(34 * 10))  # the 11th message starts there
    assert channel_depths(c, topic, "c") == {0: 10, 1: 6}
    setoffset("--msgcount", "0")
    assert channel_depths(c, topic, "c") == {0: 20, 1: 6}
    setoffset("--end")
    assert channel_depths(c, topic, "c") == {0: 0, 1: 6}
    both = cli("channel", "setoffset", topic, "c", "--msgcount", "3", "--yes", *lk)
    assert "differ per partition: give --partition" in assert_one_line_error(both, 2)

    run_ok("channel", "skip", topic, "c", "--partition", "1", "--yes", *lk)
    skipped = {p: ch.skipped for p, ch in channel_stats(c, topic, "c").items()}
    assert skipped == {0: False, 1: True} and channel_depths(c, topic, "c") == {0: 0, 1: 0}
    nsqctl("pub", topic, "--partition", "1", *lk, "-q", stdin=lines(b"s1", b"s2", b"s3"))
    eventually(  # a skipped channel moves to the end again on its next flush
        lambda: channel_depths(c, topic, "c")[1] == 0, 30, "new messages skipped"
    )
    run_ok("channel", "unskip", topic, "c", "--partition", "1", "--yes", *lk)
    nsqctl("pub", topic, "--partition", "1", *lk, "-q", stdin=lines(b"u1", b"u2"))
    assert not any(ch.skipped for ch in channel_stats(c, topic, "c").values())
    assert channel_depths(c, topic, "c") == {0: 0, 1: 2}
    assert message_counts(c, topic) == {0: 20, 1: 11}


def test_tail_from_start_time_and_offset_start_exactly_there(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    c, topic = redesign_cluster, topics.tail
    lk = ["--lookupd", c.lookupd_http[0]]
    first = [b"a-%02d" % i for i in range(40)]
    later = [b"b-%02d" % i for i in range(40)]
    nsqctl("pub", topic, "--batch", "5", *lk, "-q", stdin=lines(*first))
    boundary = int(time.time()) + 1  # every later message is stamped at or after this second
    time.sleep(boundary - time.time() + 0.05)
    nsqctl("pub", topic, "--batch", "5", *lk, "-q", stdin=lines(*later))
    assert message_counts(c, topic) == {0: 40, 1: 40}

    everything = tail_json(c.lookupd_http, topic, 80, "--from-start")
    assert sorted(body_from_json(r) for r in everything) == first + later
    per_partition: dict[int, list[dict[str, Any]]] = {}
    for r in everything:
        per_partition.setdefault(r["partition"], []).append(r)
    for records in per_partition.values():
        records.sort(key=lambda r: r["offset"])
        bodies = [body_from_json(r) for r in records]
        assert bodies == sorted(bodies)  # storage order is publish order, a's before b's
        assert [r["internal_id"] for r in records] == sorted(r["internal_id"] for r in records)
        assert records[0]["offset"] == 0
        for prev, nxt in itertools.pairwise(records):
            assert nxt["offset"] == prev["offset"] + prev["size"]  # nothing in between

    iso = datetime.fromtimestamp(boundary, UTC).isoformat()
    since = tail_json(c.lookupd_http, topic, 40, "--from-time", iso)
    assert sorted(body_from_json(r) for r in since) == later

    p0 = per_partition[0]
    start = p0[7]  # mid-batch: batches are 5 messages
    rest = tail_json(
        c.lookupd_http,
        topic,
        len(p0) - 7,
        "--partition",
        "0",
        "--from-offset",
        str(start["offset"]),
    )
    assert [body_from_json(r) for r in rest] == [body_from_json(r) for r in p0[7:]]
    assert {r["partition"] for r in rest} == {0}


async def test_tail_from_time_reads_an_empty_partition_from_its_end(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    """youzan answers a start on a partition whose log is empty with E_INVALID "commit log
    end of file": tail reads that partition from its end, saying nothing, and the others
    from the start (before, it printed the error on every retry and never read it)."""
    c, topic = redesign_cluster, topics.empty
    lk = ["--lookupd", c.lookupd_http[0]]
    old = [b"p0-%d" % i for i in range(3)]
    nsqctl("pub", topic, "--partition", "0", *lk, "-q", stdin=lines(*old))
    args = ["-n", "4", "--format", "json", "--from-time", "2000-01-01T00:00:00Z", *lk]
    proc = await asyncio.create_subprocess_exec(
        NSQCTL,
        "tail",
        topic,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(),
    )
    try:
        assert proc.stderr is not None
        async with asyncio.timeout(30):
            said = (await proc.stderr.readline()).decode()
        channel = re.search(r"temporary channel (\S+) ", said)
        assert channel is not None, said
        eventually(
            lambda: getattr(channel_stats(c, topic, channel[1]).get(1), "client_count", 0),
            30,
            "tail reading the empty partition",
        )
        nsqctl("pub", topic, "--partition", "1", *lk, "-q", stdin=lines(b"p1-new"))
        async with asyncio.timeout(30):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err
    assert err == b"", err  # only the temporary-channel line above: no retried error
    records = [json.loads(line) for line in out.splitlines()]
    assert sorted((r["partition"], body_from_json(r)) for r in records) == [
        *((0, body) for body in old),
        (1, b"p1-new"),
    ]
