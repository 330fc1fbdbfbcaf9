"""The replay job: read an archive (or nsq_to_file text), filter, de-duplicate, and publish
in order: with Spark from the executors here, or in-process with :mod:`nsqctl.pipeline.local`
(both take their filters, dedupe key and ordering from :mod:`nsqctl.pipeline.filters`).

Order: rows are hash-partitioned by an ordering key (source topic/partition — plus nsqd on
the original family — or the ``--shard-field`` value) and sorted within each Spark
partition by their original position, so each key's messages go out in order, one MPUB
batch after another, with the key as the producer's shard key (same target partition or
node for the whole key). Acknowledged batches advance a per-key checkpoint.
"""

from __future__ import annotations

import asyncio
import functools
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nsqctl.connection import ConnectionConfig
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.pipeline import filters as flt
from nsqctl.pipeline.checkpoint import KeyCheckpoint
from nsqctl.pipeline.selection import ReplayFilters
from nsqctl.pipeline.textinput import read_bodies, text_files

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

ORDER_COLUMNS = list(flt.ORDER_COLUMNS)
MAX_BATCH_BYTES = 1024 * 1024


@dataclass
class ReplayTarget:
    """Everything an executor needs to publish (picklable)."""

    topic: str
    lookupd: list[str] = field(default_factory=list)
    nsqd: list[str] = field(default_factory=list)
    config: ConnectionConfig | None = None
    batch_size: int = 200
    rate: float | None = None  # total msgs/s over all tasks


@dataclass
class ReplayResult:
    published: int = 0
    skipped: int = 0  # already acknowledged according to the checkpoint
    batches: int = 0
    tasks: int = 0


def _analysis_error(err: Exception, what: str) -> ConfigError:
    first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return ConfigError(f"{what}: {first}")


def archive_frame(
    spark: SparkSession, source: str, filters: ReplayFilters, shard_field: str | None
) -> tuple[DataFrame, DataFrame]:
    """(filtered rows, filtered and de-duplicated rows with ordering columns)."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    check_grep(filters)
    try:
        df = spark.read.parquet(source)
    except AnalysisException as err:
        raise _analysis_error(err, f"cannot read the archive at {source}") from err
    flt.check_archive_columns(source, df.columns)
    df = _where(df.where(flt.to_spark(flt.replay_filter(filters), df.columns)), filters)
    original = F.col("partition") < 0
    df = df.withColumn(flt.NODE_COLUMN, F.when(original, F.col("nsqd")).otherwise(F.lit("")))
    deduped = df.dropDuplicates(list(flt.DEDUPE_KEY))

    def position(name: str | None) -> Column:
        return F.lit(0) if name is None else F.col(name)

    if shard_field:
        path = flt.spark_json_path(shard_field)
        key = F.coalesce(
            F.get_json_object(F.col("ext"), path),
            F.get_json_object(F.col("body").cast("string"), path),
            F.lit(""),
        )
        positions = [position(name) for name in flt.POSITION["shard_field"]]
    else:
        key = F.concat_ws("/", *(F.col(c).cast("string") for c in flt.KEY_COLUMNS))
        positions = [
            F.when(original, position(o)).otherwise(position(r))
            for o, r in zip(flt.POSITION["original"], flt.POSITION["redesign"], strict=True)
        ]
    ordered = deduped.select(
        key.alias("_key"),
        *(
            F.coalesce(p, F.lit(0)).cast("long").alias(n)
            for p, n in zip(positions, ORDER_COLUMNS[1:], strict=True)
        ),
        F.col("body"),
    )
    return df, ordered


def _where(df: DataFrame, f: ReplayFilters) -> DataFrame:
    """``--where``: a Spark SQL predicate, so the Spark engine's alone."""
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.sql import functions as F

    if f.where:
        try:
            df = df.where(F.expr(f.where))
            df.schema  # noqa: B018 - analyse now, so a bad predicate is a usage error
        except (AnalysisException, ParseException) as err:
            raise _analysis_error(err, f"`where` {f.where!r}") from err
    return df


