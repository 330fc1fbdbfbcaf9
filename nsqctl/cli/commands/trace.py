"""``nsqctl trace ID``: what happened to this message?"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import typer

from nsqctl.cli.flags import (
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.wording import cli_words
from nsqctl.errors import ConfigError, MessageNotFoundError, NsqctlError

EngineOption = typer.Option(
    "auto",
    "--engine",
    help="auto | local (pyarrow, in-process) | spark; auto: local when "
    "the sources are local and small, else Spark.",
)


def trace(
    ident: str = typer.Argument(..., metavar="ID", help="Trace id (or message id, or see -i)."),
    topic: str | None = typer.Option(None, "--topic", "-t", help="Only this topic."),
    internal_id: bool = typer.Option(False, "--internal-id", "-i", help="ID is an internal id."),
    archives: list[str] = typer.Option(
        None, "--archive", "-a", envvar="NSQCTL_ARCHIVE", help="Archive dir/URI (repeatable)."
    ),
    trace_logs: list[str] = typer.Option(
        None, "--trace-log", "-l", envvar="NSQCTL_TRACE_LOG", help="Trace log JSONL (repeatable)."
    ),
    as_json: bool = typer.Option(False, "--json", help="JSON instead of a table."),
    engine: str = EngineOption,
    spark_master: str | None = typer.Option(
        None, "--spark-master", help="Spark master URL (env SPARK_MASTER; default local[*])."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Say which engine and why."),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """Show a message's timeline: published, delivered (FIN/REQ/timeout), archived."""
    from nsqctl.pipeline import trace as tr

    query = tr.parse_query(ident, internal=internal_id, topic=topic)
    sel = resolve_cluster(lookupd, nsqd, profile, nsqd_http, require=None)
    http = list(sel.nsqd_http) or _nsqd_http_from_lookupd(sel.lookupd, topic)
    archives, trace_logs = list(archives or []), list(trace_logs or [])
    # nsqd finds a message by its internal id only: a trace id is searched live only
    # through the internal ids the logs and archives give for it
    live = bool(http and topic and query.internal_id is not None)
    if not archives and not trace_logs and not live:
        if http and topic:
            raise ConfigError(
                f"{query.label} cannot be searched on the live cluster (nsqd finds a "
                "message by its internal id only): pass --trace-log FILE or --archive DIR "
                "that recorded it, or the message's internal id with --internal-id"
            )
        raise ConfigError(
            "nothing to search: pass --archive DIR and/or --trace-log FILE, or a live "
            "redesign cluster with --topic"
        )
    reader = None
    if archives or trace_logs:
        reader = _reader(engine, archives + trace_logs, spark_master, verbose)
    with _engine_errors(reader):
        events = tr.gather(reader, query, archives, trace_logs, http)
    if not events:
        raise MessageNotFoundError(
            f"{query.label} not found in {len(trace_logs)} trace log(s), {len(archives)} "
            f"archive(s){' or the live cluster' if live else ''}"
        )
    if as_json:
        typer.echo(json.dumps({"query": query.label, "events": events}, indent=1, default=str))
    else:
        _table(query.label, events, archives)


def _engine_errors(reader: Any) -> contextlib.AbstractContextManager[None]:
    """One line for a failed Spark job (a corrupt archive file), as the local engine gives."""
    if not hasattr(reader, "sparkContext"):  # no reader, or the local one
        return contextlib.nullcontext()
    from nsqctl.pipeline.spark import spark_errors

    return spark_errors("spark could not read the archive", "cannot read the archive")


def _reader(engine: str, sources: list[str], master: str | None, verbose: bool) -> Any:
    """The engine that reads archives and trace logs (see nsqctl.pipeline.engine)."""
    from nsqctl.pipeline.engine import choose

    choice = choose("trace", engine, sources, master)
    if verbose:
        typer.echo(f"trace: engine {choice.engine} ({cli_words(choice.reason)})", err=True)
    if choice.engine == "local":
        from nsqctl.pipeline.local import LocalReader

        return LocalReader()
    from nsqctl.pipeline.spark import spark_session

    return spark_session(master, "nsqctl-trace")


