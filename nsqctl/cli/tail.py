"""``nsqctl tail``: print a topic's messages; each is FINed only after its output is flushed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import string
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

import typer

from nsqctl import protocol as p
from nsqctl.cli.common import (
    ClusterSelection,
    LookupdOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.consumer import Consumer, FailoverEvent, OrderViolation
from nsqctl.consumer.failover import DEFAULT_FAILOVER_WINDOW
from nsqctl.errors import ConfigError
from nsqctl.jsonfield import get_field, scalar_text
from nsqctl.message import Message, body_to_json, finish_all
from nsqctl.protocol.names import validate_channel, validate_topic
from nsqctl.tracelog import TraceLog

FLUSH_INTERVAL = 0.1  # output reaches a terminal at least this often


def _format(msg: Message, fmt: str, print_topic: bool) -> bytes:
    if fmt == "raw":
        prefix = f"{msg.topic} | ".encode() if print_topic else b""
        return prefix + msg.body + b"\n"
    body, encoding = body_to_json(msg.body)
    record = msg.describe()
    if fmt == "pretty":
        when = datetime.fromtimestamp(msg.timestamp / 1e9, UTC).isoformat(timespec="milliseconds")
        where = msg.topic if msg.partition is None else f"{msg.topic}[{msg.partition}]"
        head = f"--- {where} id={msg.id_text} attempts={msg.attempts} at {when}"
        if msg.offset is not None:
            head += f" offset={msg.offset}"
        if msg.trace_id:
            head += f" trace_id={msg.trace_id}"
        text = body if encoding == "text" else f"<{len(msg.body)} bytes, base64> {body}"
        return f"{head}\n{text}\n".encode()
    record.update(body_encoding=encoding, body=body)
    return (json.dumps(record, ensure_ascii=False) + "\n").encode()


@dataclass(frozen=True)
class MessageFilter:
    """``--grep`` (a regex on the body bytes) and ``--jq-field FIELD=VALUE`` (all must hold)."""

    pattern: re.Pattern[bytes] | None = None
    fields: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, grep: str | None, jq_fields: list[str] | None) -> MessageFilter:
        pattern = None
        if grep is not None:
            try:
                pattern = re.compile(grep.encode())
            except re.error as err:
                raise ConfigError(f"bad --grep regex {grep!r}: {err}") from None
        pairs = []
        for item in jq_fields or []:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise ConfigError(f"bad --jq-field {item!r}: write FIELD=VALUE (e.g. user.id=42)")
            pairs.append((name, value))
        return cls(pattern, tuple(pairs))

    @property
    def active(self) -> bool:
        return self.pattern is not None or bool(self.fields)

    def matches(self, body: bytes) -> bool:
        if self.pattern is not None and self.pattern.search(body) is None:
            return False
        if not self.fields:
            return True
        try:
            obj = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return False
        return all(scalar_text(get_field(obj, name)) == want for name, want in self.fields)


def parse_start(from_start: bool, from_time: str | None, from_offset: int | None) -> str | None:
    """The SUB_ADVANCED start argument for the --from-* flags (redesign only)."""
    given = [
        f
        for f, on in (
            ("--from-start", from_start),
            ("--from-time", from_time is not None),
            ("--from-offset", from_offset is not None),
        )
        if on
    ]
    if len(given) > 1:
        raise ConfigError(f"use only one of {', '.join(given)}")
    if from_start:
        return p.start_msgcount(0)
    if from_offset is not None:
        return p.start_virtual_queue(from_offset)
    if from_time is not None:
        return p.start_timestamp(parse_time(from_time))
    return None


def parse_time(text: str) -> int:
    """Unix seconds, or an ISO 8601 date/time (UTC unless it has an offset)."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"bad time {text!r}: use Unix seconds or ISO 8601 like 2026-11-21T10:00:00"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp())


