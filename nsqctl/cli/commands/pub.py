"""``nsqctl pub``: publish messages from arguments, a file or stdin, streamed in batches.

Batches go out as pipelined MPUBs (a bounded window, so memory stays flat on any input
size). The exit code is 0 only when every message got OK; otherwise the count of
messages not confirmed is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from nsqctl.cli import complete
from nsqctl.cli.commands.pub_input import (
    Batch,
    check_shard_field,
    open_source,
    parse_delimiter,
    parse_headers,
    read_in_thread,
    shard_key_from_json,
)
from nsqctl.cli.commands.pub_lines import LineLedger, Span, merge, spans_of, text_of
from nsqctl.cli.flags import (
    ClusterSelection,
    LookupdOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.numbers import rate, seconds
from nsqctl.cli.output.lazy_progress import LazyProgress
from nsqctl.cli.wording import cli_words
from nsqctl.errors import ConfigError, NsqctlError, ServerError
from nsqctl.failover import DEFAULT_FAILOVER_WINDOW, FailoverEvent
from nsqctl.producer import Producer, ProducerOptions, Receipt
from nsqctl.protocol import MPUB_ENTRY_OVERHEAD, MPUB_TRACE_ENTRY_OVERHEAD, mpub_body_size
from nsqctl.protocol.errors import (
    BadBodyError,
    BadMessageError,
    BadPartitionError,
    InvalidError,
)
from nsqctl.protocol.names import validate_topic
from nsqctl.tracelog import TraceLog

WINDOW = 8
"""MPUB batches in flight per connection an unkeyed publish takes turns on (a partition
leader on the redesign, an nsqd on the original family): nsqd answers one connection's
commands in order, so what keeps each busy is the depth of its own pipeline, and a window
shared by all of them would leave each partition of a wide topic one or two. A keyed or
pinned publish sends stop-and-wait per partition to keep order, so its window is WINDOW
in all: there it only bounds the input read ahead."""
INTERRUPTED = 130  # exit code after SIGINT, as shells report it (128 + 2)
INTERRUPT_GRACE = 2.0
"""Seconds Ctrl-C waits for the batches already sent to be answered before it gives up
on them: nsqd may have stored one whose OK is still on its way, and counting that batch
as not published would have the operator send it twice. A second Ctrl-C stops at once."""

#: The largest --defer DPUB can carry (an unsigned 32-bit count of ms): a larger one would
#: fail as the first message is encoded, reported as a message sent and not confirmed.
DEFER_MAX_MS = 0xFFFFFFFF


@dataclass
class PubPlan:
    """What to publish and how; built from the flags, checked before connecting."""

    topic: str
    batch: int
    partition: int | None = None
    shard: str | None = None
    shard_field: str | None = None
    trace: str | None = None  # a trace id, "auto", or None
    defer_ms: int | None = None
    rate: float | None = None
    skip_too_large: bool = False  # skip a line nsqd cannot take instead of stopping there
    headers: dict[str, str] = field(default_factory=dict)  # ext header: PUB_EXT per message

    def check(self) -> None:
        routing = [
            name
            for name, on in (
                ("--partition", self.partition is not None),
                ("--shard", self.shard is not None),
                ("--shard-field", self.shard_field is not None),
            )
            if on
        ]
        if len(routing) > 1:
            raise ConfigError(f"use only one of {', '.join(routing)}")
        check_shard_field(self.shard_field)
        if self.defer_ms is not None and self.trace is not None:
            raise ConfigError("--defer and --trace cannot be combined (DPUB has no trace)")
        if self.headers:
            self._check_headers()
        if self.rate is not None and self.rate <= 0:
            raise ConfigError("--rate must be a positive number of messages per second")
        if self.trace is not None and self.trace != "auto":
            parse_trace_id(self.trace)
        if self.rate is not None:
            # Small batches keep a low rate smooth (about ten sends per second).
            self.batch = max(1, min(self.batch, int(self.rate // 10) or 1))

    def _check_headers(self) -> None:
        # PUB_EXT carries one message with its own JSON header: no batch, defer or trace
        # form (a trace id goes in the header as ##trace_id).
        for flag, on in (
            ("--defer", self.defer_ms is not None),
            ("--trace", self.trace is not None),
            ("--shard-field", self.shard_field is not None),
        ):
            if on:
                raise ConfigError(f"--header and {flag} cannot be combined")


def parse_trace_id(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise ConfigError(
            f"bad --trace {text!r}: give a number (decimal or 0x hex) or `auto`"
        ) from None
    if not 0 <= value < 1 << 64:
        raise ConfigError(f"bad --trace {text!r}: a trace id is an unsigned 64-bit number")
    return value


@dataclass
class PubResult:
    published: int = 0
    unpublished: int = 0
    skipped: int = 0  # blank input lines: not messages, counted so the numbers add up
    error: BaseException | None = None
    interrupted: bool = False  # SIGINT stopped it: published counts what got OK
    receipts: list[dict[str, Any]] = field(default_factory=list)
    lines: LineLedger = field(default_factory=LineLedger)


class Pacer:
    """Holds sends back to ``rate`` messages per second overall (no bursts after stalls
    beyond one batch)."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.start = time.monotonic()
        self.sent = 0

    async def wait(self, count: int) -> None:
        if self.rate is None:
            return
        due = self.start + self.sent / self.rate
        now = time.monotonic()
        if due > now:
            await asyncio.sleep(due - now)
        elif now - due > 1.0:
            self.start, self.sent = now, 0  # fell behind (slow server): don't burst to catch up
        self.sent += count


