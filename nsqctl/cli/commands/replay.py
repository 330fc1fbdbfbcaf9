"""``nsqctl replay``: re-publish archived (or server-side historical) messages."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from nsqctl.cli.commands.pub_input import check_shard_field
from nsqctl.cli.commands.trace import EngineOption
from nsqctl.cli.flags import (
    ClusterSelection,
    JsonOption,
    LookupdOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.numbers import rate, seconds
from nsqctl.cli.wording import cli_words
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.paths import state_dir
from nsqctl.protocol.names import validate_topic
from nsqctl.timeparse import parse_time_ns

if TYPE_CHECKING:
    from nsqctl.pipeline.replay import ReplayResult, ReplayTarget
    from nsqctl.pipeline.selection import ReplayFilters
    from nsqctl.pipeline.server_replay import HistoryReport

SparkMasterOption = typer.Option(
    None, "--spark-master", help="Spark master URL (env SPARK_MASTER; default local[*])."
)


def replay(
    ctx: typer.Context,
    source: str = typer.Argument(
        ..., help="Archive dir/URI, nsq_to_file output, or a live topic with --from-*."
    ),
    to_topic: str = typer.Option(..., "--to-topic", help="Topic to publish to."),
    since: str | None = typer.Option(None, "--since", help="Published at or after (ISO/unix)."),
    until: str | None = typer.Option(None, "--until", help="Published before (ISO/unix)."),
    source_topic: list[str] = typer.Option(None, "--topic", help="Only this archived topic."),
    partitions: list[int] = typer.Option(
        None, "--partition", min=0, help="Only these partition(s)."
    ),
    trace_id: int | None = typer.Option(None, "--trace-id", help="Only this trace id."),
    grep: str | None = typer.Option(None, "--grep", help="Body matches this regex."),
    where: str | None = typer.Option(None, "--where", help="Spark SQL predicate on columns."),
    shard_field: str | None = typer.Option(
        None, "--shard-field", help="Keep order per this JSON field (ext header, then body)."
    ),
    rate: float | None = typer.Option(
        None,
        "--rate",
        parser=rate(),
        help="Total msgs/s (history mode: read, those filtered out too).",
    ),
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
        None,
        "--from-offset",
        min=0,
        help="Redesign: replay SOURCE topic's history from this offset.",
    ),
    count: int = typer.Option(0, "--count", "-n", min=0, help="History mode: stop after N."),
    failover_window: float | None = typer.Option(
        None,
        "--failover-window",
        metavar="SECONDS",
        parser=seconds(zero=True),
        help="History mode: seconds a partition without a leader is waited for before the "
        "replay exits 1 naming it (default 180; 0: at once).",
    ),
    engine: str = EngineOption,
    spark_master: str | None = SparkMasterOption,
    quiet: bool = typer.Option(False, "--quiet", "-q"),
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Re-publish messages to --to-topic, in per-partition (or per --shard-field) order."""
    from nsqctl.pipeline.selection import ReplayFilters

    validate_topic(to_topic)
    check_shard_field(shard_field)
    filters = ReplayFilters(
        since_ns=None if since is None else parse_time_ns(since),
        until_ns=None if until is None else parse_time_ns(until),
        topics=list(source_topic or []),
        partitions=list(partitions or []),
        trace_id=trace_id,
        grep=grep,
        where=where,
    )
    history_mode = from_time is not None or from_offset is not None
    if history_mode:
        refusal = history_refusal(given_flags(ctx, HISTORY_REFUSED))
        if refusal is not None:
            raise ConfigError(refusal)
    sel = resolve_cluster(lookupd, nsqd, profile, require=None if dry_run else "tcp")
    if history_mode:
        history = _History(from_time, from_offset, count, failover_window, rate)
        _history(source, to_topic, filters, history, dry_run, sel, as_json, quiet)
        return
    if count:
        raise ConfigError("--count applies to history replay (--from-time/--from-offset) only")
    if failover_window is not None:
        raise ConfigError(
            "--failover-window applies to history replay (--from-time/--from-offset) only"
        )
    from nsqctl.pipeline.engine import choose

    def say(line: str) -> None:
        if not quiet:
            typer.echo(line, err=True)

    job = _Job(source, to_topic, filters, shard_field, rate, batch_size, sel, say, as_json)
    if "://" not in source and not Path(source).exists():
        raise ConfigError(f"replay source {source} does not exist")
    choice = choose("replay", engine, [source], spark_master, where)
    say(f"replay: engine {choice.engine} ({cli_words(choice.reason)})")
    if choice.engine == "local":
        _local_replay(job, dry_run, checkpoint, restart)
    else:
        _spark_replay(job, tasks, dry_run, checkpoint, restart, spark_master)