class _Output:
    """Buffers formatted messages; flush writes them, then FINs exactly those messages."""

    def __init__(
        self,
        out: BinaryIO,
        fmt: str,
        print_topic: bool,
        limit: int,
        window: int,
        keep: MessageFilter | None = None,
        stop_intake: Callable[[], None] | None = None,
    ) -> None:
        self.out = out
        # Called before the last FIN (-n reached): on an ordered channel that FIN would
        # release the next message, which we would only have to give back.
        self.stop_intake = stop_intake
        self.keep = keep if keep is not None and keep.active else None
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
        self.closing = False

    def _reader_gone(self) -> None:
        for msg in self.pending:
            msg.requeue(delay=0, backoff=False)
        self.pending.clear()
        self.chunks.clear()
        self.closing = True
        # Python would report the broken pipe again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, self.out.fileno())
        os.close(devnull)
        self.done.set()

    def add(self, msg: Message) -> None:
        msg.disable_auto_response()
        if self.closing:
            msg.requeue(delay=0, backoff=False)  # arrived during shutdown: give it back now
            return
        if self.limit and self.written + len(self.pending) >= self.limit:
            msg.requeue(delay=0, backoff=False)  # beyond -n: give it back untouched
            return
        if self.keep is not None and not self.keep.matches(msg.body):
            msg.finish()  # filtered out: looked at and handled, nothing to print
            return
        self.pending.append(msg)
        self.chunks.append(_format(msg, self.fmt, self.print_topic))
        at_limit = self.limit and self.written + len(self.pending) >= self.limit
        if len(self.chunks) >= self.flush_at or at_limit:
            self.flush()

    def flush(self) -> None:
        """Write and FIN the pending messages; a closed reader (``| head``) ends the tail
        quietly and gives the unwritten messages back."""
        if not self.pending or self.closing:
            return
        try:
            self.out.write(b"".join(self.chunks))
            self.out.flush()
        except BrokenPipeError:
            self._reader_gone()
            return
        if self.limit and self.written + len(self.pending) >= self.limit and self.stop_intake:
            self.stop_intake()
        finish_all(self.pending)
        self.written += len(self.pending)
        self.pending.clear()
        self.chunks.clear()
        if self.limit and self.written >= self.limit:
            self.done.set()


@dataclass(frozen=True)
class TailPlan:
    topic: str
    channel: str
    count: int
    partitions: list[int] | None
    ordered: bool
    start: str | None
    max_in_flight: int
    fmt: str
    print_topic: bool
    keep: MessageFilter
    trace_log: Path | None
    connect_timeout: float | None
    failover_window: float = DEFAULT_FAILOVER_WINDOW


