# ruff: noqa: E402
"""Archive → replay → trace on real servers and real Spark (local mode).

One private original cluster (short msg_timeout, so messages held by a killed archiver
come back quickly; large memory queues, so nsqd itself keeps FIFO order) serves the
module; one SparkSession serves the test session.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# the spark extra (pyspark, pyarrow), imported outright: without it this module fails to
# collect rather than skip. The core install's run (`pytest -m "not spark"`) leaves it
# out (tests/conftest.py, SPARK_ONLY_MODULES).
pytestmark = pytest.mark.spark
import pyarrow.dataset as ds

from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.message import Message
from nsqctl.pipeline import replay as job
from nsqctl.pipeline import trace as tr
from nsqctl.pipeline.selection import ReplayFilters
from nsqctl.producer import Producer
from nsqctl.servers import cluster
from tests.helpers.cli import NSQCTL
from tests.helpers.spark import TEST_MASTER, spark, spark_defaults  # noqa: F401
from tests.helpers.wait import eventually

N_MESSAGES = 10_000  # a multiple of KEYS: the --grep dry run counts N_MESSAGES // KEYS
KEYS = 16
#: the first archiver is killed once this many rows are on disk (surely mid-way: its small
#: window FINs a file's messages only after the file is written)
ROWS_AT_KILL = N_MESSAGES // 10


@dataclass
class Archived:
    cluster: cluster.Cluster
    topic: str
    out: Path
    trace_log: Path
    bodies: list[bytes]
    rows_at_kill: int
    first_max_in_flight: int


def _body(i: int) -> bytes:
    return json.dumps({"k": f"k{i % KEYS}", "seq": i, "pad": "x" * 60}).encode()


def _rows(out: Path) -> int:
    if not any(out.rglob("*.parquet")):
        return 0
    rows: int = ds.dataset(out, format="parquet", partitioning="hive").count_rows()
    return rows


def _archive_cmd(a_topic: str, out: Path, lookupd: str, log: Path, *extra: str) -> list[str]:
    return [
        NSQCTL,
        "archive",
        a_topic,
        "--out",
        str(out),
        "--lookupd",
        lookupd,
        "--trace-log",
        str(log),
        "-q",
        *extra,
    ]


@pytest.fixture(scope="module")
def archived(original_bins: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Archived]:
    base = tmp_path_factory.mktemp("pipeline")
    c = cluster.start(
        "original",
        base / "cluster",
        nsqd=2,
        bin_dir=original_bins,
        nsqd_args=["--msg-timeout=4s", "--mem-queue-size=200000"],
    )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        topic = f"arch_{uuid.uuid4().hex[:8]}"
        bodies = [_body(i) for i in range(N_MESSAGES)]

        async def publish() -> None:
            async with Producer(lookupd_http=c.lookupd_http) as producer:
                for start in range(0, N_MESSAGES, 500):  # sequential: timestamps follow seq
                    await producer.publish_many(topic, bodies[start : start + 500])

        asyncio.run(publish())
        out, log, lk = base / "archive", base / "archive-trace.jsonl", c.lookupd_http[0]
        # First run: small window, so it is surely mid-way when killed.
        first = subprocess.Popen(
            _archive_cmd(topic, out, lk, log, "--max-in-flight", "100", "--rotate-seconds", "0.3")
        )
        procs.append(first)
        eventually(
            lambda: _rows(out) >= ROWS_AT_KILL, 300, f"the first archiver's {ROWS_AT_KILL} rows"
        )
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        rows_at_kill = _rows(out)
        second = subprocess.Popen(_archive_cmd(topic, out, lk, log, "--rotate-seconds", "0.5"))
        procs.append(second)
        wanted = set(bodies)

        def complete() -> bool:
            if _rows(out) < N_MESSAGES:
                return False
            table = ds.dataset(out, format="parquet", partitioning="hive").to_table(["body"])
            return wanted <= set(table.column("body").to_pylist())

        eventually(complete, 600, "every published message in the archive")
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
        yield Archived(c, topic, out, log, bodies, rows_at_kill, 100)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        c.stop()


def test_archive_after_kill_9_loses_nothing(archived: Archived) -> None:
    table = ds.dataset(archived.out, format="parquet", partitioning="hive").to_table()
    bodies = table.column("body").to_pylist()
    counts = Counter(bodies)
    assert set(counts) == set(archived.bodies)  # nothing lost, nothing foreign
    keys = Counter(
        zip(table.column("nsqd").to_pylist(), table.column("internal_id").to_pylist(), strict=True)
    )
    duplicates = sum(n - 1 for n in keys.values())
    # Only messages in flight at the kill (≤ max-in-flight) can be archived twice.
    assert duplicates == len(bodies) - len(archived.bodies)
    assert duplicates <= archived.first_max_in_flight
    assert archived.rows_at_kill < N_MESSAGES
    assert set(table.column("partition").to_pylist()) == {-1}
    assert not list(archived.out.rglob(".tmp-*"))
    dirs = {p.parent.relative_to(archived.out).parts[:2] for p in archived.out.rglob("*.parquet")}
    assert dirs == {(f"topic={archived.topic}", "partition=-1")}
    print(f"archive: {len(bodies)} rows, {duplicates} duplicate(s) after kill -9")


async def _consume(lookupd: list[str], topic: str, expect: int) -> list[bytes]:
    got: list[bytes] = []
    done = asyncio.Event()

    def handler(msg: Message) -> None:
        got.append(msg.body)
        if len(got) >= expect:
            done.set()

    async with Consumer(
        topic, "check", handler, lookupd_http=lookupd, options=ConsumerOptions(max_in_flight=2000)
    ):
        async with asyncio.timeout(300):
            await done.wait()
        await asyncio.sleep(0.5)  # anything extra (a duplicate) would show up now
    return got


def test_replay_archive_keeps_bodies_and_key_order(
    archived: Archived,
    spark: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    assert spark.sparkContext.master == TEST_MASTER  # the requested master is the one used
    to_topic = f"replayed_{uuid.uuid4().hex[:8]}"
    _raw, ordered = job.archive_frame(spark, str(archived.out), ReplayFilters(), "k")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    target = job.ReplayTarget(to_topic, lookupd=archived.cluster.lookupd_http, batch_size=300)
    result = job.run_replay(job.plan(ordered, 4), target, str(ckpt))
    assert result.published == N_MESSAGES and result.skipped == 0
    got = asyncio.run(_consume(archived.cluster.lookupd_http, to_topic, N_MESSAGES))
    assert sorted(got) == sorted(archived.bodies)  # every body once: duplicates removed
    seqs: dict[str, list[int]] = defaultdict(list)
    for body in got:
        doc = json.loads(body)
        seqs[doc["k"]].append(doc["seq"])
    assert len(seqs) == KEYS
    for key, values in seqs.items():
        assert values == sorted(values), f"key {key} out of order"
    # Resume: the checkpoint says everything was acknowledged; nothing is re-sent.
    again = job.run_replay(job.plan(ordered, 4), target, str(ckpt))
    assert (again.published, again.skipped) == (0, N_MESSAGES)


def test_replay_filters_and_text_input(archived: Archived, spark: Any, tmp_path: Path) -> None:  # noqa: F811
    f = ReplayFilters(grep='"k": "k3"', where="attempts >= 1")
    raw, ordered = job.archive_frame(spark, str(archived.out), f, None)
    counts = job.dry_run(raw, ordered)
    assert counts["to_publish"] == N_MESSAGES // KEYS
    # nsq_to_file output: a gzip file and a plain one, order per file kept.
    import gzip

    (tmp_path / "t.log").write_bytes(b"".join(b"plain-%05d\n" % i for i in range(300)))
    with gzip.open(tmp_path / "t2.log.gz", "wb") as fh:
        fh.write(b"".join(b"gz-%05d\n" % i for i in range(200)))
    assert job.is_text_source(str(tmp_path))
    _, text = job.text_frame(spark, str(tmp_path), ReplayFilters())
    to_topic = f"fromtext_{uuid.uuid4().hex[:8]}"
    target = job.ReplayTarget(to_topic, lookupd=archived.cluster.lookupd_http, batch_size=50)
    assert job.run_replay(job.plan(text, 2), target, None).published == 500
    got = asyncio.run(_consume(archived.cluster.lookupd_http, to_topic, 500))
    plain = [b for b in got if b.startswith(b"plain")]
    gz = [b for b in got if b.startswith(b"gz")]
    assert plain == [b"plain-%05d" % i for i in range(300)]
    assert gz == [b"gz-%05d" % i for i in range(200)]


def test_trace_timeline_from_trace_log_and_archive(archived: Archived, spark: Any) -> None:  # noqa: F811
    table = ds.dataset(archived.out, format="parquet", partitioning="hive").to_table(["id", "body"])
    msg_id = table.column("id")[1234].as_py().decode()
    query = tr.parse_query(msg_id, topic=archived.topic)
    events = tr.gather(spark, query, [str(archived.out)], [str(archived.trace_log)], [])
    kinds = [e["event"] for e in events]
    assert "accepted by nsqd" in kinds
    assert "delivered, FIN" in kinds  # the archiver's consume record (written after fsync)
    assert "archived" in kinds
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    assert kinds.index("accepted by nsqd") < kinds.index("archived")
    archived_ev = next(e for e in events if e["event"] == "archived")
    assert archived_ev["detail"]["id"] == msg_id and archived_ev["where"].endswith(".parquet")


def test_cli_replay_dry_run_and_trace_not_found(archived: Archived, tmp_path: Path) -> None:
    """Two CLI runs, each its own Spark driver. They only read the archive, so they run
    side by side: most of each is a JVM start and a one-core (local[1]) job."""
    conf = spark_defaults(tmp_path / "spark-conf")  # the test JVM options (FAST_JVM)
    env = dict(os.environ, NSQCTL_SPARK_MEMORY="512m", SPARK_CONF_DIR=str(conf))
    replay = subprocess.Popen(
        [
            NSQCTL,
            "replay",
            str(archived.out),
            "--to-topic",
            "never_written",
            "--dry-run",
            "--spark-master",
            "local[1]",
            "--lookupd",
            archived.cluster.lookupd_http[0],
            "--grep",
            '"k": "k5"',
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    trace = subprocess.Popen(
        [
            NSQCTL,
            "trace",
            "987654321",
            "--archive",
            str(archived.out),
            "--trace-log",
            str(archived.trace_log),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env, SPARK_MASTER="local[1]"),
    )
    try:
        out, err = replay.communicate(timeout=600)
        assert replay.returncode == 0, err
        assert "spark master local[1]" in err
        assert f"{N_MESSAGES // KEYS} to publish" in out
        _, err = trace.communicate(timeout=600)
        assert trace.returncode == 1
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "trace id 987654321 not found" in lines[0], err
    finally:
        for proc in (replay, trace):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