def check_grep(f: ReplayFilters) -> None:
    """A bad --grep is a usage error before any engine starts."""
    if f.grep:
        try:
            re.compile(f.grep)
        except re.error as err:
            raise ConfigError(f"`grep` {f.grep!r} is not a valid regex: {err}") from err


def check_text_filters(f: ReplayFilters) -> None:
    """nsq_to_file text has bodies only: say so for filters on anything else."""
    if f.since_ns or f.until_ns or f.partitions or f.trace_id or f.topics:
        raise ConfigError(
            "`since_ns`/`until_ns`/`topics`/`partition`/`trace_id` need an archive source: "
            "nsq_to_file text has bodies only"
        )


def text_frame(
    spark: SparkSession, source: str, filters: ReplayFilters, shard_field: str | None = None
) -> tuple[DataFrame, DataFrame]:
    """nsq_to_file output: one ordering key per file, in line order; with ``shard_field``
    one key per value of that field of the (JSON) line, in file then line order."""
    from pyspark.sql import functions as F

    check_text_filters(filters)
    check_grep(filters)
    files = list(enumerate(text_files(source)))
    # a damaged file an executor finds fails the job with nsqctl's own one-line error
    # (spark_errors takes it from the worker's traceback)
    rdd = spark.sparkContext.parallelize(files, len(files)).flatMap(_file_rows)
    df = spark.createDataFrame(rdd, "file string, file_index long, line long, body binary")
    df = _where(df.where(flt.to_spark(flt.text_filter(filters))), filters)
    zero = F.lit(0).cast("long")
    if shard_field:
        path = flt.spark_json_path(shard_field)
        key = F.coalesce(F.get_json_object(F.col("body").cast("string"), path), F.lit(""))
        order = [key, F.col("file_index"), F.col("line")]
    else:
        order = [F.col("file"), F.col("line"), zero]
    ordered = df.select(
        *(c.alias(n) for c, n in zip([*order, zero], ORDER_COLUMNS, strict=True)),
        F.col("body"),
    )
    return df, ordered


def _file_rows(indexed: tuple[int, str]) -> Iterator[tuple[str, int, int, bytes]]:
    index, path = indexed
    for number, body in read_bodies(path):
        yield path, index, number, body


def is_text_source(source: str) -> bool:
    """An archive has Parquet files; anything else local is read as nsq_to_file text."""
    from pathlib import Path

    path = Path(source)
    if "://" in source and not source.startswith("file://"):
        return False  # remote URIs are archives
    if path.is_file():
        return not path.name.endswith(".parquet")
    if path.is_dir():
        return not any(path.rglob("*.parquet"))
    raise ConfigError(f"replay source {source} does not exist")


def plan(ordered: DataFrame, tasks: int) -> DataFrame:
    """Hash-partition by key and sort each Spark partition by (key, position)."""
    return ordered.repartition(tasks, "_key").sortWithinPartitions(*ORDER_COLUMNS)


def dry_run(raw: DataFrame, ordered: DataFrame) -> dict[str, int]:
    """Counts without publishing: matching rows, after de-duplication, ordering keys."""
    from pyspark.sql import functions as F

    after = ordered.agg(F.count("*").alias("n"), F.countDistinct("_key").alias("k")).first()
    assert after is not None  # an aggregate without grouping always has its one row
    before = raw.count()
    return {
        "matching": before,
        "to_publish": int(after["n"]),
        "duplicates": before - int(after["n"]),
        "keys": int(after["k"]),
    }


