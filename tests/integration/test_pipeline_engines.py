"""The local engine (pyarrow, in-process) and Spark give the same answers, row for row.

Archives of both families are made by real ``nsqctl archive`` runs against real servers:
every message is archived twice (two channels into one archive), so de-duplication is
exercised by every replay. The same trace queries (each id form, with the archivers'
and the publisher's trace logs) and the same replay plans (each filter, with and without
``--shard-field``) go through both engines and must agree exactly; then ``nsqctl replay``
with the engine ``auto`` picks (local) publishes to a real nsqd and the messages are read
back. pyarrow/pyspark are imported inside the tests (``-m "not spark"`` leaves them out).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from nsqctl.tracelog import TraceLog
from tests.helpers.cli import NSQCTL, clean_env
from tests.helpers.redesign import TopicSpec, create_topics, read_messages, unique
from tests.helpers.spark import TEST_MASTER, spark  # noqa: F401

pytestmark = pytest.mark.spark

N = 1200
KEYS = 6
CHANNELS = ("arch_a", "arch_b")  # two archivers of one topic: every message twice
TRACED = 24


def body(i: int) -> bytes:
    return json.dumps({"k": f"k{i % KEYS}", "seq": i, "n": {"i": i}}).encode()


@dataclass
class Archive:
    family: str
    cluster: Cluster
    topic: str
    out: Path
    logs: list[str]  # the archivers' consume logs (+ the publisher's on the redesign)
    bodies: list[bytes]


def archive_twice(c: Cluster, topic: str, out: Path) -> list[str]:
    """One archiver per channel into the same archive, both at once (each run ends after
    its idle wait, so two in a row would wait twice); file names are unique per run."""
    logs = [out.parent / f"{out.name}-{channel}.jsonl" for channel in CHANNELS]
    procs = [
        subprocess.Popen(
            [
                NSQCTL,
                "archive",
                topic,
                "--out",
                str(out),
                "-c",
                channel,
                "--lookupd",
                c.lookupd_http[0],
                "--trace-log",
                str(log),
                "--exit-when-idle",
                "2",
                "-q",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
        )
        for channel, log in zip(CHANNELS, logs, strict=True)
    ]
    try:
        for proc in procs:
            _out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return [str(log) for log in logs]


@pytest.fixture(scope="module")
def original(
    original_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Archive]:
    c = original_cluster
    topic = unique("eng_o").replace("-", "_")
    for http in c.nsqd_http:  # both channels before the publish: each gets every message
        httpx.post(f"http://{http}/topic/create", params={"topic": topic}).raise_for_status()
        for channel in CHANNELS:
            httpx.post(
                f"http://{http}/channel/create", params={"topic": topic, "channel": channel}
            ).raise_for_status()
    bodies = [body(i) for i in range(N)]

    async def publish() -> None:  # both nsqd, alternating batches: ids repeat across nodes
        async with contextlib.AsyncExitStack() as stack:
            producers = [
                await stack.enter_async_context(Producer(nsqd_tcp=[addr])) for addr in c.nsqd_tcp
            ]
            for n, start in enumerate(range(0, N, 100)):
                await producers[n % 2].publish_many(topic, bodies[start : start + 100])

    asyncio.run(publish())
    out = tmp_path_factory.mktemp("engines-original") / "archive"
    yield Archive("original", c, topic, out, archive_twice(c, topic, out), bodies)


@pytest.fixture(scope="module")
def redesign(
    redesign_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Archive]:
    c = redesign_cluster
    topic = unique("eng-r")
    base = tmp_path_factory.mktemp("engines-redesign")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2)}, CHANNELS))
    bodies = [body(i) for i in range(N)]

    async def publish() -> None:
        async with Producer(lookupd_http=c.lookupd_http) as producer:
            for start in range(0, N, 50):
                key = f"k{start // 50 % KEYS}"
                await producer.publish_many(topic, bodies[start : start + 50], shard_key=key)

    asyncio.run(publish())
    traced = [body(N + i) for i in range(TRACED)]
    pub_log = base / "pub.jsonl"

    async def publish_traced() -> None:  # PUB_TRACE, receipts in a publish trace log
        log = TraceLog(pub_log)
        try:
            async with Producer(lookupd_http=c.lookupd_http) as producer:
                for i, b in enumerate(traced):
                    key = f"k{i % KEYS}"
                    log.publish(await producer.publish_traced(topic, b, 5000 + i, shard_key=key))
        finally:
            log.close()

    asyncio.run(publish_traced())
    out = base / "archive"
    logs = [*archive_twice(c, topic, out), str(pub_log)]
    yield Archive("redesign", c, topic, out, logs, bodies + traced)


@pytest.fixture(params=["original", "redesign"])
def archive(request: pytest.FixtureRequest) -> Archive:
    chosen: Archive = request.getfixturevalue(request.param)
    return chosen


def archived_rows(a: Archive) -> list[dict[str, Any]]:
    import pyarrow.dataset as ds

    table = ds.dataset(a.out, format="parquet", partitioning="hive").to_table()
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def id_forms(a: Archive, row: dict[str, Any]) -> list[tuple[str, ...]]:
    """Every way to ask for this row's message: (ID, trace's flags...)."""
    iid = row["internal_id"] % (1 << 64)
    forms: list[tuple[str, ...]] = [(str(iid), "-i"), (str(iid), "-i", "--topic", a.topic)]
    if a.family == "original":
        forms.append((row["id"].decode(),))
    else:
        forms.append((row["id"].hex(),))
        if row["trace_id"]:
            forms.append((str(row["trace_id"] % (1 << 64)),))
    return forms


def test_trace_same_events_from_both_engines(archive: Archive, spark: Any) -> None:  # noqa: F811
    from nsqctl.pipeline import trace as tr
    from nsqctl.pipeline.local import LocalReader

    rows = archived_rows(archive)
    assert len(rows) == 2 * len(archive.bodies)  # two channels: every message twice
    picks = [rows[0], rows[len(rows) // 2], rows[-1]]
    picks += [r for r in rows if r["trace_id"]][:2]
    if archive.family == "redesign":
        assert any(r["trace_id"] for r in picks), "no traced message archived"
    compared = 0
    for row in picks:
        for form in id_forms(archive, row):
            ident, *flags = form
            topic = flags[flags.index("--topic") + 1] if "--topic" in flags else None
            q = tr.parse_query(ident, internal="-i" in flags, topic=topic)
            local = tr.gather(LocalReader(), q, [str(archive.out)], archive.logs, [])
            remote = tr.gather(spark, q, [str(archive.out)], archive.logs, [])
            assert local == remote, (form, local, remote)
            on_disk = [e for e in local if e["event"] == "archived"]
            assert {e["detail"]["channel"] for e in on_disk} == set(CHANNELS), form
            assert all(e["detail"]["internal_id"] == row["internal_id"] for e in on_disk)
            delivered = [e for e in local if e["event"] == "delivered, FIN"]
            # the archivers' consume logs: they hold an original id as its hex text only
            by_log = archive.family == "redesign" or "-i" not in flags
            # (an original id is unique per nsqd only: both nsqd may have used it)
            assert len(delivered) == (len(on_disk) if by_log else 0), form
            assert len(on_disk) % len(CHANNELS) == 0 and on_disk, form
            compared += 1
    # one date directory given as the archive (no date column: its bounds are left out)
    row = picks[1]
    day_dir = next(archive.out.rglob(f"partition={row['partition']}/date=*"))
    ident = row["id"].decode() if archive.family == "original" else row["id"].hex()
    q = tr.parse_query(ident)
    local = tr.gather(LocalReader(), q, [str(day_dir)], [], [])
    assert local == tr.gather(spark, q, [str(day_dir)], [], [])
    assert len([e for e in local if e["event"] == "archived"]) >= len(CHANNELS)
    q = tr.parse_query("0" * 15 + "1")  # an id nobody has
    assert tr.gather(LocalReader(), q, [str(archive.out)], archive.logs, []) == []
    assert tr.gather(spark, q, [str(archive.out)], archive.logs, []) == []
    print(f"{archive.family}: {compared} trace queries agree")


def replay_filters(a: Archive) -> list[tuple[str, Any, str | None]]:
    from nsqctl.pipeline.selection import ReplayFilters

    stamps = sorted(r["timestamp"] for r in archived_rows(a))
    mid, late = stamps[len(stamps) // 3], stamps[2 * len(stamps) // 3]
    cases = [
        ("everything", ReplayFilters(), None),
        ("--since/--until", ReplayFilters(since_ns=mid, until_ns=late), None),
        ("--topic", ReplayFilters(topics=[a.topic]), None),
        ("--topic (other)", ReplayFilters(topics=["nope"]), None),
        ("--grep", ReplayFilters(grep=r'"k": "k[13]"'), None),
        ("--shard-field k", ReplayFilters(), "k"),
        ("--shard-field n.i + --grep", ReplayFilters(grep="seq"), "n.i"),
    ]
    if a.family == "redesign":
        traced = next(r["trace_id"] for r in archived_rows(a) if r["trace_id"])
        cases += [
            ("--partition", ReplayFilters(partitions=[1]), None),
            ("--trace-id", ReplayFilters(trace_id=traced % (1 << 64)), None),
        ]
    else:
        cases.append(("--partition -1", ReplayFilters(partitions=[-1]), None))
    return cases


def test_replay_same_plan_from_both_engines(archive: Archive, spark: Any) -> None:  # noqa: F811
    from nsqctl.pipeline import local
    from nsqctl.pipeline import replay as job
    from nsqctl.pipeline.selection import ReplayFilters

    for name, filters, shard_field in replay_filters(archive):
        planned = local.archive_plan(str(archive.out), filters, shard_field)
        raw, ordered = job.archive_frame(spark, str(archive.out), filters, shard_field)
        spark_rows = sorted((k, a, b, c, bytes(d)) for k, a, b, c, d in ordered.collect())
        local_rows = list(planned.rows())
        assert local_rows == sorted(local_rows), name  # the local plan is in publish order
        assert local_rows == spark_rows, name
        assert planned.counts() == job.dry_run(raw, ordered), name
    everything = local.archive_plan(str(archive.out), ReplayFilters(), None).counts()
    assert everything["duplicates"] == everything["to_publish"] == len(archive.bodies)
    assert everything["keys"] == 2  # two nsqd (original), two partitions (redesign)


def test_cli_replay_auto_is_local_and_keeps_order(archive: Archive, tmp_path: Path) -> None:
    c = archive.cluster
    to_topic = unique("eng_replayed").replace("-", "_")
    if archive.family == "redesign":
        asyncio.run(create_topics(c.lookupd_http, {to_topic: TopicSpec(partitions=1)}, ("c",)))
        target = ["--lookupd", c.lookupd_http[0]]
    else:
        target = ["--nsqd", c.nsqd_tcp[0]]
    proc = subprocess.run(
        [
            NSQCTL,
            "replay",
            str(archive.out),
            "--to-topic",
            to_topic,
            *target,
            "--checkpoint",
            str(tmp_path / "ckpt"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert "replay: engine local (" in proc.stderr and "below" in proc.stderr, proc.stderr
    assert f"replayed {len(archive.bodies)} message(s)" in proc.stdout, proc.stdout
    lookupd = c.lookupd_http if archive.family == "redesign" else []
    if lookupd:
        got = asyncio.run(read_messages(lookupd, to_topic, "c", len(archive.bodies)))
    else:
        got = asyncio.run(
            read_messages([], to_topic, "c", len(archive.bodies), nsqd_tcp=[c.nsqd_tcp[0]])
        )
    bodies = [m.body for m in got]
    assert Counter(bodies) == Counter(archive.bodies)  # each once: duplicates removed
    # per source partition (per source nsqd on the original) in the order it was stored
    source: dict[bytes, tuple[int, str]] = {}
    for row in archived_rows(archive):
        source[row["body"]] = (row["partition"], row["nsqd"] if row["partition"] < 0 else "")
    seqs: dict[tuple[int, str], list[int]] = defaultdict(list)
    for b in bodies:
        seqs[source[b]].append(json.loads(b)["seq"])
    assert len(seqs) == 2
    for key, values in seqs.items():
        assert values == sorted(values), f"source {key} out of order"


def test_cli_trace_auto_is_local_without_pyspark_and_fits_80_columns(archive: Archive) -> None:
    """``nsqctl trace ID --archive A`` as the issue ran it: the local engine, no pyspark
    imported (so no JVM), and a timeline that reads at 80 columns."""
    import sys

    row = archived_rows(archive)[7]
    ident = row["id"].decode() if archive.family == "original" else row["id"].hex()
    argv = [
        sys.executable,
        "-X",
        "importtime",
        NSQCTL,
        "trace",
        ident,
        "--archive",
        str(archive.out),
        "-v",
        *(a for log in archive.logs for a in ("-l", log)),
    ]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env({"COLUMNS": "80"}),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "trace: engine local (" in proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "pyarrow.dataset" in imported
    assert not {m for m in imported if m.split(".")[0] in ("pyspark", "py4j")}
    lines = proc.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [ln for ln in lines if len(ln) > 80]
    assert lines[0].startswith(f"timeline of message id {ident} (UTC")
    assert any(ident in line for line in lines[1:])  # the id, whole, in the details
    files = [line.split()[-1] for line in lines if line.startswith("    file ")]
    assert len(files) >= len(CHANNELS) and all(f.endswith(".parquet") for f in files)


def test_text_replay_same_plan_from_both_engines(spark: Any, tmp_path: Path) -> None:  # noqa: F811
    """nsq_to_file text, per file and per ``--shard-field`` value (absent or not JSON: the
    empty key), planned alike by both engines, each key's lines in the order nsq_to_file
    wrote them (its names sort revision before hour: text order would be wrong)."""
    from nsqctl.pipeline import local
    from nsqctl.pipeline import replay as job
    from nsqctl.pipeline.selection import ReplayFilters

    first, then = "t.h-000001.2026-11-29_10.log", "t.h-000000.2026-11-29_11.log"
    (tmp_path / first).write_bytes(b"".join(body(i) + b"\n" for i in range(40)) + b"raw\n")
    (tmp_path / then).write_bytes(b"".join(body(i) + b"\n" for i in range(40, 70)))
    for shard_field in (None, "k", "n.i"):
        planned = local.text_plan(str(tmp_path), ReplayFilters(grep="seq|raw"), shard_field)
        raw, ordered = job.text_frame(
            spark, str(tmp_path), ReplayFilters(grep="seq|raw"), shard_field
        )
        spark_rows = sorted((k, a, b, c, bytes(d)) for k, a, b, c, d in ordered.collect())
        local_rows = list(planned.rows())
        assert local_rows == sorted(local_rows), shard_field  # in publish order
        assert local_rows == spark_rows, shard_field
        assert planned.counts() == job.dry_run(raw, ordered), shard_field
    keys = {None: 2, "k": KEYS + 1, "n.i": 71}
    for shard_field, n in keys.items():
        assert local.text_plan(str(tmp_path), ReplayFilters(), shard_field).counts()["keys"] == n
    seqs: dict[str, list[int]] = {}
    for key, *_, line in local.text_plan(str(tmp_path), ReplayFilters(grep="seq"), "k").rows():
        seqs.setdefault(key, []).append(json.loads(line)["seq"])
    assert len(seqs) == KEYS and all(s == sorted(s) for s in seqs.values()), seqs
