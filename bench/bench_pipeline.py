"""Pipeline benchmark: archive writer on its own, archive end to end from nsqd, replay of
archived messages with local Spark (local[1] vs local[2]), trace lookup over an archive.

    python bench/bench_pipeline.py            # 1M replay, 10M-row trace lookup
    python bench/bench_pipeline.py --quick    # small sizes, for a smoke run

Servers run on 127.0.0.1 and are stopped by PID; everything lives in one temp dir.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nsqctl.pipeline import replay as job
from nsqctl.pipeline import trace as tr
from nsqctl.pipeline.archiver import ArchiveOptions, Archiver, ArchiveStats
from nsqctl.pipeline.schema import OfflineMessage
from nsqctl.pipeline.spark import spark_session
from nsqctl.pipeline.writer import ArchiveBuffer, ArchiveWriter, RotationPolicy
from nsqctl.producer import Producer
from nsqctl.protocol.message import RawMessage
from nsqctl.servers import build, cluster

BODY = b"x" * 100


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def synthetic_archive(out: Path, rows: int, rotate_rows: int = 100_000) -> float:
    """Write ``rows`` 100-byte messages with fsync per file; returns msgs/s.

    The messages exist before the clock starts (a consumer makes them); buffering them,
    building the columns and writing durably is what is timed.
    """
    writer = ArchiveWriter(out)
    ts = time.time_ns()
    msgs = [OfflineMessage(RawMessage(ts + i, 1, b"%016x" % i, BODY, offset=i * 130, size=130),
                           "bench", "ch", i % 4, "127.0.0.1:4150")
            for i in range(rows)]  # fmt: skip
    started = time.perf_counter()
    buf: ArchiveBuffer[OfflineMessage] = ArchiveBuffer()
    for msg in msgs:
        buf.add(msg)
        if buf.rows >= rotate_rows:
            writer.write(buf)
            buf = ArchiveBuffer()
    writer.write(buf)
    return rows / (time.perf_counter() - started)


def end_to_end(c: cluster.Cluster, out: Path, n: int) -> float:
    """Publish n messages, then time an archiver draining them (msgs/s): from its start
    until the last one is on disk and FINed (the idle wait and shutdown are not counted)."""
    topic = f"bench_arch_{int(time.time())}"

    async def run() -> float:
        async with Producer(nsqd_tcp=c.nsqd_tcp) as producer:
            for i in range(0, n, 1000):
                await producer.publish_many(topic, [BODY] * min(1000, n - i))
        opts = ArchiveOptions(topic, "bench", out, nsqd=c.nsqd_tcp, max_in_flight=5000,
                              policy=RotationPolicy(max_rows=2500, max_age=1.0),
                              exit_when_idle=1.0)  # fmt: skip
        finished: list[float] = []

        def progress(stats: ArchiveStats) -> None:
            if stats.written >= n and not finished:
                finished.append(time.perf_counter())

        started = time.perf_counter()
        stats = await Archiver(opts, progress).run(asyncio.Event())
        assert stats.written >= n and finished, stats
        return n / (finished[0] - started)

    return asyncio.run(run())


def replay(spark_master: str, archive: Path, c: cluster.Cluster, rows: int) -> float:
    spark = spark_session(spark_master, "bench-replay")
    try:
        _, ordered = job.archive_frame(spark, str(archive), job.ReplayFilters(), None)
        target = job.ReplayTarget(f"bench_replay_{int(time.time() * 1000)}", nsqd=c.nsqd_tcp,
                                  batch_size=500)  # fmt: skip
        planned = job.plan(ordered, spark.sparkContext.defaultParallelism)
        started = time.perf_counter()
        result = job.run_replay(planned, target, None)
        elapsed = time.perf_counter() - started
        assert result.published == rows, result
        return rows / elapsed
    finally:
        spark.stop()


def trace_lookup(archive: Path, rows: int) -> float:
    spark = spark_session("local[2]", "bench-trace")
    try:
        q = tr.parse_query(str(rows // 2), internal=True)
        started = time.perf_counter()
        events = tr.gather(spark, q, [str(archive)], [], [])
        elapsed = time.perf_counter() - started
        assert any(e["event"] == "archived" for e in events), events
        return elapsed
    finally:
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    args = parser.parse_args()
    writer_rows = 200_000 if args.quick else 1_000_000
    e2e_rows = 50_000 if args.quick else 300_000
    replay_rows = 100_000 if args.quick else 1_000_000
    trace_rows = 1_000_000 if args.quick else 10_000_000
    tmp = Path(tempfile.mkdtemp(prefix="nsqctl-bench-pipeline-"))
    results: list[tuple[str, str]] = []
    c = None
    try:
        say(f"writer: {writer_rows} rows")
        rate = synthetic_archive(tmp / "w", writer_rows)
        results.append((f"archive writer alone ({writer_rows} x 100 B, fsync/100k)",
                        f"{rate:,.0f} msg/s"))  # fmt: skip
        c = cluster.start("original", tmp / "cluster", nsqd=1, bin_dir=build.build("original"))
        say(f"end to end: {e2e_rows} messages")
        rate = end_to_end(c, tmp / "e2e", e2e_rows)
        results.append((f"archive end to end from nsqd ({e2e_rows})", f"{rate:,.0f} msg/s"))
        say(f"replay: {replay_rows} archived rows")
        synthetic_archive(tmp / "r", replay_rows)
        for master in ("local[1]", "local[2]"):
            rate = replay(master, tmp / "r", c, replay_rows)
            results.append((f"replay {replay_rows} with {master}", f"{rate:,.0f} msg/s"))
        say(f"trace: {trace_rows} archived rows")
        synthetic_archive(tmp / "t", trace_rows, rotate_rows=500_000)
        secs = trace_lookup(tmp / "t", trace_rows)
        results.append((f"trace lookup over {trace_rows:,} rows (local[2])", f"{secs:.1f} s"))
    finally:
        if c is not None:
            c.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    width = max(len(name) for name, _ in results)
    for name, value in results:
        print(f"{name.ljust(width)}  {value}")


if __name__ == "__main__":
    main()
