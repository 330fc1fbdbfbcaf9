"""``nsqctl pub``: publish messages from arguments, a file or stdin, streamed in batches."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import typer

from nsqctl.cli.common import LookupdOption, NsqdOption, resolve_cluster
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.producer import Producer
from nsqctl.protocol.names import validate_topic


def iter_records(stream: BinaryIO, delimiter: bytes, chunk_size: int = 1 << 20) -> Iterator[bytes]:
    """Split a stream on ``delimiter`` without reading it all into memory."""
    buf = b""
    while True:
        chunk = stream.read(chunk_size)
        if not chunk:
            break
        buf += chunk
        parts = buf.split(delimiter)
        buf = parts.pop()
        yield from (part for part in parts if part)
    if buf:
        yield buf


def _parse_delimiter(text: str) -> bytes:
    try:
        value = text.encode().decode("unicode_escape").encode("latin-1")
    except (UnicodeDecodeError, UnicodeEncodeError):
        raise ConfigError(
            f"bad --delimiter {text!r}: use a character or an escape like \\n"
        ) from None
    if not value:
        raise ConfigError("--delimiter must not be empty")
    return value


def pub(
    topic: str = typer.Argument(..., help="Topic to publish to."),
    messages: list[str] = typer.Argument(None, help="Messages (else read --file or stdin)."),
    file: Path | None = typer.Option(None, "--file", "-f", help="Read messages from a file."),
    delimiter: str = typer.Option("\\n", "--delimiter", help="Message separator in input."),
    binary: bool = typer.Option(
        False, "--binary", help="Each argument is a file: one message each."
    ),
    batch: int = typer.Option(200, "--batch", min=1, max=100_000, help="Messages per MPUB."),
    partition: int | None = typer.Option(None, "--partition", help="Partition (redesign)."),
    shard: str | None = typer.Option(None, "--shard", help="Shard key for every message."),
    defer_ms: int | None = typer.Option(None, "--defer", help="Deferred publish in ms (original)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing on success."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
) -> None:
    """Publish messages; exit 0 only when every message got OK."""
    validate_topic(topic)
    cluster = resolve_cluster(lookupd, nsqd)
    sep = _parse_delimiter(delimiter)
    if binary:
        if not messages:
            raise ConfigError("--binary needs file arguments: nsqctl pub TOPIC --binary FILE...")
        source: Iterator[bytes] = (Path(m).read_bytes() for m in messages)
    elif messages:
        source = (m.encode() for m in messages)
    elif file is not None:
        try:
            fh = file.open("rb")
        except OSError as err:
            raise ConfigError(f"cannot read {file}: {err.strerror}") from None
        source = iter_records(fh, sep)
    else:
        source = iter_records(sys.stdin.buffer, sep)
    sent, failed, error = asyncio.run(
        _publish(cluster.lookupd, cluster.nsqd, topic, source, batch, partition, shard, defer_ms)
    )
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "topic": topic,
                    "published": sent,
                    "unpublished": failed,
                    "error": str(error) if error else None,
                }
            )
        )
    elif not quiet or error:
        typer.echo(f"published {sent} message(s) to {topic}", err=True)
    if error is not None:
        raise NsqctlError(f"{failed} message(s) not published: {error}")


async def _publish(
    lookupd: list[str],
    nsqd: list[str],
    topic: str,
    source: Iterator[bytes],
    batch: int,
    partition: int | None,
    shard: str | None,
    defer_ms: int | None,
) -> tuple[int, int, BaseException | None]:
    sent = 0
    chunk: list[bytes] = []
    window: set[asyncio.Task[None]] = set()
    inflight_counts: dict[asyncio.Task[None], int] = {}
    async with Producer(lookupd_http=lookupd or None, nsqd_tcp=nsqd or None) as producer:

        def launch(bodies: list[bytes]) -> None:
            if defer_ms is not None:
                coro = _deferred(producer, topic, bodies, defer_ms)
            else:
                coro = producer.publish_many(topic, bodies, partition=partition, shard_key=shard)
            task = asyncio.ensure_future(coro)
            window.add(task)
            inflight_counts[task] = len(bodies)

        async def settle(wait_all: bool) -> None:
            nonlocal sent
            done, _ = await asyncio.wait(
                window, return_when=asyncio.ALL_COMPLETED if wait_all else asyncio.FIRST_COMPLETED
            )
            for task in done:
                window.discard(task)
                count = inflight_counts.pop(task)
                task.result()  # raises the first failure
                sent += count

        try:
            for body in source:
                chunk.append(body)
                if len(chunk) >= batch:
                    launch(chunk)
                    chunk = []
                    if len(window) >= 8:  # pipelined batches in flight; keeps memory bounded
                        await settle(False)
            if chunk:
                launch(chunk)
                chunk = []
            while window:
                await settle(True)
        except ConfigError:
            raise
        except (NsqctlError, OSError) as err:
            for task in window:
                task.cancel()
            await asyncio.gather(*window, return_exceptions=True)
            unknown = sum(inflight_counts.values()) + len(chunk)
            return sent, unknown, err
    return sent, 0, None


async def _deferred(producer: Producer, topic: str, bodies: list[bytes], defer_ms: int) -> None:
    for body in bodies:
        await producer.publish_deferred(topic, body, defer_ms)