def pub(
    topic: str = typer.Argument(..., autocompletion=complete.topics, help="Topic to publish to."),
    messages: list[str] = typer.Argument(
        None, help="Messages (or files with --binary); else --file or stdin."
    ),
    file: Path | None = typer.Option(None, "--file", "-f", help="Read messages from a file."),
    delimiter: str = typer.Option("\\n", "--delimiter", "-d", help="Message separator in input."),
    binary: bool = typer.Option(
        False, "--binary", help="One message per file argument (or all of --file / stdin)."
    ),
    batch: int = typer.Option(200, "--batch", min=1, max=100_000, help="Messages per MPUB."),
    rate: float | None = typer.Option(
        None, "--rate", parser=rate(), help="Publish at most N messages/s."
    ),
    partition: int | None = typer.Option(
        None,
        "--partition",
        min=0,
        help="Partition, numbered from 0 (redesign).",
        autocompletion=complete.partitions,
    ),
    shard: str | None = typer.Option(None, "--shard", help="Shard key for every message."),
    shard_field: str | None = typer.Option(
        None, "--shard-field", help="Take each message's shard key from this JSON field."
    ),
    trace: str | None = typer.Option(
        None, "--trace", help="Traced publish with this trace id, or `auto` (redesign)."
    ),
    trace_log: Path | None = typer.Option(
        None, "--trace-log", help="Append publish receipts to this JSONL trace log."
    ),
    defer_ms: int | None = typer.Option(
        None,
        "--defer",
        min=0,
        max=DEFER_MAX_MS,
        help="Deferred publish in ms (original; nsqd refuses more than its "
        "--max-req-timeout, 1 h by default).",
    ),
    failover_window: float = typer.Option(
        DEFAULT_FAILOVER_WINDOW,
        "--failover-window",
        parser=seconds(zero=True),
        help="Seconds to wait for a new leader when one is lost mid-publish (0: fail at once).",
    ),
    header: list[str] = typer.Option(
        None,
        "--header",
        "-H",
        metavar="NAME=VALUE",
        help="Ext header on every message (repeatable); the topic must be an ext topic "
        "of the redesign (topic create --ext).",
    ),
    skip_too_large: bool = typer.Option(
        False,
        "--skip-too-large",
        help="Skip each line larger than nsqd takes (named on stderr and in --json) and go "
        "on; without it pub stops at the first such line and sends nothing after it.",
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress, nothing on success."),
    as_json: bool = typer.Option(False, "--json", help="Print the result (and receipts) as JSON."),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    profile: str | None = ProfileOption,
) -> None:
    """Publish messages; exit 0 only when every message got OK."""
    validate_topic(topic)
    plan = PubPlan(
        topic,
        batch,
        partition=partition,
        shard=shard,
        shard_field=shard_field,
        trace=trace,
        defer_ms=defer_ms,
        rate=rate,
        skip_too_large=skip_too_large,
        headers=parse_headers(header),
    )
    plan.check()
    if trace_log is not None and trace is None:
        raise ConfigError("--trace-log records traced publishes: add --trace ID or --trace auto")
    cluster = resolve_cluster(lookupd, nsqd, profile)
    source, total_bytes = open_source(messages, file, parse_delimiter(delimiter), binary)
    # A closed stderr (`2>&-`) must not stop publishing: then there is nowhere to show
    # progress or failover notes, and the exit code alone reports the outcome.
    progress = LazyProgress(f"pub {topic}", total_bytes, enabled=not quiet and _stderr_open())
    log = TraceLog(trace_log) if trace_log is not None else None
    result = PubResult()
    producer = _producer(cluster, failover_window, progress, log, result)
    try:
        asyncio.run(publish_stream(producer, plan, source, progress, result))
    except (KeyboardInterrupt, asyncio.CancelledError):
        if not result.interrupted:
            raise  # before publishing started: nothing to report
    except ConfigError as err:  # bad input mid-stream: what came before it may be stored
        if as_json:
            _json_result(plan, result, str(err))
        raise
    finally:
        progress.stop()
        if log is not None:
            log.close()
    _report(plan, result, quiet, as_json)


def _producer(
    cluster: ClusterSelection,
    failover_window: float,
    progress: LazyProgress,
    log: TraceLog | None,
    result: PubResult,
) -> Producer:
    """The producer of ``pub``: its receipts counted into ``result`` (and the trace log),
    its failover notes shown above the progress line."""

    def on_receipt(receipt: Receipt) -> None:
        # Each traced batch is counted as its OK comes, so after a failure the report
        # names exactly what was not confirmed.
        result.published += receipt.count
        result.receipts.append(_receipt_json(receipt))
        if log is not None:
            log.publish(receipt)

    return Producer(
        lookupd_http=cluster.lookupd or None,
        nsqd_tcp=cluster.nsqd or None,
        config=cluster.connection_config(),
        on_receipt=on_receipt,
        options=ProducerOptions(failover_window=failover_window),
        on_failover=lambda event: progress.note(failover_line(event)),
    )


def _stderr_open() -> bool:
    """False when the process was started with stderr closed (Python sets it to None)."""
    return sys.stderr is not None


def failover_line(event: FailoverEvent) -> str:
    """A failover progress line; its reason names actions in the library's words
    (`lookup(T)`), which a CLI user reads as the command to type (:func:`cli_words`)."""
    return f"nsqctl pub: {cli_words(event.describe())}"


def _json_result(plan: PubPlan, result: PubResult, error: str | None) -> None:
    """--json's receipts, then its one summary line, whatever ended the publish."""
    for receipt in result.receipts:
        typer.echo(json.dumps(receipt))
    typer.echo(
        json.dumps(
            {
                "topic": plan.topic,
                "published": result.published,
                "unpublished": result.unpublished,
                "skipped": result.skipped,
                "too_large": result.lines.too_large,
                "lines": result.lines.to_json(),
                "error": error,
            }
        )
    )


def _report(plan: PubPlan, result: PubResult, quiet: bool, as_json: bool) -> None:
    if as_json:
        _json_result(plan, result, "interrupted" if result.interrupted else _text(result.error))
    if result.interrupted:
        typer.echo(
            f"nsqctl pub: interrupted: {result.published} message(s) published to "
            f"{plan.topic}, {result.unpublished} read but not confirmed",
            err=True,
        )
        raise typer.Exit(INTERRUPTED)
    if result.lines.too_large:
        lines = text_of(merge((n, n) for n in result.lines.too_large))
        typer.echo(
            f"nsqctl pub: skipped {len(result.lines.too_large)} line(s) larger than nsqd "
            f"takes (--skip-too-large): input line(s) {lines}",
            err=True,
        )
    if not as_json and not quiet and result.error is None:
        typer.echo(f"published {result.published} message(s) to {plan.topic}", err=True)
    if isinstance(result.error, BadPartitionError) and plan.partition is None:
        # The library's wording names its keywords; a CLI user needs the flags, and one
        # given only --nsqd can shard only after adding --lookupd.
        raise ConfigError(
            f"{result.unpublished} message(s) not published ({result.published} were): "
            f"topic {plan.topic!r} is ordered, and nsqd takes no message for it without a "
            "partition: pass --partition N, or give --lookupd (then --shard-field FIELD or "
            "--shard KEY route each message by its key; without them the messages are "
            f"spread over the partitions) [nsqd said {result.error.code}]"
        )
    if result.error is not None:
        raise NsqctlError(
            f"{result.unpublished} message(s) not published ({result.published} were): "
            f"{result.error} ({result.lines.describe(stopped=True)})",
            setting=getattr(result.error, "setting", None),
        )


def _text(error: BaseException | None) -> str | None:
    return None if error is None else str(error)


def unanswered(ledger: LineLedger, lines: list[Span], error: BaseException | None) -> None:
    """Lines launched that got no OK, in the ledger: never sent when the library says no
    attempt wrote them (``NsqctlError.unsent``), or, when it says nothing, when it
    refused them as bad input (a ConfigError raised before anything was written);
    otherwise they may have been stored. A ConfigError that ends a publish after an
    attempt wrote it (no given nsqd leads the partition, the first one's connection
    lost before its OK) says unsent=False: calling that "not sent" would invite a
    duplicate. Unsent by nsqd's own refusal (an error frame: a message too big, a topic
    it does not hold) is said as that: the lines reached nsqd, which stored none."""
    unsent = error.unsent if isinstance(error, NsqctlError) else None
    if unsent is True and isinstance(error, ServerError) and error.code:
        ledger.refused_by_nsqd(lines)
    elif unsent is True or (unsent is None and isinstance(error, ConfigError)):
        ledger.not_sent(lines)
    else:
        ledger.not_confirmed(lines)


class _Window:
    """Pipelined batches in flight; settles in any order, counts what got OK."""

    def __init__(self, result: PubResult) -> None:
        self.result = result
        # each batch in flight: how many messages its OK counts, and its input lines
        self.tasks: dict[asyncio.Future[object], tuple[int, list[Span]]] = {}

    def launch(self, coro: Awaitable[object], count: int, lines: list[Span]) -> None:
        self.tasks[asyncio.ensure_future(coro)] = (count, lines)
        self.result.lines.launched(lines)

    async def settle(self, wait_all: bool) -> None:
        if not self.tasks:
            return
        done, _ = await asyncio.wait(
            self.tasks, return_when=asyncio.ALL_COMPLETED if wait_all else asyncio.FIRST_COMPLETED
        )
        failure: BaseException | None = None
        for task in done:
            count, lines = self.tasks.pop(task)
            error = task.exception()
            if error is None:
                self.result.published += count
                continue
            unanswered(self.result.lines, lines, error)
            if failure is None:
                failure = error
        if failure is not None:
            raise failure

    async def answered(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for every batch in flight to be answered (OK or
        an error); :meth:`abandon` then counts them."""
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=timeout)

    async def abandon(self) -> int:
        """Cancel what is in flight; returns how many messages that leaves unconfirmed.
        Batches that got OK before (or while) being cancelled are counted as published."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        unconfirmed = 0
        for task, (count, lines) in self.tasks.items():
            if not task.cancelled() and task.exception() is None:
                self.result.published += count
            else:
                unconfirmed += count
                error = None if task.cancelled() else task.exception()
                unanswered(self.result.lines, lines, error)
        self.tasks.clear()
        return unconfirmed


async def publish_stream(
    producer: Producer,
    plan: PubPlan,
    source: Iterator[Batch],
    progress: LazyProgress,
    result: PubResult,
) -> None:
    """Publish ``source`` as ``plan`` says, counting into ``result``: what ``pub`` runs
    once its flags are checked (public so that tests can feed a generator and watch)."""
    stream = _Stream(producer, plan, result)
    _stop_on_sigint(result)
    async with producer:
        if plan.headers:
            await require_ext_topic(producer, plan.topic)
        try:
            async for batch in read_in_thread(source):
                if result.interrupted:  # the cancel below was lost: stop here all the same
                    raise asyncio.CancelledError
                result.skipped += batch.blank
                progress.advance(batch.size)
                await stream.take(batch)
            await stream.finish()
        except ConfigError as err:
            await stream.stop_on_bad_input(err)
        except (NsqctlError, OSError) as err:
            await stream.fail(err)
        except asyncio.CancelledError:  # SIGINT: asyncio.run cancels this task
            await stream.interrupt()
            raise


class _Stream:
    """One publish of :func:`publish_stream`: the batches in flight, the pace, the input
    held back until it fills an MPUB, and how many messages were read."""

    def __init__(self, producer: Producer, plan: PubPlan, result: PubResult) -> None:
        self.producer = producer
        self.plan = plan
        self.result = result
        self.window = _Window(result)
        self.pacer = Pacer(plan.rate)
        self.send = _sender(producer, plan, result)
        self.fits = _fits(producer, plan)
        self.read = 0
        self.held = Batch([])  # less than a full MPUB, waiting for more input
        self.capacity = WINDOW
        self.spread = plan.partition is None and plan.shard is None and plan.shard_field is None

    async def send_one(self, chunk: Batch) -> None:
        window = self.window
        await self.pacer.wait(len(chunk))
        await self.send(chunk, window)
        if self.spread:  # known once the first publish has asked where the topic lives
            known = self.producer.known_topology(self.plan.topic)
            connections = len(known.targets()) if known is not None else 0
            if connections:
                self.spread = False
                self.capacity = WINDOW * connections
        # Until the window has room again, not until any one batch settles: a keyed chunk
        # launches a batch per route, and while one route stalls (a leader move) the
        # others' OKs would let its batches pile up without bound, and input with them.
        while len(window.tasks) >= self.capacity:
            await window.settle(False)

    async def take(self, batch: Batch) -> None:
        """One batch read: sent in full MPUBs, the rest held; a line nsqd cannot take is
        skipped (--skip-too-large) or ends the publish after what came before it."""
        whole, refused = batch, self.fits(batch)
        if refused is not None and self.plan.skip_too_large:
            batch, refused = _skip_too_large(whole, self.fits, self.result.lines), None
        elif refused is not None:  # publish what came before it, then stop
            batch = whole.cut(0, refused)
        self.read += len(batch)
        for piece, alone in _around_large(batch):
            if alone:
                await self._send_alone(piece)
            else:
                await self._hold(piece)
        if batch.flush or refused is not None:  # don't sit on what came
            await self._send_held()
        if refused is not None:
            raise _too_large(whole, refused, self.producer.options.max_body_size)

    async def _send_alone(self, piece: Batch) -> None:
        """A line nsqd may refuse for its size goes on its own, once all before it is
        confirmed, and before anything after it is sent: a refusal then stops the publish
        at that line."""
        await self._send_held()
        await self.window.settle(True)
        await self.send_one(piece)
        try:
            await self.window.settle(True)
        except BadMessageError:
            if not self.plan.skip_too_large:
                raise
            self.result.lines.skipped(piece.number(0))

    async def _hold(self, piece: Batch) -> None:
        """Add ``piece`` to what is held, sending every full MPUB of it."""
        held, size = self.held.join(piece), self.plan.batch
        start = 0
        while len(held) - start >= size:
            await self.send_one(held.cut(start, start + size))
            start += size
        self.held = held.cut(start, len(held))

    async def _send_held(self) -> None:
        if self.held:
            await self.send_one(self.held)
            self.held = Batch([])

    async def finish(self) -> None:
        """The input ended: send what is held, and wait for every answer."""
        await self._send_held()
        await self.window.settle(True)

    async def stop_on_bad_input(self, err: ConfigError) -> None:
        """Bad input mid-stream: let the valid batches already sent finish, then say
        exactly how far the publish got (raises)."""
        also = ""
        try:
            await self.window.settle(True)
        except (NsqctlError, OSError) as publish_err:
            await self.window.abandon()
            also = f"; publishing had also failed: {publish_err}"
        done = self.result.lines.describe(stopped=True)
        self.result.unpublished = self.read - self.result.published
        raise ConfigError(f"{err} ({done}{also})", setting=err.setting) from None

    async def fail(self, err: NsqctlError | OSError) -> None:
        await self.window.abandon()
        self.result.error = err
        # Everything read but not confirmed, plus what was never read (unknown: 0).
        self.result.unpublished = self.read - self.result.published

    async def interrupt(self) -> None:
        """Ctrl-C: the batches sent get INTERRUPT_GRACE to be answered, then are given up."""
        self.result.interrupted = True
        with contextlib.suppress(asyncio.CancelledError):  # a second Ctrl-C
            await self.window.answered(INTERRUPT_GRACE)
        await self.window.abandon()
        self.result.unpublished = self.read - self.result.published


async def require_ext_topic(producer: Producer, topic: str) -> None:
    """Refuse an ext header before anything is published unless the lookupds say
    ``topic`` is an ext topic: nsqd refuses PUB_EXT elsewhere only message by message."""
    topo = await producer.topology(topic)
    if topo.is_redesign and topo.meta is not None and topo.meta.extend_support:
        return
    if topo.is_redesign and topo.meta is not None:
        why = f"topic {topic!r} is not an ext topic (create one with `topic create --ext`)"
    elif topo.topic_not_found:
        why = f"topic {topic!r} was not found (create it with `topic create --ext`)"
    else:  # the original family, or only --nsqd given: no topic metadata to check
        why = (
            f"topic {topic!r} is not known as an ext topic: headers need an ext topic of "
            "the redesign (youzan nsq), checked through --lookupd"
        )
    raise ConfigError(f"--header: {why}; nothing was published")


#: nsqd's default --max-msg-size: a longer message may be refused, and nsqd does not say
#: its own limit, so such a line is sent on its own (see :func:`_around_large`)
NSQD_DEFAULT_MAX_MSG_SIZE = 1 << 20


def _first_longer(bodies: list[bytes], size: int) -> int | None:
    """The index of the first body longer than ``size`` bytes, else None."""
    if not bodies or len(max(bodies, key=len)) <= size:
        return None  # the usual case: one pass over the lengths
    return next(i for i, body in enumerate(bodies) if len(body) > size)


def _around_large(batch: Batch) -> Iterator[tuple[Batch, bool]]:
    """``batch`` in consecutive pieces, each line longer than nsqd's default
    --max-msg-size a piece of its own (``True``)."""
    while batch.bodies:
        index = _first_longer(batch.bodies, NSQD_DEFAULT_MAX_MSG_SIZE)
        if index is None:
            yield batch, False
            return
        if index:
            yield batch.cut(0, index), False
        yield batch.cut(index, index + 1), True
        batch = batch.cut(index + 1, len(batch))


def _fits(producer: Producer, plan: PubPlan) -> Callable[[Batch], int | None]:
    """The check of each batch read: the index of its first message that no publish can
    carry (larger alone than the producer's body limit), else None. Checked before the
    batch is sent, so that nothing after a refused line goes out; the library would
    refuse it only inside a pipelined batch, with batches after it already sent."""
    overhead = MPUB_TRACE_ENTRY_OVERHEAD if plan.trace is not None else MPUB_ENTRY_OVERHEAD
    largest = producer.options.max_body_size - mpub_body_size([b""], overhead)
    return lambda batch: _first_longer(batch.bodies, largest)


def _skip_too_large(batch: Batch, fits: Callable[[Batch], int | None], lines: LineLedger) -> Batch:
    """``batch`` without its lines too large to publish, each noted in ``lines``."""
    kept: list[int] = []
    start = 0
    while (index := fits(batch.cut(start, len(batch)))) is not None:
        kept.extend(range(start, start + index))
        lines.skipped(batch.number(start + index))
        start += index + 1
    kept.extend(range(start, len(batch)))
    if not kept:
        return Batch([])
    numbers = [batch.number(i) for i in kept]
    return Batch([batch.bodies[i] for i in kept], numbers[0], numbers)


def _too_large(batch: Batch, index: int, limit: int) -> ConfigError:
    return ConfigError(
        f"input line {batch.number(index)} ({len(batch.bodies[index])} bytes) is larger "
        f"than nsqd takes: one message must fit nsqd's --max-msg-size (1 MiB by default) "
        f"and {limit} bytes here; split the input into smaller messages, or pass "
        "--skip-too-large to publish the other lines",
        setting="max_body_size",
    )


def _stop_on_sigint(result: PubResult) -> None:
    """Ctrl-C: note it, then cancel the publishing task. Noted first because on Python
    3.11 a cancel can be lost when it lands as a ``wait_for`` finishes (CPython gh-86296):
    the task would go on reading stdin and exit 0 at its end, as if never interrupted."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def interrupt() -> None:
        result.interrupted = True
        if task is not None:
            task.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
        loop.add_signal_handler(signal.SIGINT, interrupt)


Sender = Callable[[Batch, _Window], Awaitable[None]]


def _sender(producer: Producer, plan: PubPlan, result: PubResult) -> Sender:
    """The function that turns one chunk of records into launched publish tasks."""
    topic = plan.topic

    if plan.defer_ms is not None:
        delay = plan.defer_ms / 1000  # the flag is in milliseconds, the library in seconds
        return _one_by_one(lambda body: producer.publish_deferred(topic, body, delay), result)
    if plan.headers:
        headers = plan.headers
        return _one_by_one(
            lambda body: producer.publish_ext(
                topic, body, headers, partition=plan.partition, shard_key=plan.shard
            ),
            result,
        )

    def launch(window: _Window, chunk: Batch, part: int | None, key: Any) -> None:
        bodies, lines = chunk.bodies, spans_of(chunk)
        if plan.trace is None:
            publish = producer.publish_many(topic, bodies, partition=part, shard_key=key)
            window.launch(publish, len(bodies), lines)
            return
        fixed = None if plan.trace == "auto" else parse_trace_id(plan.trace)
        items = [(fixed if fixed is not None else random.getrandbits(63), b) for b in bodies]
        # counted by the receipt hook, batch by batch
        traced = producer.publish_traced_many(topic, items, partition=part, shard_key=key)
        window.launch(traced, 0, lines)

    async def send(chunk: Batch, window: _Window) -> None:
        if plan.shard_field is None:
            launch(window, chunk, plan.partition, plan.shard)
            return
        # Group the chunk by where each key lands, keeping input order within a group.
        groups: dict[tuple[str, int | None], tuple[Any, list[bytes], list[int]]] = {}
        for record in chunk.records():
            key = shard_key_from_json(record, plan.shard_field)
            route = await producer.route(topic, key)
            group = groups.setdefault(route, (key, [], []))
            group[1].append(record.body)
            group[2].append(record.number)
        for key, bodies, numbers in groups.values():
            launch(window, Batch(bodies, numbers[0], numbers), None, key)

    return send


def _one_by_one(publish: Callable[[bytes], Awaitable[object]], result: PubResult) -> Sender:
    """A sender for a publish with no batch form (DPUB, PUB_EXT): each message on its
    own, each OK counted as it comes, so after a failure the report names exactly what
    was not confirmed."""

    async def each(chunk: Batch) -> None:
        done = 0
        try:
            for body in chunk.bodies:
                await publish(body)
                result.published += 1
                done += 1
        except BaseException as err:
            # the one that failed may have been sent; those after it were not
            failed, after = (
                spans_of(chunk.cut(done, done + 1)),
                spans_of(chunk.cut(done + 1, len(chunk))),
            )
            if isinstance(err, (BadMessageError, BadBodyError, InvalidError)):
                # nsqd checks a command whole before storing it, and this one carried
                # only this message: refused, so not stored (a batch of several MPUBs
                # could not say which of them was refused). Both families answer
                # E_INVALID (a DPUB delay beyond --max-req-timeout) only before storing.
                result.lines.refused_by_nsqd(failed)
            else:
                unanswered(result.lines, failed, err)
            result.lines.not_sent(after)
            raise

    async def send(chunk: Batch, window: _Window) -> None:
        window.launch(each(chunk), 0, [])
        result.lines.launched(spans_of(chunk))

    return send


def _receipt_json(receipt: Receipt) -> dict[str, Any]:
    return {
        "topic": receipt.topic,
        "partition": receipt.partition,
        "nsqd": receipt.nsqd,
        "internal_id": receipt.internal_id,
        "trace_id": receipt.trace_id,
        "trace_ids": list(receipt.trace_ids),
        "offset": receipt.offset,
        "size": receipt.size,
        "count": receipt.count,
    }