def run_replay(
    planned: DataFrame,
    target: ReplayTarget,
    checkpoint_dir: str | None,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Publish every row from the executors; raises NsqctlError if any publish failed."""
    if planned.columns != [*ORDER_COLUMNS, "body"]:  # the executors unpack rows by position
        raise ValueError(f"unexpected replay columns {planned.columns}")
    tasks = planned.rdd.getNumPartitions()
    per_task_rate = target.rate / tasks if target.rate else None
    fn = functools.partial(_publish_partition, target, checkpoint_dir, per_task_rate)
    sc = planned.sparkSession.sparkContext
    done = threading.Event()
    watcher = None
    if progress is not None:
        watcher = threading.Thread(target=_watch, args=(sc, done, progress), daemon=True)
        watcher.start()
    try:
        stats = planned.rdd.mapPartitions(fn).collect()
    except Exception as err:  # py4j / PythonException: find the task's own error line
        from nsqctl.pipeline.spark import unreadable_file_reason, worker_config_error

        if unreadable_file_reason(err) is not None:
            # an input file the job could not read (any FAILED_READ_FILE: damaged, or
            # missing), met here when no earlier stage read it (adaptive execution off):
            # the caller's spark_errors says which it is, as for a read before this job
            raise
        refused = worker_config_error(err)  # bad input an executor found reading it
        if refused is not None:
            raise ConfigError(refused) from err
        raise NsqctlError(f"replay stopped: {_task_error(err)}") from err
    finally:
        done.set()
        if watcher is not None:
            watcher.join(timeout=2)
    result = ReplayResult(tasks=tasks)
    for s in stats:
        result.published += s["published"]
        result.skipped += s["skipped"]
        result.batches += s["batches"]
    return result


def _task_error(err: Exception) -> str:
    text = str(err)
    for line in reversed(text.splitlines()):
        if re.match(r"^\s*(nsqctl\.[\w.]+\.)?\w*(Error|Exception): ", line):
            return line.strip()
    return text.strip().splitlines()[0] if text.strip() else type(err).__name__


def _watch(sc: Any, done: threading.Event, progress: Callable[[int, int], None]) -> None:
    tracker = sc.statusTracker()
    while not done.wait(1.0):
        finished = total = 0
        for stage_id in tracker.getActiveStageIds():
            info = tracker.getStageInfo(stage_id)
            if info is not None:
                finished += info.numCompletedTasks
                total += info.numTasks
        if total:
            progress(finished, total)


def _publish_partition(
    target: ReplayTarget,
    checkpoint_dir: str | None,
    rate: float | None,
    rows: Iterator[tuple[Any, ...]],
) -> Iterator[dict[str, int]]:
    """Executor side: publish one Spark partition's rows in order, batch by batch."""
    yield asyncio.run(publish_rows(target, KeyCheckpoint(checkpoint_dir), rate, rows))


async def publish_rows(
    target: ReplayTarget,
    ckpt: KeyCheckpoint,
    rate: float | None,
    rows: Iterator[tuple[Any, ...]],
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Publish ``rows`` in batches per key, checkpointing each; ``progress`` hears the
    count published after every batch."""
    from nsqctl.producer import Producer

    stats = {"published": 0, "skipped": 0, "batches": 0}
    batch: list[bytes] = []
    batch_bytes = 0
    batch_key: str | None = None
    last_pos: tuple[int, int, int] | None = None
    limit = target.batch_size
    if rate:
        limit = max(1, min(limit, int(rate / 10) or 1))  # ≥ 10 batches a second
    next_at = time.monotonic()

    async with Producer(
        lookupd_http=target.lookupd or None, nsqd_tcp=target.nsqd or None, config=target.config
    ) as producer:

        async def flush() -> None:
            nonlocal batch, batch_bytes, next_at
            if not batch:
                return
            if rate:
                delay = next_at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                next_at = max(next_at, time.monotonic() - 1.0) + len(batch) / rate
            await producer.publish_many(target.topic, batch, shard_key=batch_key)
            assert batch_key is not None and last_pos is not None
            ckpt.advance(batch_key, last_pos, len(batch))
            stats["published"] += len(batch)
            stats["batches"] += 1
            batch, batch_bytes = [], 0
            if progress is not None:
                progress(stats["published"])

        for key, o1, o2, o3, data in rows:  # Rows are tuples: unpacking beats row["name"]
            pos = (o1, o2, o3)
            done_up_to = ckpt.position(key)
            if done_up_to is not None and pos <= done_up_to:
                stats["skipped"] += 1
                continue
            body = bytes(data)
            if key != batch_key or len(batch) >= limit or batch_bytes + len(body) > MAX_BATCH_BYTES:
                await flush()
            batch.append(body)
            batch_bytes += len(body)
            batch_key, last_pos = key, pos
        await flush()
    return stats
