"""``nsqctl tail``: print a topic's messages; each is FINed only after its output is flushed."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import signal
import string
import sys
from typing import BinaryIO

import typer

from nsqctl.cli.common import LookupdOption, NsqdOption, resolve_cluster
from nsqctl.consumer import Consumer, OrderViolation
from nsqctl.errors import ConfigError
from nsqctl.message import Message
from nsqctl.protocol.names import validate_channel, validate_topic

FLUSH_INTERVAL = 0.1  # output reaches a terminal at least this often


def _format(msg: Message, fmt: str, print_topic: bool) -> bytes:
    if fmt == "raw":
        prefix = f"{msg.topic} | ".encode() if print_topic else b""
        return prefix + msg.body + b"\n"
    try:
        body: object = msg.body.decode("utf-8")
        encoding = "text"
    except UnicodeDecodeError:
        body, encoding = base64.b64encode(msg.body).decode(), "base64"
    record = msg.describe()
    record.update(body_encoding=encoding, body=body)
    return (json.dumps(record, ensure_ascii=False) + "\n").encode()


class _Output:
    """Buffers formatted messages; flush writes them, then FINs exactly those messages."""

    def __init__(self, out: BinaryIO, fmt: str, print_topic: bool, limit: int, window: int) -> None:
        self.out = out
        # Flush (and FIN) before the RDY window is full, or nsqd stops sending until the
        # timer flush: throughput would be capped at one window per FLUSH_INTERVAL.
        self.flush_at = max(1, min(512, window // 2))
        self.fmt = fmt
        self.print_topic = print_topic
        self.limit = limit
        self.pending: list[Message] = []
        self.chunks: list[bytes] = []
        self.written = 0
        self.done = asyncio.Event()

    def add(self, msg: Message) -> None:
        msg.disable_auto_response()
        if self.limit and self.written + len(self.pending) >= self.limit:
            msg.requeue(delay=0, backoff=False)  # beyond -n: give it back untouched
            return
        self.pending.append(msg)
        self.chunks.append(_format(msg, self.fmt, self.print_topic))
        at_limit = self.limit and self.written + len(self.pending) >= self.limit
        if len(self.chunks) >= self.flush_at or at_limit:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        self.out.write(b"".join(self.chunks))
        self.out.flush()
        for msg in self.pending:
            msg.finish()
        self.written += len(self.pending)
        self.pending.clear()
        self.chunks.clear()
        if self.limit and self.written >= self.limit:
            self.done.set()


def tail(
    topic: str = typer.Argument(..., help="Topic to read."),
    channel: str | None = typer.Option(
        None, "--channel", "-c", help="Channel (default: an ephemeral nsqctl_tail_<rand>)."
    ),
    count: int = typer.Option(0, "--count", "-n", min=0, help="Stop after N messages."),
    partitions: list[int] = typer.Option(None, "--partition", help="Partition(s) to read."),
    ordered: bool = typer.Option(False, "--ordered", help="Ordered subscription (redesign)."),
    max_in_flight: int = typer.Option(200, "--max-in-flight", min=1),
    fmt: str = typer.Option("raw", "--format", help="raw | json"),
    print_topic: bool = typer.Option(False, "--print-topic", help="Prefix lines with the topic."),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
) -> None:
    """Print messages as they arrive (raw: the body and a newline, like nsq_tail)."""
    if fmt not in ("raw", "json"):
        raise ConfigError(f"unknown --format {fmt!r}: use raw or json")
    validate_topic(topic)
    if channel is not None:
        validate_channel(channel)
    cluster = resolve_cluster(lookupd, nsqd)
    chan = channel or "nsqctl_tail_" + "".join(random.choices(string.digits, k=6)) + "#ephemeral"
    asyncio.run(
        _tail(
            cluster.lookupd,
            cluster.nsqd,
            topic,
            chan,
            count,
            partitions or None,
            ordered,
            max_in_flight,
            fmt,
            print_topic,
        )
    )


async def _tail(
    lookupd: list[str],
    nsqd: list[str],
    topic: str,
    channel: str,
    count: int,
    partitions: list[int] | None,
    ordered: bool,
    max_in_flight: int,
    fmt: str,
    print_topic: bool,
) -> None:
    output = _Output(sys.stdout.buffer, fmt, print_topic, count, max_in_flight)

    def on_order(v: OrderViolation) -> None:
        print(
            f"nsqctl: order {v.kind} on partition {v.partition}: offset {v.offset} after "
            f"{v.previous_offset}",
            file=sys.stderr,
        )

    consumer = Consumer(
        topic,
        channel,
        output.add,
        lookupd_http=lookupd or None,
        nsqd_tcp=nsqd or None,
        max_in_flight=max_in_flight,
        partitions=partitions,
        ordered=ordered,
        on_order_violation=on_order,
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await consumer.start()
    try:
        while not stop.is_set() and not output.done.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), FLUSH_INTERVAL)
            try:
                output.flush()
            except BrokenPipeError:
                for msg in output.pending:
                    msg.requeue(delay=0, backoff=False)
                output.pending.clear()
                break
    finally:
        with contextlib.suppress(BrokenPipeError):
            output.flush()  # FIN what was printed before the connections close
        await consumer.stop(timeout=5)
