"""Pipeline benchmark: archive throughput on both NSQ families, replay throughput with
``local[1]``, ``local[2]`` and a 2-worker Spark standalone cluster, and trace latency on
archives of 20k, 1M and 10M messages (Spark, and the in-process engine when nsqctl has one).

    python -m bench.bench_pipeline           # archives 300k, replay 1M, trace up to 10M
    python -m bench.bench_pipeline --quick   # a smoke run: small sizes everywhere
    python -m bench.bench_pipeline --trace-rows 20000,1000000 --skip archive

Replay and trace run as the ``nsqctl`` command a user types (a fresh process each, the JVM
start included: that is what an operator waits for); replay is checked against nsqd's
``message_count`` of the target topic, trace against the archived row it must find.
Archives for replay and trace are written straight with the archive writer's Parquet layout
(not through nsqd: 10M messages through nsqd would measure nsqd). The standalone cluster
(tests/helpers/spark_standalone.py) runs on 127.0.0.1 with 1 core per worker; Spark's event
log says how many tasks each worker's executor ran. Servers and the cluster are stopped by
PID; everything lives in one temp dir, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import _common as c
from bench import bench_cli
from nsqctl.pipeline.archiver import ArchiveOptions, Archiver, ArchiveStats
from nsqctl.pipeline.rotation import RotationPolicy
from nsqctl.pipeline.schema import ARCHIVE_SCHEMA, OfflineMessage, internal_id_from_hex
from nsqctl.pipeline.writer import ArchiveBuffer, ArchiveWriter, write_parquet
from nsqctl.protocol.raw_message import RawMessage

BODY = b"x" * 100
#: Distinct source nsqd addresses in generated archives: replay keeps order per source
#: (topic, partition, nsqd), so its parallelism is at most this many keys.
SOURCES = 16
FILE_ROWS = 500_000  # rows per generated Parquet file (~ the archiver's 64 MB rotation)
GUID_TWEPOCH = 1288834974288  # nsqd/guid.go's epoch, in its 2**20 ns units
SECTIONS = ("archive", "replay", "trace")


@dataclass
class Settings:
    writer_rows: int
    archive_rows: int
    replay_rows: int
    trace_rows: list[int]
    repeats: int
    skip: list[str]


# --------------------------------------------------------------------------- archives


def synthetic_archive(out: Path, rows: int, rotate_rows: int = 100_000) -> float:
    """The archive writer alone: ``rows`` 100-byte messages with fsync per file; msgs/s.

    The messages exist before the clock starts (a consumer makes them); buffering them,
    building the columns and writing durably is what is timed.
    """
    writer = ArchiveWriter(out)
    ts = time.time_ns()
    msgs = [
        OfflineMessage(
            RawMessage(ts + i, 1, b"%016x" % i, BODY, offset=i * 130, size=130),
            "bench",
            "ch",
            i % 4,
            "127.0.0.1:4150",
        )
        for i in range(rows)
    ]
    started = time.perf_counter()
    buf: ArchiveBuffer[OfflineMessage] = ArchiveBuffer()
    for msg in msgs:
        buf.add(msg)
        if buf.rows >= rotate_rows:
            writer.write(buf)
            buf = ArchiveBuffer()
    writer.write(buf)
    return rows / (time.perf_counter() - started)


def nsqd_guid(ts_ns: int, node: int, seq: int) -> int:
    """An id as nsqio's nsqd makes it (nsqd/guid.go): time in 2**20 ns units since its
    epoch, 10 node bits, a 12-bit sequence; trace relies on the time inside it."""
    return (((ts_ns >> 20) - GUID_TWEPOCH) << 22) | (node << 12) | (seq & 0xFFF)


def generated_archive(out: Path, rows: int) -> bytes:
    """An original-family archive of ``rows`` messages, 1 µs apart, from ``SOURCES`` nsqd,
    with real-looking nsqd ids, written file by file with the writer's own Parquet settings
    (sorted, small row groups, bloom filters); returns the message id trace looks up (the
    middle row's, or the next one whose hex has a letter: an all-digit id reads as a
    decimal trace id on trace's command line)."""
    import pyarrow as pa

    noon = dt.datetime.combine(dt.datetime.now(dt.UTC).date(), dt.time(12), dt.UTC)
    ts0 = int(noon.timestamp()) * 1_000_000_000  # every row on one date, whatever the hour
    directory = out / "topic=bench" / "partition=-1" / f"date={noon.date().isoformat()}"
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    wanted = None
    for first in range(0, rows, FILE_ROWS):
        n = min(FILE_ROWS, rows - first)
        pos = range(first, first + n)
        stamps = [ts0 + i * 1000 for i in pos]
        hex_ids = [
            b"%016x" % nsqd_guid(t, i % SOURCES, i // SOURCES)
            for t, i in zip(stamps, pos, strict=True)
        ]
        if wanted is None and first + n > rows // 2:
            wanted = next(h for h in hex_ids[rows // 2 - first :] if not h.isdigit())
        cols: dict[str, Any] = {
            "topic": ["bench"] * n,
            "partition": [-1] * n,
            "channel": ["bench"] * n,
            "nsqd": [f"127.0.0.1:{4150 + i % SOURCES}" for i in pos],
            "internal_id": [internal_id_from_hex(h) for h in hex_ids],
            "trace_id": [None] * n,
            "id": hex_ids,
            "timestamp": stamps,
            "attempts": [1] * n,
            "offset": [None] * n,
            "size": [None] * n,
            "ext": [None] * n,
            "body": [BODY] * n,
            "archived_at": [now] * n,
        }
        table = pa.table(
            [pa.array(cols[f.name], type=f.type) for f in ARCHIVE_SCHEMA], schema=ARCHIVE_SCHEMA
        )
        write_parquet(table, str(directory / f"part-{first // FILE_ROWS:05d}.parquet"))
    assert wanted is not None
    return wanted


def end_to_end(
    cluster: c.Cluster,
    out: Path,
    topic: str,
    n: int,
    *,
    nsqd: Sequence[str] = (),
    lookupd: Sequence[str] = (),
) -> float:
    """Time an archiver draining ``n`` messages already in ``topic``'s channel ``bench``
    (msgs/s): from its start until the last one is on disk and FINed (the idle wait and
    shutdown are not counted)."""
    opts = ArchiveOptions(
        topic,
        "bench",
        out,
        max_in_flight=5000,
        policy=RotationPolicy(max_rows=2500, max_age=1.0),
        exit_when_idle=1.0,
        nsqd=list(nsqd),
        lookupd=list(lookupd),
    )
    finished: list[float] = []

    def progress(stats: ArchiveStats) -> None:
        if stats.written >= n and not finished:
            finished.append(time.perf_counter())

    async def run() -> ArchiveStats:
        return await Archiver(opts, progress).run(asyncio.Event())

    started = time.perf_counter()
    stats = asyncio.run(run())
    if stats.written < n or not finished:
        raise SystemExit(f"archive of {topic} wrote {stats.written} of {n} rows")
    return n / (finished[0] - started)


def archive_original(tmp: Path, n: int, repeats: int) -> list[float]:
    with c.nsqd_cluster("original") as cluster:
        rates = []
        for _ in range(repeats):
            topic = c.unique_topic("bench_arch")
            c.create_channel(cluster.nsqd_http[0], topic, "bench")
            c.prefill(cluster.nsqd_tcp[0], cluster.nsqd_http[0], topic, n, len(BODY))
            out = tmp / "e2e-original"
            rates.append(end_to_end(cluster, out, topic, n, nsqd=cluster.nsqd_tcp))
            shutil.rmtree(out, ignore_errors=True)
            c.delete_topic(cluster.nsqd_http[0], topic)
        return rates


def archive_redesign(tmp: Path, n: int, repeats: int) -> list[float]:
    """A 2-partition topic (replicas 1) on two youzan nsqd, channel made before the
    publish (a youzan channel starts at the end of its topic)."""
    from tests.helpers.redesign import TopicSpec, create_topics

    with c.nsqd_cluster("redesign", nsqd=2) as cluster:
        rates = []
        for _ in range(repeats):
            topic = c.unique_topic("bench_arch")
            specs = {topic: TopicSpec(2, 1)}
            asyncio.run(create_topics(cluster.lookupd_http, specs, ("bench",)))
            c.publish_bodies(topic, n, len(BODY), lookupd_http=cluster.lookupd_http)
            out = tmp / "e2e-redesign"
            rates.append(end_to_end(cluster, out, topic, n, lookupd=cluster.lookupd_http))
            shutil.rmtree(out, ignore_errors=True)
        return rates


# --------------------------------------------------------------------------- commands


def engine_flag(command: str) -> bool:
    """Whether ``nsqctl COMMAND`` has ``--engine`` (the in-process engine)."""
    out = subprocess.run(
        [bench_cli.nsqctl_exe(), command, "--help"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    ).stdout
    return "--engine" in out


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NSQCTL_", "SPARK_"))}
    env.update(extra or {})
    return env


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    elapsed = time.perf_counter() - started
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[1:3])} failed ({r.returncode}): {r.stderr.strip()}")
    return elapsed, r


@dataclass
class Run:
    name: str
    seconds: float
    rows: int
    verified: bool
    note: str = ""


def replay(
    name: str,
    archive: Path,
    cluster: c.Cluster,
    rows: int,
    tmp: Path,
    flags: list[str],
    env: dict[str, str],
) -> Run:
    """``nsqctl replay`` of the archive into a fresh topic; checked by nsqd's count."""
    topic = c.unique_topic("bench_replay")
    cmd = [
        bench_cli.nsqctl_exe(),
        "replay",
        str(archive),
        "--to-topic",
        topic,
        "--nsqd",
        cluster.nsqd_tcp[0],
        "--batch-size",
        "500",
        "-q",
        "--checkpoint",
        str(tmp / f"ckpt-{topic}"),
        *flags,
    ]
    seconds, r = _run(cmd, _env({"NSQCTL_STATE_DIR": str(tmp / "state"), **env}))
    stats = c.topic_stats(cluster.nsqd_http[0], topic)
    verified = stats is not None and stats.message_count == rows
    c.delete_topic(cluster.nsqd_http[0], topic)
    tasks = re.search(r"over (\d+) task", r.stdout)
    return Run(name, seconds, rows, verified, f"{tasks.group(1)} task(s)" if tasks else "")


def trace(name: str, archive: Path, msg_id: bytes, rows: int, flags: list[str]) -> Run:
    """``nsqctl trace ID --archive A``: must find exactly the archived row."""
    cmd = [
        bench_cli.nsqctl_exe(),
        "trace",
        msg_id.decode(),
        "--archive",
        str(archive),
        "--json",
        *flags,
    ]
    seconds, r = _run(cmd, _env())
    events = json.loads(r.stdout)["events"]
    found = [e["detail"].get("id") for e in events if e["event"] == "archived"]
    return Run(name, seconds, rows, found == [msg_id.decode()])


# --------------------------------------------------------------------------- sections


def bench_archive(s: Settings, tmp: Path) -> list[dict[str, Any]]:
    """Median msgs/s of ``repeats`` runs per variant."""
    rates = []
    for _ in range(s.repeats):
        c.say(f"archive writer alone: {s.writer_rows} rows")
        rates.append(synthetic_archive(tmp / "w", s.writer_rows))
        shutil.rmtree(tmp / "w", ignore_errors=True)
    rows = [
        {
            "what": f"archive writer alone ({s.writer_rows:,} x 100 B, fsync per 100k)",
            "msgs_per_s": c.median(rates),
            "runs": rates,
            "verified": True,
        }
    ]
    for family, fn in (("original", archive_original), ("redesign", archive_redesign)):
        c.say(f"archive end to end, {family}: {s.archive_rows} messages x {s.repeats}")
        rates = fn(tmp, s.archive_rows, s.repeats)
        where = "1 nsqd" if family == "original" else "2 nsqd, 2-partition topic"
        rows.append(
            {
                "what": f"archive end to end, {family} ({where}, {s.archive_rows:,})",
                "msgs_per_s": c.median(rates),
                "runs": rates,
                "verified": True,
            }
        )
    return rows


@contextlib.contextmanager
def standalone(tmp: Path) -> Iterator[Any]:
    from tests.helpers import spark_standalone as sa

    c.say("starting a Spark standalone master + 2 workers (1 core each) on 127.0.0.1")
    cluster = sa.start(tmp / "spark-standalone")
    try:
        yield cluster
    finally:
        left = cluster.stop()
        c.say(f"stopped the standalone cluster{f'; STILL RUNNING: {left}' if left else ''}")


def bench_replay(s: Settings, tmp: Path) -> list[dict[str, Any]]:
    from tests.helpers import spark_standalone as sa

    archive = tmp / "replay-archive"
    c.say(f"replay: writing an archive of {s.replay_rows} rows")
    generated_archive(archive, s.replay_rows)
    engine = ["--engine", "spark"] if engine_flag("replay") else []
    runs: list[Run] = []
    with c.nsqd_cluster("original") as nsq:
        for _ in range(s.repeats):
            for master in ("local[1]", "local[2]"):
                c.say(f"replay {s.replay_rows} with {master}")
                runs.append(
                    replay(
                        f"replay, Spark {master}",
                        archive,
                        nsq,
                        s.replay_rows,
                        tmp,
                        [*engine, "--spark-master", master],
                        {},
                    )
                )
            if engine:
                c.say(f"replay {s.replay_rows} with the local engine")
                runs.append(
                    replay(
                        "replay, local engine",
                        archive,
                        nsq,
                        s.replay_rows,
                        tmp,
                        ["--engine", "local"],
                        {},
                    )
                )
        with standalone(tmp) as spark:
            for i in range(s.repeats):
                c.say(f"replay {s.replay_rows} on the standalone cluster")
                run = replay(
                    "replay, Spark standalone (2 workers x 1 core)",
                    archive,
                    nsq,
                    s.replay_rows,
                    tmp,
                    [*engine, "--spark-master", spark.master_url],
                    spark.env(),
                )
                apps = [a for a in spark.state()["completedapps"] if a["name"] == "nsqctl-replay"]
                app = sorted(apps, key=lambda a: a["starttime"])[i]
                per_worker = sa.tasks_per_worker(sa.application_events(spark.event_log, app["id"]))
                both = len(per_worker) == 2 and all(n > 0 for n in per_worker.values())
                run.note += f"; tasks per worker {sorted(per_worker.values())}"
                run.verified = run.verified and both
                runs.append(run)
    shutil.rmtree(archive, ignore_errors=True)
    return _rows(runs, "msgs_per_s")


def bench_trace(s: Settings, tmp: Path) -> list[dict[str, Any]]:
    engine = engine_flag("trace")
    runs: list[Run] = []
    for rows in s.trace_rows:
        archive = tmp / f"trace-{rows}"
        c.say(f"trace: writing an archive of {rows:,} rows")
        msg_id = generated_archive(archive, rows)
        size = sum(p.stat().st_size for p in archive.rglob("*.parquet"))
        c.say(f"  {size / 1e6:,.1f} MB of Parquet")
        for _ in range(s.repeats):
            c.say(f"trace over {rows:,} rows")
            runs.append(
                trace(
                    f"trace, Spark local[2], {rows:,} rows",
                    archive,
                    msg_id,
                    rows,
                    ["--engine", "spark", "--spark-master", "local[2]"]
                    if engine
                    else ["--spark-master", "local[2]"],
                )
            )
            if engine:
                runs.append(
                    trace(
                        f"trace, local engine, {rows:,} rows",
                        archive,
                        msg_id,
                        rows,
                        ["--engine", "local"],
                    )
                )
        shutil.rmtree(archive, ignore_errors=True)
    return _rows(runs, "seconds")


def _rows(runs: list[Run], unit: str) -> list[dict[str, Any]]:
    """Median per name, in first-seen order."""
    out = []
    for name in dict.fromkeys(r.name for r in runs):
        same = [r for r in runs if r.name == name]
        secs = c.median([r.seconds for r in same])
        out.append(
            {
                "what": name,
                "rows": same[0].rows,
                "seconds": secs,
                "msgs_per_s": same[0].rows / secs if unit == "msgs_per_s" else None,
                "verified": all(r.verified for r in same),
                "runs_s": [r.seconds for r in same],
                "note": "; ".join(dict.fromkeys(r.note for r in same if r.note)),
            }
        )
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--trace-rows", help="comma-separated archive sizes for trace")
    ap.add_argument("--replay-rows", type=int)
    ap.add_argument("--archive-rows", type=int)
    ap.add_argument("--repeats", type=int, default=1, help="runs per variant (median)")
    ap.add_argument("--skip", action="append", default=[], choices=SECTIONS)
    c.add_output_args(ap)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    quick = args.quick
    trace_rows = (
        [int(x) for x in args.trace_rows.split(",")]
        if args.trace_rows
        else [20_000, 200_000]
        if quick
        else [20_000, 1_000_000, 10_000_000]
    )
    s = Settings(
        writer_rows=100_000 if quick else 1_000_000,
        archive_rows=args.archive_rows or (50_000 if quick else 300_000),
        replay_rows=args.replay_rows or (100_000 if quick else 1_000_000),
        trace_rows=trace_rows,
        repeats=max(1, args.repeats),
        skip=args.skip,
    )
    payload = c.run_header("pipeline", s)
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="nsqctl-bench-pipeline-"))
    results: dict[str, list[dict[str, Any]]] = {}
    try:
        for name, fn in (
            ("archive", bench_archive),
            ("replay", bench_replay),
            ("trace", bench_trace),
        ):
            if name not in s.skip:
                results[name] = fn(s, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name, rows in results.items():
        if name == "trace":
            table = [[r["what"], f"{r['seconds']:.1f} s", r["note"]] for r in rows]
            c.print_table("trace latency (nsqctl trace, wall time)", ["variant", "time", ""], table)
        else:
            table = [
                [
                    r["what"],
                    c.fmt_int(r["msgs_per_s"]),
                    f"{r['seconds']:.1f} s" if "seconds" in r else "",
                    r.get("note", ""),
                ]
                for r in rows
            ]
            c.print_table(f"{name} throughput", ["variant", "msg/s", "wall", ""], table)
    payload["results"] = results
    verified = all(r["verified"] for rows in results.values() for r in rows)
    return c.conclude(
        "pipeline", payload, args, started=started, verified=verified, targets_met=True
    )


if __name__ == "__main__":
    sys.exit(main())
