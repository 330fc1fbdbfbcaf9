"""``nsqctl dead-letter``: see and re-drive the messages consumers gave up on.

A consumer with ``max_attempts`` hands a message that keeps failing to its giving-up hook;
the default one appends it to a per-channel JSON-lines file in the state dir. ``list``
shows what is waiting; ``replay`` publishes the exact bodies again (to their topic, or
``--to-topic``) and, once every one got OK, moves the file aside so it is not replayed twice.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from nsqctl.cli.flags import (
    ClusterSelection,
    JsonOption,
    LookupdOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.deadletter import (
    SUFFIX,
    DeadLetter,
    check_movable,
    dead_letter_dir,
    dead_letter_files,
    read_dead_letters,
)
from nsqctl.errors import ConfigError
from nsqctl.producer import Producer
from nsqctl.protocol.names import validate_topic

app = typer.Typer(help="List and replay the messages consumers gave up on (max attempts).")

BATCH = 500


def resolve_file(name: str) -> Path:
    """A path, or a file name (with or without .jsonl) in the dead-letter dir."""
    path = Path(name)
    try:
        if path.is_file():
            return path
        for candidate in (dead_letter_dir() / name, dead_letter_dir() / f"{name}{SUFFIX}"):
            if candidate.is_file():
                return candidate
    except OSError as err:
        raise ConfigError(f"cannot look for dead-letter file {name!r}: {err}") from None
    raise ConfigError(
        f"no dead-letter file {name!r} (looked in {dead_letter_dir()}): "
        "see `nsqctl dead-letter list`"
    )


@app.command("list")
def list_cmd(as_json: bool = JsonOption) -> None:
    """Show the dead-letter files waiting, with their message counts."""
    rows = []
    for path in dead_letter_files():
        try:
            letters = list(read_dead_letters(path))
            error = None
        except ConfigError as err:  # one bad file must not hide the others
            letters, error = [], str(err)
        newest = max((d.timestamp for d in letters), default=0)
        rows.append(
            {
                "file": str(path),
                "name": path.name.removesuffix(SUFFIX),
                "messages": len(letters),
                "topics": sorted({d.topic for d in letters}),
                "newest_published": _iso(newest) if newest else None,
                "error": error,
            }
        )
    if as_json:
        typer.echo(json.dumps({"directory": str(dead_letter_dir()), "files": rows}, indent=2))
        return
    if not rows:
        typer.echo(f"no dead letters in {dead_letter_dir()}")
        return
    table = Table(title=f"dead letters in {dead_letter_dir()}")
    for column in ("name", "messages", "topics", "newest published"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            str(row["name"]),
            "unreadable" if row["error"] else str(row["messages"]),
            str(row["error"] or ", ".join(row["topics"])),  # type: ignore[arg-type]
            str(row["newest_published"] or "-"),
        )
    Console().print(table)


@app.command("replay")
def replay_cmd(
    name: str = typer.Argument(..., help="Dead-letter file: a path or a name from `list`."),
    to_topic: str | None = typer.Option(
        None, "--to-topic", help="Publish here instead of each message's own topic."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count, publish nothing."),
    keep: bool = typer.Option(False, "--keep", help="Leave the file in place afterwards."),
    as_json: bool = JsonOption,
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Publish each dead letter's exact body again; move the file aside when all got OK.

    Exit 0 only when every message was published. On a failure the file stays where it
    is: running again re-publishes all of it (at least once, like NSQ itself).
    """
    path = resolve_file(name)
    if to_topic is not None:
        validate_topic(to_topic)
    letters = list(read_dead_letters(path))
    by_topic: dict[str, list[DeadLetter]] = defaultdict(list)
    for letter in letters:
        by_topic[to_topic or letter.topic].append(letter)
    for topic in by_topic:
        validate_topic(topic)
    summary = ", ".join(f"{len(v)} to {t}" for t, v in sorted(by_topic.items())) or "nothing"
    if dry_run:
        if as_json:
            _emit_replay_json(path, by_topic, True, None)
            return
        typer.echo(f"dry run: would publish {summary} from {path}")
        return
    if not keep:
        # checked before publishing: a file that cannot be moved aside afterwards would be
        # published again by every rerun
        try:
            check_movable(path)
        except ConfigError as err:
            raise ConfigError(
                f"{err}: nothing published; make the directory writable, or pass --keep "
                "to publish and leave the file in place"
            ) from None
    if letters:
        asyncio.run(_publish(resolve_cluster(lookupd, nsqd, profile), by_topic))
    moved = "kept in place"
    moved_to: Path | None = None
    if not keep:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        target = path.with_name(f"{path.name}.replayed-{stamp}")
        try:
            path.rename(target)
        except OSError as err:
            raise ConfigError(
                f"replayed {summary} from {path}, but could not move it aside "
                f"({err.strerror}): delete or move it yourself, or a rerun publishes it again"
            ) from None
        moved, moved_to = f"moved to {target}", target
    if as_json:
        _emit_replay_json(path, by_topic, False, moved_to)
        return
    typer.echo(f"replayed {summary} from {path}; {moved}")


def _emit_replay_json(
    path: Path, by_topic: dict[str, list[DeadLetter]], dry_run: bool, moved_to: Path | None
) -> None:
    """``nsqctl dead-letter replay --json``::

    {"file": PATH, "dry_run": bool, "published": {TOPIC: N, ...}, "moved_to": PATH | null}

    ``published`` is what was (on a dry run: would be) published to each topic.
    """
    payload = {
        "file": str(path),
        "dry_run": dry_run,
        "published": {t: len(v) for t, v in sorted(by_topic.items())},
        "moved_to": None if moved_to is None else str(moved_to),
    }
    typer.echo(json.dumps(payload, indent=2))


async def _publish(cluster: ClusterSelection, by_topic: dict[str, list[DeadLetter]]) -> None:
    async with Producer(
        lookupd_http=cluster.lookupd or None,
        nsqd_tcp=cluster.nsqd or None,
        config=cluster.connection_config(),
    ) as producer:
        for topic, letters in by_topic.items():
            for start in range(0, len(letters), BATCH):
                bodies = [d.body for d in letters[start : start + BATCH]]
                await producer.publish_many(topic, bodies)


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="seconds")
