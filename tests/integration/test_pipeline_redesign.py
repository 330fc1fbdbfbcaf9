"""The Spark pipeline on real youzan (redesign) servers: archive, replay, trace.

The module fixture works on the session's 2-nsqd redesign cluster with two source topics:

* ``unordered``: 2 partitions, one on each nsqd. JSON messages under 12 shard keys,
  binary bodies holding every byte value (one shard key), and lines published traced by
  ``nsqctl pub --trace auto --trace-log`` (PUB_TRACE receipts in ``pub.jsonl``);
  ``nsqctl tail --trace-log`` reads it all on channel ``tail`` (``consume.jsonl``).
* ``ordered``: 4 partitions on the 2 nsqd (an ordered topic may put several on one node;
  an unordered one may not), consumed only with SUB_ORDERED.

Each is archived by ``nsqctl archive`` (no ``--ordered`` flag: it must find out), killed
with SIGKILL mid-way, then resumed until idle. What the server counted as consumed at
the kill must already be in the archive (FIN only after the durable write); afterwards
every message is there, with its partition, ids, offsets and exact body. Replays go to two
more redesign topics and are read back from the servers; ``nsqctl trace`` joins the
publish log, the consume log and the archive for one message by each id form.

pyspark/pyarrow are imported inside the tests: ``-m "not spark"`` (the core install)
collects this module without them and deselects every test.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from tests.conftest import StartCluster
from tests.helpers.cli import NSQCTL, assert_one_line_error, clean_env, invoke, run_cli
from tests.helpers.failover import kill_leader
from tests.helpers.redesign import (
    TopicSpec,
    by_partition,
    channel_depths,
    create_topics,
    message_counts,
    nsqctl,
    read_messages,
    unique,
)
from tests.helpers.spark import TEST_MASTER, spark  # noqa: F401
from tests.helpers.wait import eventually

pytestmark = [pytest.mark.redesign, pytest.mark.spark]

ARCHIVE_CHANNEL = "nsqctl_archive"
U_KEYS = [f"u{i:02d}" for i in range(12)]
U_PER_KEY = 250
BINARY = 256
TRACED = 40
O_PARTITIONS = 4
O_KEYS_PER_PARTITION = 2
O_PER_KEY = 60
#: the first archiver's window: small, so it is surely mid-way when killed
FIRST_MAX_IN_FLIGHT = 8


def json_body(key: str, seq: int, **extra: object) -> bytes:
    return json.dumps({"k": key, "seq": seq, **extra}, separators=(",", ":")).encode()


def binary_body(i: int) -> bytes:
    """Every byte value (newlines, NUL, invalid UTF-8 included), rotated per message."""
    return b"bin-%03d:" % i + bytes((i + j) % 256 for j in range(256))


def key_seq(body: bytes) -> tuple[str, int]:
    """(shard key, place in that key's sequence) of any body published here; binary bodies
    have no JSON key, which ``replay --shard-field k`` reads as the empty key."""
    if body.startswith(b"bin-"):
        return "", int(body[4:7])
    doc = json.loads(body)
    return doc["k"], doc["seq"]


@dataclass
class ArchiveRun:
    out: Path
    log: Path  # both archivers' --trace-log: a consume record per message FINed
    stderr: str  # the resumed archiver's
    at_kill: dict[int, set[int]]  # partition → internal ids on disk when the first was killed
    confirmed_at_kill: dict[int, int]  # partition → messages nsqd counted as consumed
    max_held: int  # at most this many messages can be written but not FINed at the kill


@dataclass
class Published:
    """partition → bodies in publish order. Library MPUBs go one at a time, so a partition
    stores them in this order; the traced lines come last, each key's in order."""

    unordered: dict[int, list[bytes]]
    ordered: dict[int, list[bytes]]
    routes: dict[str, int]  # the traced lines' shard keys → partition


@dataclass
class Pipeline:
    cluster: Cluster
    unordered: str
    ordered: str
    replay_ordered: str
    replay_keyed: str
    published: Published
    pub_log: Path
    consume_log: Path
    tail: list[dict[str, Any]]
    u_archive: ArchiveRun
    o_archive: ArchiveRun

    @property
    def lookupd(self) -> str:
        return self.cluster.lookupd_http[0]


def table(out: Path) -> Any:
    import pyarrow.dataset as ds

    return ds.dataset(out, format="parquet", partitioning="hive").to_table()


def rows(out: Path) -> list[dict[str, Any]]:
    return table(out).to_pylist() if any(out.rglob("*.parquet")) else []


def ids_by_partition(out: Path) -> dict[int, set[int]]:
    found: dict[int, set[int]] = defaultdict(set)
    for row in rows(out):
        found[row["partition"]].add(row["internal_id"])
    return dict(found)


def archive_argv(lookupd: str, topic: str, out: Path, log: Path, *extra: str) -> list[str]:
    return [
        NSQCTL,
        "archive",
        topic,
        "--out",
        str(out),
        "--lookupd",
        lookupd,
        "--trace-log",
        str(log),
        *extra,
    ]


def archive_killed_and_resumed(
    c: Cluster, topic: str, base: Path, total: int, kill_after: int, max_held: int
) -> ArchiveRun:
    """``nsqctl archive`` killed with SIGKILL once ``kill_after`` rows are on disk, then run
    again until idle. Records what was on disk and what nsqd counted as consumed (the
    contiguous prefix of each partition it got FINs for) at the kill."""
    out, log = base / f"archive-{topic}", base / f"archive-{topic}.jsonl"
    lookupd = c.lookupd_http[0]
    first = subprocess.Popen(
        archive_argv(lookupd, topic, out, log, "-q", "--max-in-flight", str(FIRST_MAX_IN_FLIGHT)),
        stdin=subprocess.DEVNULL,
    )
    try:
        eventually(
            lambda: sum(map(len, ids_by_partition(out).values())) >= kill_after,
            120,
            f"the first archiver of {topic} to write {kill_after} rows",
        )
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    at_kill = ids_by_partition(out)
    assert sum(map(len, at_kill.values())) < total, "the archiver finished before the kill"
    depths = channel_depths(c, topic, ARCHIVE_CHANNEL)
    counts = message_counts(c, topic)
    confirmed = {p: counts[p] - depths[p] for p in counts}
    resumed = subprocess.run(
        archive_argv(lookupd, topic, out, log, "--exit-when-idle", "3"),
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert resumed.returncode == 0, resumed.stderr
    print(
        f"archive {topic}: {sum(map(len, at_kill.values()))} of {total} rows on disk at the "
        f"kill, nsqd had {sum(confirmed.values())} confirmed"
    )
    return ArchiveRun(out, log, resumed.stderr, at_kill, confirmed, max_held)


async def publish_sources(lookupd: Sequence[str], unordered: str, ordered: str) -> Published:
    """Library publishes with shard keys; where each key goes is the producer's routing,
    which the fixture cross-checks against each leader's message count."""
    pub = Published(defaultdict(list), defaultdict(list), {})
    async with Producer(lookupd_http=list(lookupd)) as producer:

        async def send(
            topic: str, key: str, batch: list[bytes], into: dict[int, list[bytes]]
        ) -> None:
            _, part = await producer.route(topic, key)
            await producer.publish_many(topic, batch, shard_key=key)
            into[part or 0].extend(batch)

        for start in range(0, U_PER_KEY, 50):
            for key in U_KEYS:
                batch = [json_body(key, n) for n in range(start, start + 50)]
                await send(unordered, key, batch, pub.unordered)
        await send(unordered, "bin", [binary_body(i) for i in range(BINARY)], pub.unordered)
        for key in (f"t{k}" for k in range(4)):  # nsqctl pub's traced lines (the fixture)
            pub.routes[key] = (await producer.route(unordered, key))[1] or 0

        keys: dict[int, list[str]] = defaultdict(list)  # two keys on each partition
        for i in range(1000):
            _, part = await producer.route(ordered, f"o{i}")
            if len(keys[part or 0]) < O_KEYS_PER_PARTITION:
                keys[part or 0].append(f"o{i}")
            if sum(map(len, keys.values())) == O_PARTITIONS * O_KEYS_PER_PARTITION:
                break
        for start in range(0, O_PER_KEY, 20):
            for part_keys in keys.values():
                for key in part_keys:
                    batch = [json_body(key, n) for n in range(start, start + 20)]
                    await send(ordered, key, batch, pub.ordered)
    return pub


@pytest.fixture(scope="module")
def pipeline(redesign_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    c = redesign_cluster
    lookupd = c.lookupd_http[0]
    base = tmp_path_factory.mktemp("pipeline-redesign")
    unordered, ordered = unique("arch-u"), unique("arch-o")
    replay_ordered, replay_keyed = unique("replay-o"), unique("replay-k")
    specs = {
        unordered: TopicSpec(partitions=2),
        ordered: TopicSpec(partitions=O_PARTITIONS, ordered=True),
        replay_ordered: TopicSpec(partitions=O_PARTITIONS, ordered=True),
        replay_keyed: TopicSpec(partitions=2),
    }
    # every channel before the first publish: a youzan channel starts at the end of its topic
    asyncio.run(create_topics(c.lookupd_http, specs, channels=(ARCHIVE_CHANNEL, "tail", "c")))
    pub = asyncio.run(publish_sources(c.lookupd_http, unordered, ordered))
    pub_log, consume_log = base / "pub.jsonl", base / "consume.jsonl"
    traced = [json_body(f"t{i % 4}", i // 4, traced=True) for i in range(TRACED)]
    lines = b"".join(body + b"\n" for body in traced)
    nsqctl(
        "pub",
        unordered,
        "--lookupd",
        lookupd,
        "--shard-field",
        "k",
        "--trace",
        "auto",
        "--trace-log",
        str(pub_log),
        "-q",
        stdin=lines,
    )
    for body in traced:
        pub.unordered[pub.routes[key_seq(body)[0]]].append(body)
    assert message_counts(c, unordered) == {k: len(v) for k, v in pub.unordered.items()}
    assert message_counts(c, ordered) == {k: len(v) for k, v in pub.ordered.items()}
    assert len(pub.ordered) == O_PARTITIONS and len(pub.unordered) == 2

    u_total = sum(map(len, pub.unordered.values()))
    out = nsqctl(
        "tail",
        unordered,
        "-c",
        "tail",
        "-n",
        str(u_total),
        "--format",
        "json",
        "--trace-log",
        str(consume_log),
        "--lookupd",
        lookupd,
        timeout=120,
    )
    tail = [json.loads(line) for line in out.splitlines()]
    assert len(tail) == u_total

    o_total = sum(map(len, pub.ordered.values()))
    u_archive = archive_killed_and_resumed(c, unordered, base, u_total, 600, FIRST_MAX_IN_FLIGHT)
    # ordered: one message in flight per partition, so at most one per partition held
    o_archive = archive_killed_and_resumed(c, ordered, base, o_total, 60, O_PARTITIONS)
    return Pipeline(
        c,
        unordered,
        ordered,
        replay_ordered,
        replay_keyed,
        pub,
        pub_log,
        consume_log,
        tail,
        u_archive,
        o_archive,
    )


def unique_rows(run: ArchiveRun) -> dict[int, list[dict[str, Any]]]:
    """partition → archived rows in storage order (internal id), each message once. A
    message archived twice (written, then killed before its FIN) must be the same row but
    for its delivery; at most ``run.max_held`` are."""
    copies: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for row in rows(run.out):
        copies[row["partition"], row["internal_id"]].append(row)
    delivery = {"attempts", "archived_at"}
    for twins in copies.values():
        assert all(
            {k: v for k, v in t.items() if k not in delivery}
            == {k: v for k, v in twins[0].items() if k not in delivery}
            for t in twins
        )
    duplicates = sum(len(t) - 1 for t in copies.values())
    assert duplicates <= run.max_held, duplicates
    parts: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for (part, _), twins in sorted(copies.items()):
        parts[part].append(twins[0])
    return dict(parts)


def check_archive(
    p: Pipeline, run: ArchiveRun, topic: str, published: dict[int, list[bytes]]
) -> dict[int, list[dict[str, Any]]]:
    """What every archive here must be: complete, exact, laid out by partition, and
    durable before acknowledged. Returns the unique rows per partition."""
    assert not list(run.out.rglob(".tmp-*"))
    for path in run.out.rglob("*.parquet"):
        t, part_dir, date = path.parent.relative_to(run.out).parts
        assert t == f"topic={topic}" and part_dir.startswith("partition=")
        assert date.startswith("date=")
    parts = unique_rows(run)
    assert sorted(parts) == sorted(published)
    for part, part_rows in parts.items():
        bodies = [r["body"] for r in part_rows]
        assert Counter(bodies) == Counter(published[part]), f"partition {part}: loss or strays"
        seqs: dict[str, list[int]] = defaultdict(list)
        for body in bodies:
            key, seq = key_seq(body)
            seqs[key].append(seq)
        for key, got in seqs.items():
            assert got == list(range(len(got))), f"key {key!r} out of storage order"
        ids = [r["internal_id"] for r in part_rows]
        assert all(i >> 50 == part for i in ids)  # cluster mode: partition p's ids at p << 50
        assert ids == list(range(ids[0], ids[0] + len(ids)))  # consecutive: nothing skipped
        assert {r["nsqd"] for r in part_rows} <= set(p.cluster.nsqd_tcp)
        assert len({r["nsqd"] for r in part_rows}) == 1  # its leader
        for r in part_rows:
            assert (r["topic"], r["partition"], r["channel"]) == (topic, part, ARCHIVE_CHANNEL)
            assert r["attempts"] >= 1
            trace = r["trace_id"] or 0
            assert r["id"] == r["internal_id"].to_bytes(8, "big") + trace.to_bytes(8, "big")
        # FIN only after the durable write: every message nsqd had counted as consumed when
        # the first archiver was killed (each partition's confirmed prefix) was on disk.
        confirmed = run.confirmed_at_kill[part]
        assert set(ids[:confirmed]) <= run.at_kill.get(part, set()), f"partition {part}"
    assert sum(run.confirmed_at_kill.values()) > 0  # the kill came after some FINs
    # the archivers' own consume records: a FIN for every archived message, and for no other
    fins = {(r["partition"], r["internal_id"]) for r in _records(run.log) if r["outcome"] == "FIN"}
    assert fins == {(part, r["internal_id"]) for part, rs in parts.items() for r in rs}
    return parts


def test_archive_unordered_partitions_exact_and_durable(pipeline: Pipeline) -> None:
    p = pipeline
    parts = check_archive(p, p.u_archive, p.unordered, p.published.unordered)
    assert {r["nsqd"] for rs in parts.values() for r in rs} == set(p.cluster.nsqd_tcp)
    binaries = [r["body"] for rs in parts.values() for r in rs if r["body"].startswith(b"bin-")]
    assert binaries == [binary_body(i) for i in range(BINARY)]  # exact bytes, in order
    assert set(b"".join(binaries)) == set(range(256))
    # an unordered subscription through lookupd is SUB_ADVANCED without a start (the
    # consumer keeps each partition's confirmed position from it): every row has one
    for rs in parts.values():
        assert all(r["offset"] is not None and r["size"] > len(r["body"]) for r in rs)
        assert len({r["offset"] for r in rs}) == len({r["internal_id"] for r in rs})
    # trace ids: exactly the traced lines carry one, the one their publish receipt gave
    receipts = {r["internal_id"]: r["trace_id"] for r in _records(p.pub_log)}
    traced = {
        r["internal_id"]: r["trace_id"]
        for rs in parts.values()
        for r in rs
        if r["trace_id"] is not None
    }
    assert traced == receipts and len(traced) == TRACED


def test_archive_ordered_four_partitions_on_two_nsqd(pipeline: Pipeline) -> None:
    """An ordered topic is archived without --ordered: archive reads the topic's meta and
    subscribes with SUB_ORDERED; each partition's rows are its queue, offsets and all."""
    p = pipeline
    assert "(ordered topic: SUB_ORDERED" in p.o_archive.stderr, p.o_archive.stderr
    parts = check_archive(p, p.o_archive, p.ordered, p.published.ordered)
    leaders = Counter(rs[0]["nsqd"] for rs in parts.values())
    assert sorted(leaders.values()) == [2, 2]  # four partitions on two nsqd
    for part, rs in parts.items():
        assert [r["body"] for r in rs] == p.published.ordered[part]  # the exact queue
        assert all(r["offset"] is not None and r["size"] > len(r["body"]) for r in rs)
        for prev, cur in itertools.pairwise(rs):
            assert cur["offset"] == prev["offset"] + prev["size"], f"partition {part} gap"


def test_archive_no_ordered_on_an_ordered_topic_is_one_line(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    proc = run_cli(
        [
            "archive",
            pipeline.ordered,
            "--out",
            str(tmp_path / "a"),
            "--no-ordered",
            "--lookupd",
            pipeline.lookupd,
        ]
    )
    line = assert_one_line_error(proc, 1)
    assert "ordered" in line and "--ordered" in line, line


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _replay(p: Pipeline, run: ArchiveRun, to_topic: str, tmp_path: Path, *args: str) -> str:
    """``nsqctl replay`` in-process: it gets the test session's SparkSession."""
    result = invoke(
        "replay",
        str(run.out),
        "--to-topic",
        to_topic,
        "--lookupd",
        p.lookupd,
        "--spark-master",
        TEST_MASTER,
        "--checkpoint",
        str(tmp_path / "ckpt"),
        "--batch-size",
        "25",
        *args,
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return str(result.stdout)


def test_replay_keeps_partition_order_into_an_ordered_topic(
    pipeline: Pipeline,
    spark: Any,  # noqa: F811 - the session's Spark, shared with the CLI run in-process
    tmp_path: Path,
) -> None:
    p = pipeline
    total = sum(map(len, p.published.ordered.values()))
    out = _replay(p, p.o_archive, p.replay_ordered, tmp_path)
    assert f"replayed {total} message(s)" in out  # the kill's duplicates removed
    got = asyncio.run(
        read_messages(
            p.cluster.lookupd_http,
            p.replay_ordered,
            "c",
            total,
            ordered=True,
            max_in_flight=O_PARTITIONS,
        )
    )
    assert Counter(m.body for m in got) == Counter(
        b for bs in p.published.ordered.values() for b in bs
    )
    source = {b: part for part, bs in p.published.ordered.items() for b in bs}
    arrived: dict[int, dict[int, list[bytes]]] = defaultdict(lambda: defaultdict(list))
    for msg in got:  # the ordered consumer's delivery order is each partition's queue order
        assert msg.partition is not None
        arrived[source[msg.body]][msg.partition].append(msg.body)
    for part, bodies in p.published.ordered.items():
        assert len(arrived[part]) == 1, f"source partition {part} split over target partitions"
        assert next(iter(arrived[part].values())) == bodies, f"source partition {part} order"
    assert_storage_order(got)


def assert_storage_order(got: Sequence[Message]) -> None:
    """Delivery order within each target partition is its storage order."""
    last: dict[int, int] = {}
    for msg in got:
        assert msg.partition is not None and msg.internal_id is not None
        assert msg.internal_id > last.get(msg.partition, -1)
        last[msg.partition] = msg.internal_id


def test_replay_shard_field_keeps_key_order(
    pipeline: Pipeline,
    spark: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    p = pipeline
    published = [b for bs in p.published.unordered.values() for b in bs]
    out = _replay(p, p.u_archive, p.replay_keyed, tmp_path, "--shard-field", "k")
    assert f"replayed {len(published)} message(s)" in out
    got = asyncio.run(
        read_messages(
            p.cluster.lookupd_http, p.replay_keyed, "c", len(published), max_in_flight=500
        )
    )
    assert Counter(m.body for m in got) == Counter(published)  # exact bytes, each once
    where: dict[str, set[int]] = defaultdict(set)
    seqs: dict[str, list[int]] = defaultdict(list)
    for part, msgs in by_partition(got).items():  # storage order
        for msg in msgs:
            key, seq = key_seq(msg.body)
            where[key].add(part)
            seqs[key].append(seq)
    assert {k: len(v) for k, v in where.items()} == {k: 1 for k in where}  # a key, a partition
    assert set(where) == {*U_KEYS, "", "t0", "t1", "t2", "t3"}
    for key, got_seqs in seqs.items():
        assert got_seqs == list(range(len(got_seqs))), f"key {key!r} out of order"


def _trace(*args: str) -> dict[str, Any]:
    """``nsqctl trace ARGS --json`` in-process (the test session's SparkSession)."""
    result = invoke("trace", *args, "--json", "--spark-master", TEST_MASTER)
    assert result.exit_code == 0, (result.output, result.exception)
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_trace_joins_publish_log_consume_log_and_archive(
    pipeline: Pipeline,
    spark: Any,  # noqa: F811
) -> None:
    p = pipeline
    archived = unique_rows(p.u_archive)
    once = Counter(r["internal_id"] for r in rows(p.u_archive.out))
    # a traced message archived once (one that the kill made a duplicate would have two
    # archived events, both right)
    receipt = next(r for r in _records(p.pub_log)[5:] if once[r["internal_id"]] == 1)
    iid, tid, part = receipt["internal_id"], receipt["trace_id"], receipt["partition"]
    row = next(r for r in archived[part] if r["internal_id"] == iid)
    hex_id = (iid.to_bytes(8, "big") + tid.to_bytes(8, "big")).hex()
    sources = ["-a", str(p.u_archive.out), "-l", str(p.pub_log), "-l", str(p.consume_log)]

    by_hex = _trace(hex_id, *sources)
    events = by_hex["events"]
    kinds = Counter(e["event"] for e in events)
    assert kinds == {"accepted by nsqd": 1, "published": 1, "delivered, FIN": 1, "archived": 1}
    ev = {e["event"]: e for e in events}
    accepted, published = ev["accepted by nsqd"], ev["published"]
    delivered, on_disk = ev["delivered, FIN"], ev["archived"]
    assert accepted["time"] == row["timestamp"] / 1e9  # the message's own timestamp
    # the publish log: nsqctl pub's PUB_TRACE receipt for this message
    assert (published["detail"]["internal_id"], published["detail"]["trace_id"]) == (iid, tid)
    assert published["where"] == f"{row['nsqd']} {p.unordered} partition {part}"
    # the consume log: nsqctl tail's record on channel tail, acknowledged after output
    assert delivered["where"].startswith(f"{p.unordered}/tail from {row['nsqd']} to 127.0.0.1:")
    assert delivered["detail"]["id"] == hex_id
    assert (delivered["detail"]["partition"], delivered["detail"]["attempts"]) == (part, 1)
    tailed = next(t for t in p.tail if t["internal_id"] == iid)
    assert (tailed["id"], tailed["trace_id"]) == (hex_id, tid)
    # the archive: the row's file, on the archive channel, with the same 16-byte id
    assert on_disk["detail"]["id"] == hex_id
    assert on_disk["detail"]["channel"] == ARCHIVE_CHANNEL
    assert (on_disk["detail"]["internal_id"], on_disk["detail"]["trace_id"]) == (iid, tid)
    file = Path(on_disk["where"].removeprefix("file://"))
    assert file.is_relative_to(p.u_archive.out.resolve()) and f"partition={part}" in str(file)
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)

    # the other id forms find the same message: its trace id, its internal id (per topic)
    assert _trace(str(tid), *sources)["events"] == events
    assert _trace(str(iid), "-i", "--topic", p.unordered, *sources)["events"] == events
    # a 16-byte id is internal id AND trace id: the right internal id with another trace
    # id is another message, not this one
    wrong = (iid.to_bytes(8, "big") + (tid ^ 1).to_bytes(8, "big")).hex()
    missing = invoke("trace", wrong, *sources, "--json", "--spark-master", TEST_MASTER)
    assert missing.exit_code == 1 and f"message id {wrong} not found" in str(missing.exception)

    # live: the partition's leader still holds the message (/message/get by internal id)
    live = _trace(hex_id, "--topic", p.unordered, "--lookupd", p.lookupd, *sources)["events"]
    on_server = [e for e in live if e["event"] == "on server"]
    assert len(on_server) == 1, on_server
    stored = on_server[0]["detail"]["message"]
    assert (stored["id"], stored["trace_id"], stored["body"]) == (iid, tid, row["body"].decode())


def test_archive_stops_in_one_line_when_no_leader_comes_back(
    start_cluster: StartCluster, tmp_path: Path
) -> None:
    """2 nsqd, replicas 2: after kill -9 of the leader no new one is elected (the ISR would
    be 1 of 2). archive waits out --failover-window, keeps what it had on disk, exits 1."""
    import pyarrow.dataset as ds

    c = start_cluster("redesign", nsqd=2)
    topic = unique("arfail")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(1, 2)}, ("nsqctl_archive",)))

    async def publish() -> None:
        async with Producer(lookupd_http=c.lookupd_http) as producer:
            await producer.publish_many(topic, [b"one", b"two"])

    asyncio.run(publish())
    out = tmp_path / "archive"
    proc = subprocess.Popen(
        [
            NSQCTL,
            "archive",
            topic,
            "--out",
            str(out),
            "--lookupd",
            c.lookupd_http[0],
            "--failover-window",
            "6",
            "--rotate-seconds",
            "0.2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    try:

        def archived() -> list[bytes]:
            # a file still being written is a dot-named temporary (renamed when done),
            # which readers leave out as nsqctl's own does
            found = out.rglob("*.parquet") if out.exists() else []
            files = [f for f in found if not f.name.startswith(".")]
            return ds.dataset(files).to_table().column("body").to_pylist() if files else []

        eventually(lambda: sorted(archived()) == [b"one", b"two"], 60, "both lines archived")
        kill_leader(c, topic, 0)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = err.decode()
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("nsqctl: error:")]
    assert len(errors) == 1 and f"no leader for {topic}/0 within the failover window" in errors[0]
    assert f"waiting for a leader for {topic}/0" in stderr
    assert sorted(archived()) == [b"one", b"two"]  # what was archived stays