def tail(
    topic: str = typer.Argument(..., help="Topic to read."),
    channel: str | None = typer.Option(
        None, "--channel", "-c", help="Channel (default: an ephemeral nsqctl_tail_<rand>)."
    ),
    count: int = typer.Option(0, "--count", "-n", min=0, help="Stop after N messages."),
    partitions: list[int] = typer.Option(None, "--partition", help="Partition(s) to read."),
    ordered: bool = typer.Option(False, "--ordered", help="Ordered subscription (redesign)."),
    max_in_flight: int = typer.Option(200, "--max-in-flight", min=1),
    fmt: str = typer.Option("raw", "--format", help="raw | json | pretty"),
    grep: str | None = typer.Option(None, "--grep", help="Only bodies matching this regex."),
    jq_field: list[str] = typer.Option(
        None, "--jq-field", help="Only JSON bodies with FIELD=VALUE (repeatable, dotted paths)."
    ),
    from_start: bool = typer.Option(
        False, "--from-start", help="Start at the oldest retained message (redesign)."
    ),
    from_time: str | None = typer.Option(
        None, "--from-time", help="Start at this time: Unix seconds or ISO 8601 (redesign)."
    ),
    from_offset: int | None = typer.Option(
        None, "--from-offset", help="Start at this disk-queue offset (redesign)."
    ),
    print_topic: bool = typer.Option(False, "--print-topic", help="Prefix lines with the topic."),
    trace_log: Path | None = typer.Option(
        None, "--trace-log", help="Append a consume record per message to this JSONL file."
    ),
    connect_timeout: float = typer.Option(
        5.0,
        "--connect-timeout",
        metavar="SECONDS",
        min=0,
        help="Give up when no nsqd of the topic can be reached at start within this time "
        "(0: keep trying); once connected, lost connections are retried (a partition of the "
        "redesign within --failover-window).",
    ),
    failover_window: float = typer.Option(
        DEFAULT_FAILOVER_WINDOW,
        "--failover-window",
        metavar="SECONDS",
        min=0,
        help="Seconds a partition may wait for a new leader (redesign, with --lookupd) "
        "before tail gives up (0: wait forever).",
    ),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Print messages as they arrive (raw: the body and a newline, like nsq_tail).

    Each message is FINed only after its line was written and flushed; Ctrl-C stops
    cleanly, giving back anything not yet printed.
    """
    if fmt not in ("raw", "json", "pretty"):
        raise ConfigError(f"unknown --format {fmt!r}: use raw, json or pretty")
    validate_topic(topic)
    if channel is not None:
        validate_channel(channel)
    start = parse_start(from_start, from_time, from_offset)
    keep = MessageFilter.parse(grep, jq_field)
    cluster = resolve_cluster(lookupd, nsqd, profile)
    if channel is None:
        suffix = "".join(random.choices(string.digits, k=6))
        channel = f"nsqctl_tail_{suffix}#ephemeral"
    plan = TailPlan(
        topic,
        channel,
        count,
        partitions or None,
        ordered,
        start,
        max_in_flight,
        fmt,
        print_topic,
        keep,
        trace_log,
        connect_timeout or None,
        failover_window,
    )
    asyncio.run(_tail(cluster, plan))


def _on_order(v: OrderViolation) -> None:
    print(
        f"nsqctl: order {v.kind} on partition {v.partition}: offset {v.offset} after "
        f"{v.previous_offset}",
        file=sys.stderr,
    )


def _on_failover(event: FailoverEvent) -> None:
    print(f"nsqctl tail: {event.describe()}", file=sys.stderr, flush=True)


def _summary(consumer: Consumer) -> None:
    """After a reconnect: what came twice (at-least-once), so a reader can account for it."""
    stats = consumer.stats
    if not (stats.duplicates or stats.order_redeliveries or stats.reconnects):
        return
    print(
        f"nsqctl tail: {stats.reconnects} reconnect(s); {stats.duplicates} message(s) "
        f"printed again after a reconnect (at-least-once), {stats.order_redeliveries} "
        "of them resent by a new leader on an ordered partition",
        file=sys.stderr,
    )


async def _tail(cluster: ClusterSelection, plan: TailPlan) -> None:
    # Ordered: one message in flight per partition, so each must be flushed (and FINed)
    # at once or the next never comes until the timer flush.
    window = 1 if plan.ordered else plan.max_in_flight
    output = _Output(sys.stdout.buffer, plan.fmt, plan.print_topic, plan.count, window, plan.keep)
    log = TraceLog(plan.trace_log) if plan.trace_log is not None else None
    consumer = Consumer(
        plan.topic,
        plan.channel,
        output.add,
        lookupd_http=cluster.lookupd or None,
        nsqd_tcp=cluster.nsqd or None,
        config=cluster.connection_config(),
        max_in_flight=plan.max_in_flight,
        partitions=plan.partitions,
        ordered=plan.ordered,
        start=plan.start,
        on_order_violation=_on_order,
        trace_log=log,
        connect_timeout=plan.connect_timeout,
        failover_window=plan.failover_window,
        on_failover=_on_failover,
    )
    output.stop_intake = lambda: consumer.set_max_in_flight(0)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await consumer.start()
        while not stop.is_set() and not output.done.is_set() and consumer.error is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), FLUSH_INTERVAL)
            output.flush()
    finally:
        output.stop_intake()  # RDY 0 first: the FINs below must not release more messages
        output.flush()  # FIN what was printed before the connections close
        # Anything still arriving (sent before nsqd saw RDY 0) goes straight back rather
        # than sitting in flight until nsqd's msg_timeout.
        output.closing = True
        await consumer.stop(timeout=5)
        if log is not None:
            log.close()
        _summary(consumer)
    if consumer.error is not None:
        raise consumer.error
