"""Publishing to partitioned topics on real youzan servers: the library Producer and
``nsqctl pub`` (round robin, --partition, --shard, --shard-field, MPUB batches), traced
publishing (PUB_TRACE / MPUB_TRACE receipts, trace ids on delivered messages) and ext
topics (JSON headers). Every effect is read back from the servers: each partition
leader's ``/stats`` and the messages a consumer gets from each partition."""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import mmh3
import pytest

from nsqctl import protocol as p
from nsqctl.connection import ConnectionConfig
from nsqctl.message import body_from_json
from nsqctl.producer import Producer, ProducerOptions
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import assert_one_line_error, cli
from tests.helpers.redesign import (
    TopicSpec,
    by_partition,
    create_topics,
    leader_stats,
    message_counts,
    nsqctl,
    read_messages,
    tail_json,
    unique,
)

pytestmark = pytest.mark.redesign


@dataclass(frozen=True)
class Topics:
    round_robin: str
    cli: str
    shard: str
    traced: str
    ext: str
    big: str
    ordered: str


@pytest.fixture(scope="module")
def topics(redesign_cluster: Cluster) -> Topics:
    """Every topic of this module, made at once (2 partitions; channels c and t on each)."""
    names = Topics(
        unique("pub-rr"),
        unique("pub-cli"),
        unique("pub-shard"),
        unique("pub-trace"),
        unique("pub-ext"),
        unique("pub-big"),
        unique("pub-ord"),
    )
    specs = {name: TopicSpec() for name in (names.round_robin, names.cli, names.shard)}
    specs[names.traced] = specs[names.big] = TopicSpec()
    specs[names.ext] = TopicSpec(ext=True)
    specs[names.ordered] = TopicSpec(ordered=True)
    asyncio.run(create_topics(redesign_cluster.lookupd_http, specs, channels=("c", "t")))
    return names


def murmur3_partition(key: str, partitions: int) -> int:
    """youzan go-nsq's sharding, written out: ``murmur3.Sum32(key) % partition_num``."""
    return mmh3.hash(key.encode(), 0, signed=False) % partitions


def runs_of(bodies: list[bytes], size: int) -> list[list[bytes]]:
    return [bodies[i : i + size] for i in range(0, len(bodies), size)]