#: The flags a history replay (--from-time/--from-offset) cannot honour, by parameter name,
#: in the order they are checked: (flag, why the history mode has no use for it, what to
#: do instead). Refused, not ignored: an operator who sees one refused trusts the rest.
HISTORY_REFUSED: dict[str, tuple[str, str, str]] = {
    "shard_field": (
        "--shard-field",
        "keeps each source partition's order",
        "replay an archive of the topic with it",
    ),
    "where": (
        "--where",
        "filters with --grep, --trace-id and --until",
        "replay an archive of the topic with it",
    ),
    "since": ("--since", "starts where --from-time or --from-offset says", "use --from-time"),
    "source_topic": ("--topic", "reads SOURCE, one live topic", "name the topic as SOURCE"),
    "batch_size": (
        "--batch-size",
        "publishes each message on its own before acknowledging it, to keep each source "
        "partition's order",
        "",
    ),
    "checkpoint": (
        "--checkpoint",
        "keeps no checkpoint: one stopped part-way says where each partition got to",
        "resume each with --partition P --from-offset N",
    ),
    "restart": (
        "--restart",
        "keeps no checkpoint: each starts where --from-time or --from-offset says",
        "",
    ),
    "tasks": ("--tasks", "runs in this process, not on Spark", ""),
    "engine": ("--engine", "runs in this process, not on Spark", ""),
    "spark_master": ("--spark-master", "runs in this process, not on Spark", ""),
}


def given_flags(ctx: typer.Context, names: Collection[str]) -> list[str]:
    """The parameters of ``names`` given on the command line (or by the environment), in
    the order of ``names``. By name: typer runs on its own copy of click (0.26+) or on click."""
    given = []
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name != "DEFAULT":
            given.append(name)
    return given


def history_refusal(given: Sequence[str]) -> str | None:
    """The one-line refusal of the first of ``given`` (parameter names) that a history
    replay cannot honour; None when it honours them all."""
    for name in given:
        if name in HISTORY_REFUSED:
            flag, why, instead = HISTORY_REFUSED[name]
            return (
                f"{flag} applies to archive and nsq_to_file replays only: a history replay "
                f"(--from-time/--from-offset) {why}; drop {flag}"
                + (f", or {instead}" if instead else "")
            )
    return None


@dataclass
class _Job:
    """A replay's inputs, whichever engine runs it."""

    source: str
    to_topic: str
    filters: ReplayFilters
    shard_field: str | None
    rate: float | None
    batch_size: int
    sel: ClusterSelection
    say: Callable[[str], None]
    as_json: bool = False

    def target(self) -> ReplayTarget:
        from nsqctl.pipeline.replay import ReplayTarget

        return ReplayTarget(
            topic=self.to_topic,
            lookupd=self.sel.lookupd,
            nsqd=self.sel.nsqd,
            config=self.sel.connection_config(),
            batch_size=self.batch_size,
            rate=self.rate,
        )

    def checkpoint_dir(self, checkpoint: Path | None, restart: bool) -> Path:
        """The resume state (the same for both engines: keys and positions agree)."""
        from nsqctl.pipeline import checkpoint as ckpt

        spec = {
            "source": str(Path(self.source).resolve()) if "://" not in self.source else self.source,
            "to_topic": self.to_topic,
            "filters": vars(self.filters),
            "shard_field": self.shard_field,
            "cluster": [self.sel.lookupd, self.sel.nsqd],
        }
        directory = checkpoint or (state_dir() / "replay" / ckpt.fingerprint(spec))
        if ckpt.prepare(directory, spec, restart):
            self.say(
                f"replay: resuming from checkpoint {directory} "
                f"({ckpt.acknowledged(directory)} message(s) already acknowledged)"
            )
        return directory

    def dry_run(self, counts: dict[str, int]) -> None:
        if self.as_json:
            emit_json(self.source, self.to_topic, "archive", True, 0, counts)
            return
        typer.echo(
            f"dry run: {counts['matching']} matching row(s), {counts['duplicates']} duplicate(s), "
            f"{counts['to_publish']} to publish to {self.to_topic} over {counts['keys']} key(s)"
        )

    def done(self, result: ReplayResult) -> None:
        if self.as_json:
            emit_json(self.source, self.to_topic, "archive", False, result.published, vars(result))
            return
        typer.echo(
            f"replayed {result.published} message(s) to {self.to_topic} in {result.batches} "
            f"batch(es) over {result.tasks} task(s); {result.skipped} skipped (acknowledged "
            "earlier)"
        )