def _nsqd_http_from_lookupd(lookupd: list[str], topic: str | None) -> list[str]:
    """The topic's nsqd HTTP addresses (live lookups need them); none on any error."""
    if not lookupd or not topic:
        return []
    import asyncio

    from nsqctl.lookup import LookupClient

    async def find() -> list[str]:
        async with LookupClient(lookupd) as client:
            topo = await client.lookup(topic, access="r", metainfo=True)
        peers = list(topo.producers) + list(topo.partitions.values())
        return sorted({f"{p.broadcast_address}:{p.http_port}" for p in peers})

    try:
        return asyncio.run(find())
    except (NsqctlError, OSError):
        return []


def _table(label: str, events: list[dict[str, Any]], archives: list[str]) -> None:
    typer.echo("\n".join(render_trace(label, events, archives, _width())))


def _width() -> int:
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


def render_trace(
    label: str, events: list[dict[str, Any]], archives: list[str], width: int = 80
) -> list[str]:
    """The timeline as lines that read at ``width`` columns: first one line per event (time,
    what happened, where in short), then the details of each event by number: the full
    place (an archived file as its archive, directory and file name, each on its own line),
    ids and ``key=value`` pairs wrapped at spaces only, so no value is ever split."""
    days = {e["at"][:10] for e in events}
    one_day = len(days) == 1

    def when(e: dict[str, Any]) -> str:
        stamp = _when(e["at"])
        return stamp[11:] if one_day else stamp

    head = f"timeline of {label} (UTC{', ' + next(iter(days)) if one_day else ''})"
    lines = [head]
    event_width = max((len(e["event"]) for e in events), default=0)
    for n, e in enumerate(events, 1):
        start = f"{n:>2}  {when(e)}  {e['event']:<{event_width}}  "
        lines.append(start + _shorten(_relative(e["where"], archives), width - len(start)))
    lines += ["", "details"]
    for n, e in enumerate(events, 1):
        lines.append(f"{n:>2}  {e['event']}")
        lines.extend(_where_lines(e["where"], archives, width))
        pairs = [f"{k}={v}" for k, v in e["detail"].items()]
        lines.extend(_field("", " ".join(pairs), width))
    return lines


def _shorten(text: str, room: int) -> str:
    """``text`` cut to ``room`` columns with a trailing "…" (the details have it whole)."""
    room = max(room, 10)
    return text if len(text) <= room else text[: room - 1] + "…"


def _where_lines(where: str, archives: list[str], width: int) -> list[str]:
    """An archived file as archive/dir/file lines (a path is longer than a line); any
    other place wrapped at spaces."""
    relative = _relative(where, archives)
    if relative != where or where.endswith(".parquet"):
        directory, _, name = relative.rpartition("/")
        root = where[: len(where) - len(relative)].rstrip("/") if relative != where else ""
        return [
            line
            for key, value in (("archive", root), ("dir", directory), ("file", name))
            for line in _field(key, value, width)
        ]
    return _field("where", where, width)


def _when(iso: str) -> str:
    """``2026-11-21T10:00:00.123+00:00`` → ``2026-11-21 10:00:00.123``."""
    return iso.replace("T", " ", 1).removesuffix("+00:00")


def _field(name: str, text: str, width: int) -> list[str]:
    """``    name   text``, wrapped at spaces only (a long word stays whole on its line)."""
    if not text:
        return []
    import textwrap

    indent = f"    {name:<7} "
    return textwrap.wrap(
        text,
        width=max(width, len(indent) + 20),
        initial_indent=indent,
        subsequent_indent=" " * len(indent),
        break_long_words=False,
        break_on_hyphens=False,
    )


def _relative(where: str, archives: list[str]) -> str:
    """An archived file's path below the ``--archive`` it was found in (else as it is)."""
    path = where.removeprefix("file://").removeprefix("file:")
    for archive in archives:
        root = archive.removeprefix("file://").removeprefix("file:").rstrip("/")
        for base in {root, str(Path(root).resolve())}:
            if path.startswith(base + "/"):
                return path[len(base) + 1 :]
    return where