async def test_library_publish_and_batches_round_robin_over_partitions(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    c, topic = redesign_cluster, topics.round_robin
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        for i in range(40):
            await producer.publish(topic, b"single-%02d" % i)
        assert message_counts(c, topic) == {0: 20, 1: 20}
        for b in range(4):
            await producer.publish_many(topic, [b"batch-%d-%d" % (b, i) for i in range(5)])
    assert message_counts(c, topic) == {0: 30, 1: 30}
    parts = by_partition(await read_messages(c.lookupd_http, topic, "c", 60))
    assert sorted(parts) == [0, 1]
    firsts = set()
    for part, msgs in parts.items():
        assert all((m.internal_id or 0) >> 50 == part for m in msgs)  # partition bits
        bodies = [m.body for m in msgs]
        singles = [int(b[-2:]) for b in bodies[:20]]
        # Consecutive publishes alternate: each partition holds every other one, in order.
        assert singles == list(range(singles[0], 40, 2)), singles
        firsts.add(singles[0])
        # Each MPUB is stored whole, in order, on one partition; batches alternate too.
        batches = runs_of(bodies[20:], 5)
        assert len(batches) == 2
        for batch in batches:
            number = batch[0].split(b"-")[1]
            assert batch == [b"batch-%s-%d" % (number, i) for i in range(5)]
    assert firsts == {0, 1}


def test_cli_pub_partition_flag_then_batches_round_robin(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    c, topic = redesign_cluster, topics.cli
    lk = ["--lookupd", c.lookupd_http[0]]
    pinned = [b"pinned-%02d" % i for i in range(10)]
    nsqctl("pub", topic, "--partition", "1", *lk, "-q", stdin=b"\n".join(pinned) + b"\n")
    assert message_counts(c, topic) == {0: 0, 1: 10}

    lines = [b"rr-%02d" % i for i in range(70)]
    out = nsqctl("pub", topic, "--batch", "7", "--json", *lk, stdin=b"\n".join(lines) + b"\n")
    assert json.loads(out) == {
        "topic": topic,
        "published": 70,
        "unpublished": 0,
        "skipped": 0,
        "too_large": [],
        "lines": {
            "published": [[1, 70]],
            "refused": [],
            "unconfirmed": [],
            "unsent": [],
            "sent_up_to": 70,
        },
        "error": None,
    }
    assert message_counts(c, topic) == {0: 35, 1: 45}  # ten MPUBs of 7, alternating

    parts = by_partition(asyncio.run(read_messages(c.lookupd_http, topic, "c", 80)))
    bodies = {part: [m.body for m in msgs] for part, msgs in parts.items()}
    assert bodies[1][:10] == pinned
    batches = runs_of(bodies[0], 7) + runs_of(bodies[1][10:], 7)
    for batch in batches:  # every MPUB whole and in input order on one partition
        start = lines.index(batch[0])
        assert batch == lines[start : start + 7] and start % 7 == 0
    assert sorted(b for batch in batches for b in batch) == lines


def test_cli_pub_shard_field_and_shard_key_follow_murmur3(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    """Each key always lands on murmur3(key) % 2 (go-nsq's rule), in publish order."""
    c, topic = redesign_cluster, topics.shard
    lk = ["--lookupd", c.lookupd_http[0]]
    keys = [f"user-{k}" for k in range(25)]
    events = [
        json.dumps({"user": {"id": key}, "key": key, "seq": seq}).encode()
        for seq in range(8)
        for key in keys
    ]
    nsqctl(
        "pub",
        topic,
        "--shard-field",
        "user.id",
        "--batch",
        "30",
        *lk,
        "-q",
        stdin=b"\n".join(events) + b"\n",
    )
    # --shard KEY: one key for every line; pick one key per partition.
    shard_keys = [
        next(k for k in (f"order-{i}" for i in range(100)) if murmur3_partition(k, 2) == part)
        for part in (0, 1)
    ]
    for key in shard_keys:
        lines = [json.dumps({"key": key, "seq": seq}).encode() for seq in range(6)]
        nsqctl("pub", topic, "--shard", key, *lk, "-q", stdin=b"\n".join(lines) + b"\n")

    expected = {0: 0, 1: 0}
    for key in keys:
        expected[murmur3_partition(key, 2)] += 8
    for key in shard_keys:
        expected[murmur3_partition(key, 2)] += 6
    assert message_counts(c, topic) == expected
    assert 0 < expected[0] < 212  # both partitions are used

    total = len(events) + 6 * len(shard_keys)
    parts = by_partition(asyncio.run(read_messages(c.lookupd_http, topic, "c", total)))
    seqs: dict[str, list[int]] = {}
    for part, msgs in parts.items():
        for msg in msgs:
            record = json.loads(msg.body)
            assert murmur3_partition(record["key"], 2) == part, (record, part)
            seqs.setdefault(record["key"], []).append(record["seq"])
    assert {k: s for k, s in seqs.items() if k in keys} == {k: list(range(8)) for k in keys}
    assert [seqs[k] for k in shard_keys] == [list(range(6))] * 2


def test_cli_pub_shard_key_given_only_an_nsqd_says_to_use_the_lookupds(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    """go-nsq shards by the partition count in the lookupd's topic meta; an nsqd alone does
    not give it. Refused in one line, nothing stored (an ordered topic's nsqd would answer
    E_BAD_PARTITION; a key must never land where hash(key) does not put it)."""
    c, topic = redesign_cluster, topics.ordered
    record = json.dumps({"k": "user-7"})
    for keyed in (["--shard-field", "k"], ["--shard", "user-7"]):
        proc = cli("pub", topic, record, *keyed, "--nsqd", c.nsqd_tcp[0])
        line = assert_one_line_error(proc, 2)
        assert "publish through the lookupds" in line and "--lookupd" in line, line
        assert "E_BAD_PARTITION" not in line
    assert message_counts(c, topic) == {0: 0, 1: 0}
    # What it says to do works: the key lands on its murmur3 partition.
    nsqctl("pub", topic, record, "--shard-field", "k", "--lookupd", c.lookupd_http[0], "-q")
    part = murmur3_partition("user-7", 2)
    assert message_counts(c, topic) == {part: 1, 1 - part: 0}


def test_cli_pub_partition_given_only_nsqds_publishes_on_its_leader(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    """--partition with --nsqd alone: the connection shows a redesign nsqd and the message
    goes to that partition there. Of several given nsqds, one that does not lead the
    partition hands it on to the next; given alone, it is refused in one line that names
    the partition and says to give the lookupds."""
    c, topic = redesign_cluster, topics.ordered  # ordered: nsqd refuses it unpartitioned
    leader = c.nsqd_tcp[c.nsqd_http.index(leader_stats(c, topic)[1].node)]
    other = next(tcp for tcp in c.nsqd_tcp if tcp != leader)
    before = message_counts(c, topic)
    nsqctl("pub", topic, "p1-a", "--partition", "1", "--nsqd", leader, "-q")
    nsqctl("pub", topic, "p1-b", "p1-c", "--partition", "1", "--nsqd", other, "--nsqd", leader)
    assert message_counts(c, topic) == {0: before[0], 1: before[1] + 3}

    line = assert_one_line_error(cli("pub", topic, "x", "--partition", "1", "--nsqd", other), 2)
    assert f"nsqd {other} does not lead partition 1 of topic {topic!r}" in line, line
    assert "--lookupd" in line and "original" not in line
    assert message_counts(c, topic) == {0: before[0], 1: before[1] + 3}


async def test_pinned_partition_asks_every_given_nsqd_whatever_the_retry_budget(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    """Given nsqds that do not lead the partition are asked in turn, outside the retry
    budget: with a budget of one attempt, the leader given second still takes it."""
    c, topic = redesign_cluster, topics.ordered
    leader = c.nsqd_tcp[c.nsqd_http.index(leader_stats(c, topic)[1].node)]
    other = next(tcp for tcp in c.nsqd_tcp if tcp != leader)
    before = message_counts(c, topic)
    one_try = ProducerOptions(max_attempts=1, failover_window=0)
    async with Producer(nsqd_tcp=[other, leader], options=one_try) as producer:
        await producer.publish_many(topic, [b"budget-a", b"budget-b"], partition=1)
    assert message_counts(c, topic) == {0: before[0], 1: before[1] + 2}


def test_cli_pub_unkeyed_to_an_ordered_topic_through_an_nsqd_says_what_to_pass(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    """youzan nsqd refuses a publish without a partition to an ordered topic
    (E_BAD_PARTITION, then it closes the connection): one line naming the flags that give
    each message a partition, nothing stored."""
    c, topic = redesign_cluster, topics.ordered
    before = message_counts(c, topic)
    line = assert_one_line_error(cli("pub", topic, "x", "y", "--nsqd", c.nsqd_tcp[0]), 2)
    assert f"topic {topic!r} is ordered" in line and "2 message(s) not published" in line
    for flag in ("--partition", "--lookupd", "--shard-field", "--shard "):
        assert flag in line, line
    assert message_counts(c, topic) == before


async def test_traced_publish_receipts_and_trace_ids_on_delivery(
    redesign_cluster: Cluster, topics: Topics, tmp_path: Path
) -> None:
    """PUB_TRACE / MPUB_TRACE from the library and ``pub --trace``: each receipt says where
    the message landed; the delivered messages carry those internal ids and trace ids."""
    c, topic = redesign_cluster, topics.traced
    lk = ["--lookupd", c.lookupd_http[0]]
    leaders = {part: t.node for part, t in leader_stats(c, topic).items()}
    expected: dict[int, tuple[int, int, bytes]] = {}  # internal id -> partition, trace, body
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        r0 = await producer.publish_traced(topic, b"lib-single-0", 1001, partition=0)
        r1 = await producer.publish_traced(topic, b"lib-single-1", 1002, partition=1)
        items = [(2001, b"lib-batch-0"), (2002, b"lib-batch-1"), (2003, b"lib-batch-2")]
        [rb] = await producer.publish_traced_many(topic, items, partition=1)
    assert (r0.partition, r0.trace_id, r0.count) == (0, 1001, 1)
    assert (r1.partition, r1.trace_id, rb.partition, rb.trace_id, rb.count) == (1, 1002, 1, 0, 3)
    assert [r.internal_id >> 50 for r in (r0, r1, rb)] == [0, 1, 1]
    assert rb.offset == r1.offset + r1.size  # the batch follows the single on partition 1
    expected[r0.internal_id] = (0, 1001, b"lib-single-0")
    expected[r1.internal_id] = (1, 1002, b"lib-single-1")
    for i, (trace, body) in enumerate(items):  # a batch's ids are consecutive
        expected[rb.internal_id + i] = (1, trace, body)

    trace_log = tmp_path / "pub.jsonl"
    lines = [b"cli-auto-%02d" % i for i in range(13)]  # the last batch has one message
    out = nsqctl(
        "pub",
        topic,
        "--trace",
        "auto",
        "--json",
        "--trace-log",
        str(trace_log),
        "--batch",
        "4",
        *lk,
        stdin=b"\n".join(lines) + b"\n",
    )
    *receipts, summary = [json.loads(line) for line in out.splitlines()]
    assert summary == {
        "topic": topic,
        "published": 13,
        "unpublished": 0,
        "skipped": 0,
        "too_large": [],
        "lines": {
            "published": [[1, 13]],
            "refused": [],
            "unconfirmed": [],
            "unsent": [],
            "sent_up_to": 13,
        },
        "error": None,
    }
    assert sorted(r["count"] for r in receipts) == [1, 4, 4, 4]  # in the order they landed
    assert {r["partition"] for r in receipts} == {0, 1}
    auto: dict[int, tuple[int, int]] = {}  # internal id -> partition, trace id
    runs: list[list[int]] = []  # each receipt's internal ids
    for r in receipts:
        assert r["internal_id"] >> 50 == r["partition"]
        # a batch's receipt has no one trace id; a single message's is its own
        assert r["trace_id"] == (r["trace_ids"][0] if r["count"] == 1 else 0), r
        assert leader_http_of(c, r["nsqd"]) == leaders[r["partition"]]
        assert len(set(r["trace_ids"])) == r["count"]
        assert all(0 < t < 1 << 64 for t in r["trace_ids"])
        runs.append([r["internal_id"] + i for i in range(r["count"])])  # consecutive ids
        auto.update(zip(runs[-1], ((r["partition"], t) for t in r["trace_ids"]), strict=True))
    # The trace log holds one publish record per message, with its own trace id.
    logged = [json.loads(line) for line in trace_log.read_text().splitlines()]
    assert sorted((x["kind"], x["internal_id"], x["partition"], x["trace_id"]) for x in logged) == [
        ("publish", iid, part, trace) for iid, (part, trace) in sorted(auto.items())
    ]
    out = nsqctl(
        "pub",
        topic,
        "--trace",
        "777",
        "--partition",
        "0",
        "--json",
        *lk,
        stdin=b"cli-fixed-0\ncli-fixed-1\n",
    )
    fixed = json.loads(out.splitlines()[0])
    assert fixed["trace_ids"] == [777, 777] and fixed["partition"] == 0
    expected[fixed["internal_id"]] = (0, 777, b"cli-fixed-0")
    expected[fixed["internal_id"] + 1] = (0, 777, b"cli-fixed-1")

    records = tail_json(c.lookupd_http, topic, len(expected) + len(auto), "-c", "c")
    seen = {r["internal_id"]: (r["partition"], r["trace_id"], body_from_json(r)) for r in records}
    assert {iid: seen.pop(iid, None) for iid in expected} == expected
    assert {iid: (part, trace) for iid, (part, trace, _) in seen.items()} == auto
    for run in runs:  # each receipt's messages are one chunk of input lines, in order
        bodies = [seen[iid][2] for iid in run]
        start = lines.index(bodies[0])
        assert bodies == lines[start : start + len(run)] and start % 4 == 0
    assert sorted(body for _, _, body in seen.values()) == lines
    for r in records:  # the 16-byte id is the internal id and the trace id
        assert r["id"] == f"{r['internal_id']:016x}{r['trace_id']:016x}"


def leader_http_of(c: Cluster, nsqd_tcp: str) -> str:
    return c.nsqd_http[c.nsqd_tcp.index(nsqd_tcp)]


async def test_ext_topic_json_headers_reach_consumers_and_tail(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    c, topic = redesign_cluster, topics.ext
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        plain = await producer.publish_ext(topic, b"with-header", {"k": "v", "n": 1}, partition=0)
        traced = await producer.publish_ext(
            topic, b"with-trace", {"k": "w", "##trace_id": "4242"}, partition=1
        )
        await producer.publish(topic, b"no-header", partition=0)
        with pytest.raises(p.ExtNotSupportError):  # a JSON header on a non-ext topic
            await producer.publish_ext(topics.traced, b"x", {"k": "v"}, partition=0)
    assert plain is None  # PUB_EXT answers plain OK without ##trace_id
    assert traced is not None and (traced.partition, traced.trace_id) == (1, 4242)
    assert message_counts(c, topic) == {0: 2, 1: 1}
    assert all(t.ext for t in leader_stats(c, topic).values())

    msgs = await read_messages(
        c.lookupd_http, topic, "c", 3, config=ConnectionConfig(extend_support=True)
    )
    got = {m.body: (m.partition, m.ext_header, m.trace_id) for m in msgs}
    assert got == {
        b"with-header": (0, {"k": "v", "n": 1}, 0),
        b"with-trace": (1, {"k": "w", "##trace_id": "4242"}, 4242),
        b"no-header": (0, None, 0),
    }
    # Without lookupd nothing says it is an ext topic: nsqd's refusal ends the tail at once.
    leader_tcp = c.nsqd_tcp[c.nsqd_http.index(leader_stats(c, topic)[0].node)]
    refused = await asyncio.to_thread(cli, "tail", topic, "-n", "1", "--nsqd", leader_tcp)
    assert refused.returncode == 1
    assert f"nsqctl: error: topic {topic!r} is an ext topic" in refused.stderr.splitlines()[-1]
    # nsqctl tail needs no flag for an ext topic (the lookup says it is one) and shows it.
    records = await asyncio.to_thread(tail_json, c.lookupd_http, topic, 3, "-c", "t")
    assert {body_from_json(r): r.get("ext_header") for r in records} == {
        b"with-header": {"k": "v", "n": 1},
        b"with-trace": {"k": "w", "##trace_id": "4242"},
        b"no-header": None,
    }


def test_cli_traced_publish_splits_batches_over_the_max_body_size(
    redesign_cluster: Cluster, topics: Topics
) -> None:
    """nsqd refuses an MPUB_TRACE body over --max-body-size (5 MiB) with a fatal E_BAD_BODY:
    a chunk of large lines goes out as several traced batches, one receipt each."""
    c, topic = redesign_cluster, topics.big
    bodies = [b"%02d:" % i + bytes([65 + i]) * 700_000 for i in range(9)]  # 6.3 MB in all
    out = nsqctl(
        "pub",
        topic,
        "--trace",
        "auto",
        "--partition",
        "1",
        "--json",
        "--lookupd",
        c.lookupd_http[0],
        stdin=b"\n".join(bodies) + b"\n",
    )
    *receipts, summary = [json.loads(line) for line in out.splitlines()]
    assert summary["published"] == 9 and summary["error"] is None
    assert len(receipts) >= 2 and sum(r["count"] for r in receipts) == 9
    assert all(r["size"] <= 5 * 1024 * 1024 for r in receipts)
    for prev, nxt in itertools.pairwise(receipts):  # consecutive on the partition
        assert nxt["offset"] == prev["offset"] + prev["size"]
        assert nxt["internal_id"] == prev["internal_id"] + prev["count"]
    assert message_counts(c, topic) == {0: 0, 1: 9}


def test_pub_to_a_topic_the_cluster_lacks_says_to_create_it(redesign_cluster: Cluster) -> None:
    """Only the lookupd leader makes redesign topics: nothing is sent to an nsqd."""
    topic = unique("pub-missing")
    proc = cli("pub", topic, "x", "--lookupd", redesign_cluster.lookupd_http[0])
    line = assert_one_line_error(proc, 1)
    assert f"topic {topic!r} does not exist on any lookupd" in line
    assert f"nsqctl topic create {topic}" in line
    assert "nothing was sent" in line and "not confirmed" not in line
    assert leader_stats(redesign_cluster, topic) == {}