def _local_replay(job: _Job, dry_run: bool, checkpoint: Path | None, restart: bool) -> None:
    from nsqctl.pipeline import local
    from nsqctl.pipeline.replay import is_text_source

    if is_text_source(job.source):
        planned = local.text_plan(job.source, job.filters, job.shard_field)
    else:
        planned = local.archive_plan(job.source, job.filters, job.shard_field)
    if dry_run:
        job.dry_run(planned.counts())
        return
    directory = job.checkpoint_dir(checkpoint, restart)
    show = not job.as_json and sys.stderr.isatty()  # progress on a terminal only
    result = local.publish(planned, job.target(), str(directory), _published if show else None)
    if show:
        print(file=sys.stderr)  # end the progress line
    job.done(result)


def _spark_replay(
    job: _Job,
    tasks: int,
    dry_run: bool,
    checkpoint: Path | None,
    restart: bool,
    spark_master: str | None,
) -> None:
    from nsqctl.pipeline.spark import spark_errors

    with spark_errors(
        f"spark could not replay {job.source}", f"cannot read the archive at {job.source}"
    ):
        _spark_job(job, tasks, dry_run, checkpoint, restart, spark_master)


def _spark_job(
    job: _Job,
    tasks: int,
    dry_run: bool,
    checkpoint: Path | None,
    restart: bool,
    spark_master: str | None,
) -> None:
    from nsqctl.pipeline import replay as spark_job
    from nsqctl.pipeline.spark import check_executors, spark_session

    text = spark_job.is_text_source(job.source)
    spark = spark_session(spark_master, "nsqctl-replay")
    job.say(f"replay: spark master {spark.sparkContext.master}")
    if text:
        raw, ordered = spark_job.text_frame(spark, job.source, job.filters, job.shard_field)
    else:
        raw, ordered = spark_job.archive_frame(spark, job.source, job.filters, job.shard_field)
    if dry_run:
        job.dry_run(spark_job.dry_run(raw, ordered))
        return
    # On a cluster, executors run nsqctl code and publish: a one-line error now beats a
    # task failing four times with a Python traceback inside a Java one.
    check_executors(spark, [*job.sel.nsqd, *job.sel.lookupd])
    directory = job.checkpoint_dir(checkpoint, restart)
    planned = spark_job.plan(ordered, tasks or spark.sparkContext.defaultParallelism)

    def progress(finished: int, total: int) -> None:
        if sys.stderr.isatty():  # progress on a terminal only; a log gets the summary
            job.say(f"replay: {finished}/{total} task(s) done")

    job.done(spark_job.run_replay(planned, job.target(), str(directory), progress))


@dataclass(frozen=True)
class _History:
    """A history replay's own options: where it starts, when it stops, how long it waits
    for a partition's leader (None: the library's default)."""

    from_time: str | None
    from_offset: int | None
    count: int
    failover_window: float | None
    rate: float | None = None


