"""``nsqctl replay``: re-publish archived (or server-side historical) messages."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path

import typer

from nsqctl.cli.common import (
    ClusterSelection,
    LookupdOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.errors import ConfigError
from nsqctl.paths import state_dir
from nsqctl.protocol.names import validate_topic

SparkMasterOption = typer.Option(
    None, "--spark-master", help="Spark master URL (env SPARK_MASTER; default local[*])."
)


def replay(
    source: str = typer.Argument(
        ..., help="Archive dir/URI, nsq_to_file output, or a live topic with --from-*."
    ),
    to_topic: str = typer.Option(..., "--to-topic", help="Topic to publish to."),
    since: str | None = typer.Option(None, "--since", help="Published at or after (ISO/unix)."),
    until: str | None = typer.Option(None, "--until", help="Published before (ISO/unix)."),
    source_topic: list[str] = typer.Option(None, "--topic", help="Only this archived topic."),
    partitions: list[int] = typer.Option(None, "--partition", help="Only these partition(s)."),
    trace_id: int | None = typer.Option(None, "--trace-id", help="Only this trace id."),
    grep: str | None = typer.Option(None, "--grep", help="Body matches this regex."),
    where: str | None = typer.Option(None, "--where", help="Spark SQL predicate on columns."),
    shard_field: str | None = typer.Option(
        None, "--shard-field", help="Keep order per this JSON field (ext header, then body)."
    ),
    rate: float | None = typer.Option(None, "--rate", min=0.001, help="Total msgs/s."),
    batch_size: int = typer.Option(200, "--batch-size", min=1, max=10000),
    tasks: int = typer.Option(0, "--tasks", min=0, help="Spark tasks (0: default parallelism)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print counts, publish nothing."),
    checkpoint: Path | None = typer.Option(
        None, "--checkpoint", help="Resume state dir (default: per replay, in the state dir)."
    ),
    restart: bool = typer.Option(False, "--restart", help="Ignore an earlier checkpoint."),
    from_time: str | None = typer.Option(
        None, "--from-time", help="Redesign: replay SOURCE topic's history from this time."
    ),
    from_offset: int | None = typer.Option(
        None, "--from-offset", help="Redesign: replay SOURCE topic's history from this offset."
    ),
    count: int = typer.Option(0, "--count", "-n", min=0, help="History mode: stop after N."),
    spark_master: str | None = SparkMasterOption,
    quiet: bool = typer.Option(False, "--quiet", "-q"),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Re-publish messages to --to-topic, in per-partition (or per --shard-field) order."""
    from nsqctl.pipeline.replay import ReplayFilters, parse_time

    validate_topic(to_topic)
    filters = ReplayFilters(
        since_ns=parse_time(since),
        until_ns=parse_time(until),
        topics=list(source_topic or []),
        partitions=list(partitions or []),
        trace_id=trace_id,
        grep=grep,
        where=where,
    )
    sel = resolve_cluster(lookupd, nsqd, profile, require=None if dry_run else "tcp")
    if from_time is not None or from_offset is not None:
        _history(source, to_topic, filters, from_time, from_offset, count, dry_run, sel, quiet)
        return
    if count:
        raise ConfigError("--count applies to history replay (--from-time/--from-offset) only")
    _spark_replay(
        source, to_topic, filters, shard_field, rate, batch_size, tasks, dry_run,
        checkpoint, restart, spark_master, quiet, sel,
    )  # fmt: skip


def _spark_replay(
    source: str,
    to_topic: str,
    filters: object,
    shard_field: str | None,
    rate: float | None,
    batch_size: int,
    tasks: int,
    dry_run: bool,
    checkpoint: Path | None,
    restart: bool,
    spark_master: str | None,
    quiet: bool,
    sel: ClusterSelection,
) -> None:
    from nsqctl.pipeline import checkpoint as ckpt
    from nsqctl.pipeline import replay as job
    from nsqctl.pipeline.spark import spark_session

    text = job.is_text_source(source)
    spark = spark_session(spark_master, "nsqctl-replay")
    say = (lambda m: None) if quiet else (lambda m: typer.echo(m, err=True))
    say(f"replay: spark master {spark.sparkContext.master}")
    if text:
        raw, ordered = job.text_frame(spark, source, filters)  # type: ignore[arg-type]
    else:
        raw, ordered = job.archive_frame(spark, source, filters, shard_field)  # type: ignore[arg-type]
    if dry_run:
        counts = job.dry_run(raw, ordered)
        typer.echo(
            f"dry run: {counts['matching']} matching row(s), {counts['duplicates']} duplicate(s), "
            f"{counts['to_publish']} to publish to {to_topic} over {counts['keys']} key(s)"
        )
        return
    spec = {
        "source": str(Path(source).resolve()) if "://" not in source else source,
        "to_topic": to_topic,
        "filters": vars(filters),
        "shard_field": shard_field,
        "cluster": [sel.lookupd, sel.nsqd],
    }
    directory = checkpoint or (
        state_dir() / "replay" / ckpt.fingerprint(spec)
    )
    if ckpt.prepare(directory, spec, restart):
        say(
            f"replay: resuming from checkpoint {directory} "
            f"({ckpt.acknowledged(directory)} message(s) already acknowledged)"
        )
    planned = job.plan(ordered, tasks or spark.sparkContext.defaultParallelism)
    target = job.ReplayTarget(
        topic=to_topic,
        lookupd=sel.lookupd,
        nsqd=sel.nsqd,
        config=sel.connection_config(),
        batch_size=batch_size,
        rate=rate,
    )

    def progress(finished: int, total: int) -> None:
        if not quiet:
            print(f"replay: {finished}/{total} task(s) done", file=sys.stderr)

    result = job.run_replay(planned, target, str(directory), progress)
    typer.echo(
        f"replayed {result.published} message(s) to {to_topic} in {result.batches} batch(es) "
        f"over {result.tasks} task(s); {result.skipped} skipped (acknowledged earlier)"
    )


def _history(
    topic: str,
    to_topic: str,
    filters: object,
    from_time: str | None,
    from_offset: int | None,
    count: int,
    dry_run: bool,
    sel: ClusterSelection,
    quiet: bool,
) -> None:
    from nsqctl.pipeline import history
    from nsqctl.pipeline.replay import parse_time

    validate_topic(topic)
    f = filters
    if getattr(f, "where", None) or getattr(f, "since_ns", None):
        raise ConfigError("--where/--since apply to archive replays; use --from-time/--until")
    opts = history.HistoryOptions(
        topic=topic,
        to_topic=to_topic,
        start=history.start_arg(parse_time(from_time), from_offset),
        lookupd=sel.lookupd,
        nsqd=sel.nsqd,
        config=sel.connection_config(),
        partitions=getattr(f, "partitions", None) or None,
        until_ns=getattr(f, "until_ns", None),
        trace_id=getattr(f, "trace_id", None),
        grep=getattr(f, "grep", None),
        count=count,
        dry_run=dry_run,
    )

    async def run() -> dict[str, int]:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        return await history.replay_history(opts, stop)

    stats = asyncio.run(run())
    verb = "would replay" if dry_run else "replayed"
    typer.echo(
        f"{verb} {stats['matched']} message(s) of {topic} history to {to_topic} "
        f"({stats['skipped']} filtered out)"
    )
