"""``nsqctl archive``: keep a topic's messages as Parquet; FIN only after fsync."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from nsqctl.cli import complete
from nsqctl.cli.flags import (
    JsonOption,
    LookupdOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.numbers import seconds, size
from nsqctl.errors import ConfigError
from nsqctl.failover import DEFAULT_FAILOVER_WINDOW
from nsqctl.paths import unusable_directory
from nsqctl.protocol.names import EPHEMERAL_SUFFIX, validate_channel, validate_topic

if TYPE_CHECKING:  # pyarrow loads only when archiving, not on every nsqctl start
    from nsqctl.failover import FailoverEvent
    from nsqctl.pipeline.archiver import ArchiveOptions, ArchiveStats
    from nsqctl.pipeline.rotation import RotationPolicy


def archive(
    topic: str = typer.Argument(
        ..., autocompletion=complete.topics, help="Topic to archive (all partitions)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Archive directory (Hive layout)."),
    channel: str = typer.Option(
        "nsqctl_archive", "--channel", "-c", help="Channel (durable: a restart resumes)."
    ),
    partitions: list[int] = typer.Option(
        None,
        "--partition",
        min=0,
        help="Only these partition(s).",
        autocompletion=complete.partitions,
    ),
    ordered: bool | None = typer.Option(
        None, "--ordered/--no-ordered", help="SUB_ORDERED (default: when the topic needs it)."
    ),
    max_in_flight: int = typer.Option(5000, "--max-in-flight", min=1),
    rotate_rows: int = typer.Option(
        0, "--rotate-rows", min=0, help="0: half the max-in-flight (the RDY window)."
    ),
    rotate_mb: float = typer.Option(64.0, "--rotate-mb", parser=size("megabytes", minimum=0.001)),
    rotate_seconds: float = typer.Option(
        5.0, "--rotate-seconds", parser=seconds(minimum=0.01, maximum=50.0)
    ),
    exit_when_idle: float | None = typer.Option(
        None,
        "--exit-when-idle",
        parser=seconds(minimum=0.1),
        help="Stop after this many seconds without messages, counted while every nsqd "
        "(partition) of the topic is connected: one cut off is waited for, up to "
        "--failover-window, then archive exits 1 naming it.",
    ),
    trace_log: Path | None = typer.Option(
        None, "--trace-log", help="Append a consume record per archived message (JSONL)."
    ),
    failover_window: float = typer.Option(
        DEFAULT_FAILOVER_WINDOW,
        "--failover-window",
        parser=seconds(zero=True),
        help="Redesign: seconds to wait for a partition's new leader before stopping "
        "(0: give up at once, as pub does); with --exit-when-idle, for any nsqd cut off.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Consume TOPIC into Parquet files under OUT; a message is FINed only once on disk."""
    _check_target(topic, channel, out)
    sel = resolve_cluster(lookupd, nsqd, profile)
    from nsqctl.pipeline.archiver import ArchiveOptions

    opts = ArchiveOptions(
        topic=topic,
        channel=channel,
        out_dir=out,
        lookupd=sel.lookupd,
        nsqd=sel.nsqd,
        config=sel.consumer_config(channel),
        max_in_flight=max_in_flight,
        ordered=ordered,
        partitions=partitions or None,
        policy=rotation_policy(max_in_flight, rotate_rows, rotate_mb, rotate_seconds),
        exit_when_idle=exit_when_idle,
        trace_log=trace_log,
        failover_window=failover_window,
        on_failover=None if quiet else _on_failover,
    )
    stats = asyncio.run(_run(opts, quiet))
    if as_json:
        typer.echo(json.dumps(archive_json(topic, channel, out, stats), indent=2))
    else:
        _report(topic, out, stats, quiet)


def _check_target(topic: str, channel: str, out: Path) -> None:
    """Refused before connecting: a bad name, an ephemeral channel, or an --out that
    cannot hold the archive (made here, so that a path it cannot make is bad input)."""
    validate_topic(topic)
    validate_channel(channel)
    if channel.endswith(EPHEMERAL_SUFFIX):
        raise ConfigError(
            f"--channel {channel} is ephemeral: nsqd deletes it, with every message it holds, "
            "when archive disconnects, so a restart could not resume; drop #ephemeral"
        )
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"cannot make the archive directory {out}: {unusable_directory(err)}; give --out "
            "a directory that can be written"
        ) from None


def rotation_policy(
    max_in_flight: int, rotate_rows: int, rotate_mb: float, rotate_seconds: float
) -> RotationPolicy:
    """When a Parquet file is cut: --rotate-rows (0: half the RDY window, so the other
    half keeps arriving while a file is written), --rotate-mb, --rotate-seconds."""
    from nsqctl.pipeline.rotation import RotationPolicy  # not at --help (the pipeline's own)

    return RotationPolicy(
        max_rows=rotate_rows or max(1, max_in_flight // 2),
        max_bytes=int(rotate_mb * 1024 * 1024),
        max_age=rotate_seconds,
    )


def _report(topic: str, out: Path, stats: ArchiveStats, quiet: bool) -> None:
    """The closing lines on stderr: what was archived (unless quiet), and any reconnects
    and messages archived twice because of them (always)."""
    if not quiet:
        how = " (ordered topic: SUB_ORDERED, one message per partition at a time)"
        typer.echo(
            f"archived {stats.written} message(s) of {topic} into {stats.files} file(s) "
            f"under {out}{how if stats.ordered else ''}",
            err=True,
        )
    if stats.reconnects or stats.duplicates:
        typer.echo(
            f"nsqctl archive: {stats.reconnects} reconnect(s); {stats.duplicates} message(s) "
            "delivered again after a reconnect and archived again (trace and replay de-duplicate "
            "them)",
            err=True,
        )


def archive_json(topic: str, channel: str, out: Path, stats: ArchiveStats) -> dict[str, object]:
    """``nsqctl archive --json``: what was archived where; ``duplicates`` counts messages
    delivered again after a reconnect and archived again."""
    return {
        "topic": topic,
        "channel": channel,
        "out": str(out),
        "archived": stats.written,
        "files": stats.files,
        "ordered": stats.ordered,
        "reconnects": stats.reconnects,
        "duplicates": stats.duplicates,
    }


def _on_failover(event: FailoverEvent) -> None:
    lead = "\n" if sys.stderr.isatty() else ""  # off the \r progress line
    print(f"{lead}nsqctl archive: {event.describe()}", file=sys.stderr, flush=True)


async def _run(opts: ArchiveOptions, quiet: bool) -> ArchiveStats:
    def progress(stats: ArchiveStats) -> None:
        if not quiet and sys.stderr.isatty():
            print(f"\rarchived {stats.written} in {stats.files} file(s)", end="", file=sys.stderr)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    from nsqctl.pipeline.archiver import Archiver

    return await Archiver(opts, progress).run(stop)