def _history(
    topic: str,
    to_topic: str,
    filters: object,
    history: _History,
    dry_run: bool,
    sel: ClusterSelection,
    as_json: bool,
    quiet: bool = False,
) -> None:
    from nsqctl.cli.commands.pub import INTERRUPTED  # with its producer: not for --help
    from nsqctl.pipeline import server_replay

    validate_topic(topic)
    f = filters
    opts = server_replay.HistoryOptions(
        topic=topic,
        to_topic=to_topic,
        start=server_replay.start_arg(
            None if history.from_time is None else parse_time_ns(history.from_time),
            history.from_offset,
        ),
        lookupd=sel.lookupd,
        nsqd=sel.nsqd,
        config=sel.connection_config(),
        partitions=getattr(f, "partitions", None) or None,
        until_ns=getattr(f, "until_ns", None),
        trace_id=getattr(f, "trace_id", None),
        grep=getattr(f, "grep", None),
        count=history.count,
        rate=history.rate,
        dry_run=dry_run,
    )
    shown = not as_json and not quiet and sys.stderr.isatty()
    held: list[HistoryReport] = []  # the replay's report, read again if it fails

    def progress(report: HistoryReport) -> None:
        if not held:
            held.append(report)
        if shown:
            _history_progress(report)

    opts.progress = progress
    if history.failover_window is not None:
        opts.failover_window = history.failover_window

    interrupted: list[int] = []  # the signal that stopped the replay part-way, if one did

    async def run() -> server_replay.HistoryReport:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def interrupt(sig: int) -> None:
            interrupted.append(sig)
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, interrupt, sig)
        return await server_replay.replay_history(opts, stop)

    try:
        report = asyncio.run(run())
    except NsqctlError:
        if shown:
            print(file=sys.stderr)  # end the progress line
        for partial in held:  # what was done before the failure, then the error
            if partial.note:
                typer.echo(f"note: {cli_words(partial.note)}", err=True)
            done = (
                f"{partial.matched} message(s) of {topic} history were read (a dry run: "
                "none published)"
                if dry_run
                else f"{partial.published} message(s) of {topic} history were published "
                f"to {to_topic}"
            )
            typer.echo(f"note: {done} before the replay stopped{resume_advice(partial)}", err=True)
        raise
    if shown:
        print(file=sys.stderr)  # end the progress line
    if as_json:
        emit_json(topic, to_topic, "history", dry_run, report.published, report.to_json())
    else:
        if report.note:
            typer.echo(f"note: {cli_words(report.note)}", err=True)
        if interrupted:
            typer.echo(f"note: the replay was interrupted{resume_advice(report)}", err=True)
        verb = "would replay" if dry_run else "replayed"
        typer.echo(
            f"{verb} {report.matched} message(s) of {topic} history to {to_topic} "
            f"({report.skipped} filtered out)"
        )
    if interrupted:  # stopped part-way: not the success of a replay that ran to its end
        raise typer.Exit(INTERRUPTED)


def resume_advice(report: HistoryReport) -> str:
    """Where a history replay that stopped part-way got to, per partition, as the flags
    that go on from there without repeating a message (or "" when it knows of none)."""
    if not report.resume and not report.unreached:
        return ""
    starts = [f"--partition {p} --from-offset {n}" for p, n in sorted(report.resume.items())]
    rest = "any other partition" if starts else "every partition"
    others = sorted(set(report.unreached) - set(report.resume))
    unreached = f" (partition(s) {', '.join(map(str, others))} out of reach)" if others else ""
    steps = ", ".join([*starts, f"{rest} from the start given"])
    return f"; to go on from where it got: {steps}{unreached}"


def _published(count: int) -> None:
    print(f"\rreplay: {count} published", end="", file=sys.stderr, flush=True)


def _history_progress(report: HistoryReport) -> None:
    print(f"\rreplay: {report.matched} message(s)", end="", file=sys.stderr, flush=True)


def emit_json(
    source: str,
    to_topic: str,
    mode: str,
    dry_run: bool,
    published: int,
    details: dict[str, Any],
) -> None:
    """``nsqctl replay --json``, one shape for every mode::

        {"source": ..., "to_topic": ..., "mode": "archive" | "history", "dry_run": bool,
         "published": N, "details": {...}}

    ``details`` is the mode's own account: for an archive replay its counts (``matching``,
    ``to_publish``, ``duplicates``, ``keys`` on a dry run; ``published``, ``skipped``,
    ``batches``, ``tasks`` otherwise), for a history replay ``channel``, ``matched``,
    ``published``, ``skipped``, ``given_back``, ``channel_deleted``, ``note``, ``resume``
    (source partition → the offset a replay of it goes on from without repeating a
    message) and ``unreached`` (partitions out of reach at the end).
    """
    payload = {
        "source": source,
        "to_topic": to_topic,
        "mode": mode,
        "dry_run": dry_run,
        "published": published,
        "details": details,
    }
    typer.echo(json.dumps(payload, indent=2))
