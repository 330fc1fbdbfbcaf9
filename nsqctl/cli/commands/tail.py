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
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NamedTuple

import typer

from nsqctl import protocol as p
from nsqctl.cli import complete
from nsqctl.cli.commands.tail_partitions import check_partitions
from nsqctl.cli.commands.tail_stop import CaughtUpCheck, UnansweredWait, UntilTime
from nsqctl.cli.flags import (
    GLOBAL_FLAGS,
    SIGPIPE_STATUS,
    ClusterSelection,
    LookupdOption,
    NsqdHttpOption,
    NsqdOption,
    ProfileOption,
    resolve_cluster,
)
from nsqctl.cli.library_warnings import command_warnings
from nsqctl.cli.numbers import rate as rate_number
from nsqctl.cli.numbers import seconds
from nsqctl.cli.output.fd import WriteStop, stream_fd, write_fully
from nsqctl.cli.output.messages import format_message
from nsqctl.cli.output.pipe_acks import PipeAcks, hangup_poll, pipe_acks_for
from nsqctl.cli.output.template import TOKENS_HELP, Template, compile_template, is_template
from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions, ConsumerStats, FailoverEvent
from nsqctl.consumer.lanes import OrderedLanes
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.failover import DEFAULT_FAILOVER_WINDOW
from nsqctl.jsonfield import MISSING, get_field, scalar_text
from nsqctl.message import Message, finish_all
from nsqctl.protocol.names import is_ephemeral, validate_channel, validate_topic
from nsqctl.protocol.raw_message import RawMessage
from nsqctl.timeparse import parse_time_ns, parse_time_s
from nsqctl.tracelog import TraceLog, TraceLogWriteError

FLUSH_INTERVAL = 0.1  # output reaches a terminal at least this often
# On a pipe, how often to look whether the reader took what is owed (while anything is)
PIPE_CHECK_INTERVAL = 0.002
# On a pipe, seconds to wait after a write before a second look at whether its reader
# took it, when the first found it not yet taken
PIPE_FIRST_LOOK = 0.00002
# On a pipe, arrivals between two looks at what its reader took (a syscall each)
PIPE_CHECK_EVERY = 8
# At exit, seconds to wait for the pipe's reader to handle what is owed to it
SETTLE_TIMEOUT = 5.0
# --until-empty/--until: seconds between two /stats checks that found messages left,
# doubling while nothing arrives (a channel another consumer holds back may stay so)
STOP_CHECK_MIN = 0.1
STOP_CHECK_MAX = 2.0


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
            if "" in name.split("."):  # a..b, .a, a.: a key that no JSON body could match
                raise ConfigError(
                    f"bad --jq-field {item!r}: FIELD is keys joined by single dots (e.g. user.id)"
                )
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
        except (ValueError, RecursionError):  # not JSON, not UTF-8, nested beyond reason
            return False
        for name, want in self.fields:
            value = get_field(obj, name)
            if value is MISSING or scalar_text(value) != want:  # no such field: no match
                return False
        return True


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
        return p.start_timestamp(parse_time_s(from_time))
    return None


class TailOutput:
    """Buffers formatted messages; flush writes them, then FINs exactly those messages."""

    def __init__(
        self,
        out: BinaryIO,
        fmt: str,
        print_topic: bool,
        limit: int,
        window: int,
        keep: MessageFilter | None = None,
        intake_stopper: Callable[[], None] | None = None,
        template: Template | None = None,
        until: UntilTime | None = None,
        ack_when_read: bool = False,
    ) -> None:
        self.out = out
        self.template = template
        self.until = until
        # Messages taken in (not held back by --until): a stop check that saw this
        # unchanged from its start to its end raced with no delivery.
        self.arrivals = 0
        # Set when --until met a message of the original family (it has no partitions).
        self.unpartitioned = False
        # Sets the consumer's RDY to 0. Called before anything is given back (else nsqd
        # sends it straight back) and before the last FIN when -n is reached (on an
        # ordered channel that FIN would release the next message, only to be given back).
        self.intake_stopper = intake_stopper
        self.keep = keep if keep is not None and keep.active else None
        # Flush (and FIN) before the RDY window is full, or nsqd stops sending until the
        # timer flush: throughput would be capped at one window per FLUSH_INTERVAL.
        self.flush_at = max(1, min(512, window // 2))
        self.fmt = fmt
        self.print_topic = print_topic
        self.limit = limit
        self.pending: list[Message] = []
        self.written = 0
        # Held for each write and for the counts it moves: ordered partitions read on
        # threads of their own (see nsqctl.consumer.lanes) write through write_lane.
        self.lock = threading.Lock()
        # Set when the tail should end (-n reached, the reader gone, a signal): the main
        # loop waits on it, so a stop is acted on at once, not at the next timer flush.
        self.done = asyncio.Event()
        self.closing = False
        self.reader_gone = False
        # The write to the output that failed (a full disk, an I/O error): tail stops.
        self.write_error: OSError | None = None
        # The file descriptor written to, found once (None: an in-memory stream).
        self._fd = stream_fd(out)
        # Set by a signal: a write waiting on a stalled reader gives up (see _write).
        self.write_stop = WriteStop(self._fd)
        self.interrupts = 0  # signals so far (see interrupt)
        self._hangup = hangup_poll(self._fd)
        # ``ack_when_read`` (a durable channel, whose messages outlive tail): on a pipe a
        # message is FINed once its reader has handled it, not when written. An ephemeral
        # channel goes with tail, and everything in it: there is nothing to keep.
        self.pipe = pipe_acks_for(self._fd, self._hangup) if ack_when_read else None
        self._look: asyncio.TimerHandle | None = None
        # write_lane's line prefix (--print-topic)
        self.lane_prefix = b""
        if self.pipe is not None:
            # What was written stays in flight until its reader comes back for more:
            # smaller batches keep the window from filling with what it owes.
            self.flush_at = max(1, min(512, window // 4))

    @property
    def fd(self) -> int | None:
        """The file descriptor written to; None for an in-memory stream."""
        return self._fd

    def stop_intake(self) -> None:
        """RDY 0 (idempotent): nothing more is sent to this tail."""
        if self.intake_stopper is not None:
            self.intake_stopper()

    def give_back(self, msg: Message) -> None:
        """REQ ``msg`` at once, after RDY 0: with RDY still open nsqd would deliver it
        straight back, to be given back again (each time raising its attempts)."""
        self.stop_intake()
        msg.requeue(delay=0, backoff=False)

    def close(self) -> None:
        """From now on nothing is written and every arriving message is given back (once).
        What was taken and not written yet is given back now (after RDY 0): nothing
        would write it any more, and it would stay in flight until nsqd's msg_timeout."""
        self.stop_intake()
        self.closing = True
        self.done.set()
        unwritten, self.pending = self.pending, []
        for msg in unwritten:
            msg.requeue(delay=0, backoff=False)

    def forget_answered(self) -> None:
        """The consumer answered messages this output holds: it closes itself when its
        start fails, giving back every message kept (unprinted or owed by the pipe's
        reader). They are dropped here, so that nothing prints or answers them again."""
        self.pending = [msg for msg in self.pending if msg.outcome is None]
        if self.pipe is not None:
            self.pipe.forget_answered()

    def _reader_gone(self) -> None:
        """Stop (giving back what was not written), and give back once what was written
        into the pipe and not handled by its reader."""
        self.reader_gone = True
        owed = self.pipe.take_all() if self.pipe is not None else []
        self.close()
        for msg in owed:
            msg.requeue(delay=0, backoff=False)
        # Python would report the broken pipe again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, self.out.fileno())
        os.close(devnull)

    def _write_failed(self, err: OSError) -> None:
        """The output cannot be written: stop, and give back what was not written (once,
        after RDY 0); what was written before stays acknowledged."""
        self.write_error = err
        self.close()

    def check_reader(self) -> None:
        """End the tail as a broken pipe would when the pipe's reader has gone: ``tail T |
        head -n 3`` on a quiet topic has nothing more to write, so no write would tell.
        One ``poll`` per tick of the main loop, not per message (as coreutils' ``tail -f``
        does)."""
        if self._hangup is not None and not self.closing and self._hangup.poll(0):
            self._reader_gone()

    def add(self, msg: Message) -> None:
        msg.disable_auto_response()
        if self.closing:
            self.give_back(msg)  # sent before nsqd saw RDY 0
            return
        until = self.until
        if until is not None:
            if msg.partition is None:  # --until needs the redesign: stop, print nothing
                self.unpartitioned = True
                self.give_back(msg)
                self.close()
                return
            if until.holds(msg):
                return
        with self.lock:
            self.arrivals += 1
        if self.limit and self.written + len(self.pending) >= self.limit:
            self.give_back(msg)  # beyond -n: untouched
            return
        if self.keep is not None and not self.keep.matches(msg.body):
            msg.finish()  # filtered out: looked at and handled, nothing to print
            return
        pending = self.pending
        pending.append(msg)
        if self.pipe is not None and self.pipe.owed and not len(pending) % PIPE_CHECK_EVERY:
            self.ack_handled()  # the window is shared with what the reader still owes
        if len(pending) >= self.flush_at or (
            self.limit and self.written + len(pending) >= self.limit
        ):
            self.flush()

    def _render(self, msgs: list[Message]) -> bytes:
        """The output of ``msgs``, formatted when written (one join for the plain body
        lines, not a concatenation per message)."""
        if self.template is not None:
            return self.template.render_all(msgs)
        if self.fmt == "raw" and not self.print_topic:
            if len(msgs) == 1:
                return msgs[0].body + b"\n"
            lines = [msg.body for msg in msgs]
            lines.append(b"")
            return b"\n".join(lines)
        fmt, print_topic = self.fmt, self.print_topic
        return b"".join([format_message(msg, fmt, print_topic) for msg in msgs])

    def _write(self, data: bytes) -> int:
        """All of ``data`` to the file descriptor (see :mod:`nsqctl.cli.output.fd`); the
        bytes written, fewer when a signal came while a stalled reader took nothing."""
        return write_fully(self.out, self._fd, data, self.write_stop)

    def interrupt(self) -> None:
        """A signal (Ctrl-C, SIGTERM), in the main thread: a write waiting for a stalled
        reader gives up, on the loop and on the lanes, and so does every later one the
        reader does not take at once; the tail then stops, giving back the rest. A
        second one (or one while it waits for the pipe's reader) ends that wait too."""
        self.interrupts += 1
        self.write_stop.set()

    def _write_stopped(self, batch: list[Message], written: int) -> None:
        """The flush of ``batch`` was stopped (see :meth:`interrupt`) after ``written``
        bytes: the messages whose output is all out count as written (FINed, or owed by
        the pipe's reader); the rest, a message cut short among them, are given back."""
        whole = 0
        out_bytes = 0
        for msg in batch:
            size = len(self._render([msg]))
            if out_bytes + size > written:
                break
            out_bytes += size
            whole += 1
        done, rest = batch[:whole], batch[whole:]
        with self.lock:
            self.written += len(done)
        # RDY 0 before the FINs: the tail is ending, and FINs with the window open would
        # have nsqd send as many again, only to be given back (their attempts raised).
        self.stop_intake()
        if self.pipe is None:
            finish_all(done)
        elif written:  # a line cut short counts too: the reader must pass it first
            self.pipe.wrote(written, done)
        self.pending = rest
        self.close()  # gives back what is pending, once, after RDY 0

    def flush(self) -> None:
        """Write and FIN the pending messages; a closed reader (``| head``) ends the tail
        quietly and gives the unwritten messages back."""
        if not self.pending or self.closing:
            return
        pending = self.pending
        data = self._render(pending)
        try:
            with self.lock:
                done = self._write(data)
                if done == len(data):
                    self.written += len(pending)
                else:  # nothing more from a lane after what the stop cut short
                    self.closing = True
        except BrokenPipeError:
            self._reader_gone()
            return
        except OSError as err:
            self._write_failed(err)
            return
        if done < len(data):
            self._write_stopped(pending, done)
            return
        limit = self.limit
        if limit and self.written >= limit:
            self.stop_intake()
        if self.pipe is None:
            finish_all(pending)
            pending.clear()
        else:
            self.pipe.wrote(len(data), pending)
            self.pending = []
            if not self.ack_handled():
                # A reader that keeps up (cat, a script's read loop) takes the bytes and
                # waits for more within microseconds: one short look then saves the
                # timer's round (an ordered subscription sends its next message only
                # after this FIN).
                time.sleep(PIPE_FIRST_LOOK)
                self.ack_handled()
            self._look_again()
        if limit and self.written >= limit:
            self.done.set()

    def write_lane(self, raws: list[RawMessage]) -> bool:
        """On an ordered partition's reader thread: write the lines of ``raws`` (plain
        bodies) before their FIN. False leaves them to the loop, unwritten: closing, the
        last message before -n (the loop stops the intake before its FIN), a broken pipe
        (the loop's write meets it again and ends the tail), a signal while the reader
        took nothing (:meth:`interrupt`: the loop gives them back as it stops). A line
        the signal cut short (longer than ``PIPE_BUF``, or part taken by a socket or a
        terminal) is the last thing written: closing from then on."""
        count = len(raws)
        prefix = self.lane_prefix
        if count == 1:
            data = prefix + raws[0].body + b"\n" if prefix else raws[0].body + b"\n"
        else:
            data = b"".join([prefix + raw.body + b"\n" for raw in raws])
        with self.lock:
            if self.closing or (self.limit and self.written + count >= self.limit):
                return False
            try:
                written = self._write(data)
            except OSError:
                return False
            if written < len(data):
                # Part of a line is out: anything written after it (this message again,
                # by the loop, once the reader takes bytes) would run on from it, one line
                # that is no message. The loop gives the message back instead.
                self.closing = self.closing or written > 0
                return False
            self.written += count
            self.arrivals += count
        return True

    def _look_again(self) -> None:
        """While the pipe's reader owes anything, look every PIPE_CHECK_INTERVAL: until
        it took what was written, those messages fill the window and nsqd sends no more
        (on an ordered subscription, the next message of the partition never comes)."""
        if self._look is None and self.pipe is not None and self.pipe.owed:
            self._look = asyncio.get_running_loop().call_later(
                PIPE_CHECK_INTERVAL, self._timed_look
            )

    def _timed_look(self) -> None:
        self._look = None
        if not self.closing:
            self.ack_handled()
            self._look_again()

    def ack_handled(self) -> bool:
        """FIN what the pipe's reader has handled (see :mod:`nsqctl.cli.output.pipe_acks`);
        whether there was any."""
        if self.pipe is not None:
            handled = self.pipe.handled()
            if handled:
                finish_all(handled)
                return True
        return False

    @property
    def owed(self) -> int:
        """Messages written into the pipe and not yet handled by its reader."""
        return self.pipe.owed if self.pipe is not None else 0

    async def settle(self, timeout: float = SETTLE_TIMEOUT) -> None:
        """At exit: FIN what the pipe's reader handles within ``timeout`` seconds; give
        back what it leaves (all of it when it goes away), saying so when it is still there."""
        pipe = self.pipe
        if pipe is None:
            return
        try:
            await self._settle(pipe, timeout)
        finally:
            pipe.close()

    async def _settle(self, pipe: PipeAcks, timeout: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        # The signal that stopped the tail (if one did) waits for the reader; a second
        # one, or one that comes while it waits, ends the wait (gives back at once).
        begun = self.interrupts
        hurried = False
        while pipe.owed and not pipe.reader_gone():
            self.ack_handled()
            hurried = self.interrupts > begun or self.interrupts >= 2
            if hurried or asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(PIPE_CHECK_INTERVAL)
        if not pipe.owed:
            return
        gone = pipe.reader_gone()
        unread = 0 if gone else pipe.unread()
        # Given back before the notice: standard error may be the same stalled pipe.
        self.stop_intake()
        for msg in pipe.take_all():
            msg.requeue(delay=0, backoff=False)
        if gone:
            self.reader_gone = True
        else:
            waited = "when interrupted again" if hurried else f"after {timeout:g}s"
            self.notice(
                f"nsqctl tail: {unread} message(s) still unread in the pipe {waited}: "
                "given back to nsqd, so they come again (the reader may print them too)"
            )

    def notice(self, text: str) -> None:
        """A line to standard error, under the output's stop (:meth:`interrupt`): after a
        signal it is dropped from where standard error takes nothing more (``2>&1 |
        less`` scrolled back), instead of waiting in the kernel, where no signal ends a
        write to a pipe."""
        err = sys.stderr
        err.flush()
        try:
            fd = err.fileno()
        except (AttributeError, OSError, ValueError):  # an in-memory stream (CliRunner)
            print(text, file=err, flush=True)
            return
        with contextlib.suppress(OSError):  # nowhere left to say it
            write_fully(self.out, fd, f"{text}\n".encode(), self.write_stop.watching(fd))


class TailSource(NamedTuple):
    """What the tail reads from, and how fast it asks nsqd for messages.

    The plan's parts are NamedTuples, not dataclasses: defining them costs a fraction
    of a dataclass, and ``nsqctl tail`` defines them at every start."""

    topic: str
    channel: str  # an ephemeral nsqctl_tail_<rand> when --channel is left out
    partitions: list[int] | None = None  # None: every partition
    ordered: bool = False
    start: str | None = None  # the SUB_ADVANCED start of a --from-* read
    max_in_flight: int = 200
    rate: float | None = None  # messages/s at most: RDY withheld, never a sleep per message
    connect_timeout: float | None = None  # None: keep trying at start
    failover_window: float = DEFAULT_FAILOVER_WINDOW


class TailStop(NamedTuple):
    """When the tail ends by itself (a signal or its reader going away end it too)."""

    limit: int = 0  # -n: 0 for no limit
    until_empty: bool = False
    until_ns: int | None = None  # --until, in nanoseconds since the epoch

    @property
    def reads_stats(self) -> bool:
        """--until-empty and --until learn that the channel is caught up from /stats."""
        return self.until_empty or self.until_ns is not None


class TailPrinting(NamedTuple):
    """Which messages are printed, and how."""

    fmt: str = "raw"  # raw | json | pretty, or the template's source
    print_topic: bool = False
    template: Template | None = None
    keep: MessageFilter = MessageFilter()  # what is not kept is FINed unprinted


class TailPlan(NamedTuple):
    """Everything ``nsqctl tail`` was asked to do, checked, before it connects."""

    source: TailSource
    stop: TailStop = TailStop()
    printing: TailPrinting = TailPrinting()
    trace_log: Path | None = None  # a consume record per message acknowledged

    @property
    def time_travel(self) -> bool:
        """A --from-* or --until read: it runs on a temporary channel."""
        return self.source.start is not None or self.stop.until_ns is not None

    @property
    def ack_when_read(self) -> bool:
        """Where a message is acknowledged: on a durable channel (its messages outlive
        tail) once a pipe's reader has handled it; on an ephemeral one once written."""
        return not is_ephemeral(self.source.channel)


def tail(
    topic: str = typer.Argument(..., help="Topic to read.", autocompletion=complete.topics),
    channel: str | None = typer.Option(
        None,
        "--channel",
        "-c",
        help="Channel (default: an ephemeral nsqctl_tail_<rand>).",
        autocompletion=complete.channels,
    ),
    count: int = typer.Option(0, "--count", "-n", min=0, help="Stop after N messages."),
    partitions: list[int] = typer.Option(
        None, "--partition", min=0, help="Partition(s) to read.", autocompletion=complete.partitions
    ),
    ordered: bool = typer.Option(False, "--ordered", help="Ordered subscription (redesign)."),
    max_in_flight: int = typer.Option(200, "--max-in-flight", min=1),
    rate: float | None = typer.Option(
        None,
        "--rate",
        parser=rate_number(),
        help="Read at most N messages/s (a slow consumer): nsqd is given RDY at that pace, "
        "so no more are in flight than are about to be printed.",
    ),
    fmt: str = typer.Option(
        "raw",
        "--format",
        help="raw | json | pretty, or a kcat-style template (any value with a %): " + TOKENS_HELP,
    ),
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
        None, "--from-offset", min=0, help="Start at this disk-queue offset (redesign)."
    ),
    until: str | None = typer.Option(
        None,
        "--until",
        metavar="TIME",
        help="Stop each partition at its first message published after TIME (Unix seconds "
        "or ISO 8601); exit 0 when every partition got there (or is caught up once TIME "
        "has passed). Redesign only; messages past TIME are given back, not printed.",
    ),
    until_empty: bool = typer.Option(
        False,
        "--until-empty",
        "-e",
        help="Exit 0 once the channel is caught up: every message printed and acknowledged, "
        "none left, in flight or deferred on any nsqd/partition (read from nsqd's /stats, "
        "so it needs --lookupd or --nsqd-http).",
    ),
    discard_unmatched: bool = typer.Option(
        False,
        "--discard-unmatched",
        help="With --grep/--jq-field on a durable --channel: acknowledge (discard) the "
        "messages that do not match. Without it tail refuses to filter a durable channel.",
    ),
    print_topic: bool = typer.Option(False, "--print-topic", help="Prefix lines with the topic."),
    trace_log: Path | None = typer.Option(
        None, "--trace-log", help="Append a consume record per message to this JSONL file."
    ),
    connect_timeout: float = typer.Option(
        5.0,
        "--connect-timeout",
        metavar="SECONDS",
        parser=seconds(zero=True),
        help="Give up when no nsqd of the topic can be reached at start within this time "
        "(0: keep trying); once connected, lost connections are retried (a partition of the "
        "redesign within --failover-window).",
    ),
    failover_window: float = typer.Option(
        DEFAULT_FAILOVER_WINDOW,
        "--failover-window",
        metavar="SECONDS",
        parser=seconds(zero=True),
        help="Seconds a partition may wait for a new leader (redesign, with --lookupd) "
        "before tail gives up (0: give up at once, as pub does).",
    ),
    lookupd: list[str] = LookupdOption,
    nsqd: list[str] = NsqdOption,
    nsqd_http: list[str] = NsqdHttpOption,
    profile: str | None = ProfileOption,
) -> None:
    """Print messages as they arrive (raw: the body and a newline, like nsq_tail).

    Each message is FINed only after its line was written and flushed; Ctrl-C stops
    cleanly, giving back anything not yet printed. On a durable channel into a pipe it
    first waits (up to 5 s) for the reader to take what was written; a second Ctrl-C
    ends that wait.

    --format takes a kcat-style template, e.g. '%T %a %s\\n'; with --until-empty (kcat's
    -e) tail exits 0 once the channel is caught up. A history read (--from-start,
    --from-time, --from-offset, --until) uses a temporary channel that nsqd deletes when
    tail exits, so no real channel is moved; --channel is refused with them.
    """
    template = parse_format(fmt, print_topic)
    validate_topic(topic)
    if channel is not None:
        validate_channel(channel)
    start, until_ns = parse_history(channel, from_start, from_time, from_offset, until)
    keep = parse_filter(grep, jq_field, channel, discard_unmatched)
    out = _stdout()
    cluster = resolve_cluster(lookupd, nsqd, profile, nsqd_http)
    stop = TailStop(limit=count, until_empty=until_empty, until_ns=until_ns)
    if stop.reads_stats and not (cluster.lookupd or cluster.nsqd_http):
        raise ConfigError(
            "--until-empty and --until read the channel's depth from nsqd's HTTP /stats: "
            "pass --nsqd-http HOST:PORT with --nsqd (or use --lookupd)"
        )
    source = TailSource(
        topic=topic,
        channel=channel if channel is not None else ephemeral_channel(),
        partitions=partitions or None,
        ordered=ordered,
        start=start,
        max_in_flight=max_in_flight,
        rate=rate,
        connect_timeout=connect_timeout or None,
        failover_window=failover_window,
    )
    printing = TailPrinting(fmt=fmt, print_topic=print_topic, template=template, keep=keep)
    plan = TailPlan(source, stop, printing, trace_log)
    with command_warnings("tail", tracebacks=GLOBAL_FLAGS.debug):
        asyncio.run(_tail(cluster, plan, out))


def parse_format(fmt: str, print_topic: bool) -> Template | None:
    """--format: the compiled template, or None for raw, json and pretty."""
    if not is_template(fmt):
        if fmt not in ("raw", "json", "pretty"):
            raise ConfigError(
                f"unknown --format {fmt!r}: use raw, json, pretty or a template with %s etc."
            )
        return None
    template = compile_template(fmt)
    if print_topic:
        raise ConfigError("--print-topic does not apply to a --format template: use %t")
    return template


def parse_history(
    channel: str | None,
    from_start: bool,
    from_time: str | None,
    from_offset: int | None,
    until: str | None,
) -> tuple[str | None, int | None]:
    """The SUB_ADVANCED start (--from-*) and the --until end in nanoseconds; refused on a
    named channel that is not ephemeral."""
    start = parse_start(from_start, from_time, from_offset)
    until_ns = parse_time_ns(until) if until is not None else None
    time_travel = start is not None or until_ns is not None
    if time_travel and channel is not None and not is_ephemeral(channel):
        _refuse_time_travel_on(channel)
    return start, until_ns


def parse_filter(
    grep: str | None, jq_field: list[str] | None, channel: str | None, discard_unmatched: bool
) -> MessageFilter:
    """--grep and --jq-field; refused on a named durable channel without --discard-unmatched."""
    keep = MessageFilter.parse(grep, jq_field)
    if keep.active and channel is not None and not discard_unmatched:
        _refuse_filtering_durable(channel)
    return keep


def ephemeral_channel() -> str:
    """The channel tail reads when none is named: its own, gone when tail exits."""
    suffix = "".join(random.choices(string.digits, k=6))
    return f"nsqctl_tail_{suffix}#ephemeral"


def _refuse_time_travel_on(channel: str) -> None:
    """SUB_ADVANCED moves the channel it subscribes: on a real channel that would skip or
    repeat messages for whoever else reads it. History is read on a temporary channel."""
    raise ConfigError(
        f"--from-start/--from-time/--from-offset/--until read history on a temporary "
        f"channel, never on {channel!r} (it would move that channel for its readers): "
        "leave out --channel"
    )


def _refuse_filtering_durable(channel: str) -> None:
    """A filter acknowledges what it does not print; on a durable channel that deletes the
    messages for whoever else reads that channel, so it must be asked for by name."""
    if channel.endswith("#ephemeral"):
        return
    raise ConfigError(
        f"--grep/--jq-field on the durable channel {channel!r} would acknowledge (delete) "
        "every message that does not match: filter on an ephemeral channel (leave out "
        "--channel, or name one ending in #ephemeral), or add --discard-unmatched"
    )


def _connection_config(cluster: ClusterSelection, source: TailSource) -> ConnectionConfig:
    """Each connection's own deadlines follow --connect-timeout too: a handshake timeout
    names that flag as the one to change (it is twice the connect timeout)."""
    if source.connect_timeout is None:  # 0: keep trying, each attempt with the default
        return cluster.consumer_config(source.channel)
    return cluster.consumer_config(source.channel, connect_timeout=source.connect_timeout)


def _output(plan: TailPlan, out: BinaryIO, until: UntilTime | None) -> TailOutput:
    # Ordered: one message in flight per partition, so each must be flushed (and FINed)
    # at once or the next never comes until the timer flush.
    window = 1 if plan.source.ordered else plan.source.max_in_flight
    printing = plan.printing
    return TailOutput(
        out,
        printing.fmt,
        printing.print_topic,
        plan.stop.limit,
        window,
        printing.keep,
        template=printing.template,
        until=until,
        ack_when_read=plan.ack_when_read,
    )


def _consumer(
    cluster: ClusterSelection, plan: TailPlan, output: TailOutput, log: TraceLog | None
) -> Consumer:
    source = plan.source
    return Consumer(
        source.topic,
        source.channel,
        output.add,
        lookupd_http=cluster.lookupd or None,
        nsqd_tcp=None if cluster.lookupd else (cluster.nsqd or None),  # the lookup's win
        config=_connection_config(cluster, source),
        options=ConsumerOptions(
            max_in_flight=source.max_in_flight,
            max_rate=source.rate,
            partitions=source.partitions,
            ordered=source.ordered,
            start=source.start,
            connect_timeout=source.connect_timeout,
            failover_window=source.failover_window,
        ),
        trace_log=log,
        on_failover=_on_failover,
    )


def _on_failover(event: FailoverEvent) -> None:
    print(f"nsqctl tail: {event.describe()}", file=sys.stderr, flush=True)


def _idle(output: TailOutput, consumer: Consumer, until: UntilTime | None) -> bool:
    """Nothing unprinted or unanswered here but what --until holds back."""
    held = len(until.held) if until is not None else 0
    return not output.pending and consumer.in_flight == held


async def _finished(
    check: CaughtUpCheck,
    output: TailOutput,
    consumer: Consumer,
    until: UntilTime | None,
    down: UnansweredWait,
) -> bool:
    """--until-empty / --until reached: the channel is caught up (every partition past
    --until or, once TIME has passed, caught up), with no delivery during the check.
    Raises when only nsqds that do not answer /stats have stood in the way too long."""
    if not _idle(output, consumer, until):
        return False
    before = output.arrivals
    if until is None:
        done = await check.caught_up()
    else:
        done = await check.caught_up(until.reached, only_done=not until.past())
    quiet = output.arrivals == before and _idle(output, consumer, until)
    down.update(check.unanswered if quiet else (), asyncio.get_running_loop().time())
    return done and quiet


def _log_failed(log: TraceLog | None) -> bool:
    """The trace log could not be written: tail stops rather than print untraced."""
    return log is not None and log.error is not None


def summary_words(stats: ConsumerStats, *, ordered: bool) -> str | None:
    """After a reconnect: what came twice (at-least-once), so a reader can account for it;
    None when nothing did. Resends by a new leader happen only on an ordered subscription
    (``--ordered``, redesign only): without one, that count is always 0 and saying it
    would suggest partitions the tail never read."""
    if not (stats.duplicates or stats.order_redeliveries or stats.reconnects):
        return None
    words = (
        f"nsqctl tail: {stats.reconnects} reconnect(s); {stats.duplicates} message(s) "
        "printed again after a reconnect (at-least-once)"
    )
    if ordered:
        words += (
            f", {stats.order_redeliveries} of them resent by a new leader on an ordered partition"
        )
    return words


def _summary(consumer: Consumer, output: TailOutput, *, ordered: bool) -> None:
    """The summary, as a notice: after Ctrl-C, not waiting on a standard error that stalled."""
    words = summary_words(consumer.stats, ordered=ordered)
    if words is not None:
        output.notice(words)


def _lanes(plan: TailPlan, output: TailOutput, consumer: Consumer) -> OrderedLanes | None:
    """``--ordered`` reads each partition on a thread of its own when all a message needs
    is its line written (raw output, no filter, --until, --rate or trace log), to a file
    descriptor that is not a pipe owed acknowledgements (a durable channel on a pipe FINs
    only what its reader took: the loop's timers keep those books)."""
    source, printing = plan.source, plan.printing
    if not source.ordered or printing.fmt != "raw" or printing.template is not None:
        return None
    if printing.keep.active or plan.stop.until_ns is not None or source.rate is not None:
        return None
    if plan.trace_log is not None or output.pipe is not None or output.fd is None:
        return None
    if printing.print_topic:
        output.lane_prefix = f"{source.topic} | ".encode()
    return OrderedLanes(
        lambda: consumer.connections,
        consumer.delivery,
        output,
        max_attempts=consumer.options.max_attempts,
    )


def _stdout() -> BinaryIO:
    """Where tail prints; refused up front when there is none (``nsqctl tail T >&-``)."""
    stream = sys.stdout
    if stream is None:  # Python found file descriptor 1 closed at start
        raise ConfigError(
            "standard output is closed: tail prints the messages there "
            "(redirect it instead, e.g. > FILE)"
        )
    return stream.buffer


async def _tail(cluster: ClusterSelection, plan: TailPlan, out: BinaryIO) -> None:
    run = TailRun(cluster, plan, out)
    run.stop_on_signals()
    try:
        await run.begin()
        await run.follow()
    finally:
        await run.wind_down()
    run.raise_outcome()


class TailRun:
    """One tail's parts (its output, consumer, ordered lanes, stop check and trace log)
    and the phases :func:`_tail` takes them through. Public so that a test can take a
    real tail through its phases at the moments it chooses (a stop while messages are
    still arriving), which a signal to a process cannot time."""

    def __init__(self, cluster: ClusterSelection, plan: TailPlan, out: BinaryIO) -> None:
        self.cluster = cluster
        self.plan = plan
        source, until_ns = plan.source, plan.stop.until_ns
        self.until = UntilTime(until_ns) if until_ns is not None else None
        self.output = _output(plan, out, self.until)
        self.check = (
            CaughtUpCheck(
                cluster.lookupd, cluster.nsqd_http, source.topic, source.channel, source.partitions
            )
            if plan.stop.reads_stats
            else None
        )
        self.log = TraceLog(plan.trace_log) if plan.trace_log is not None else None
        self.consumer = _consumer(cluster, plan, self.output, self.log)
        self.lanes = _lanes(plan, self.output, self.consumer)
        self.output.intake_stopper = self._stop_intake

    def _stop_intake(self) -> None:
        if self.lanes is not None:
            self.lanes.stop()  # the threads give the sockets back before RDY 0 goes out
        self.consumer.set_max_in_flight(0)

    def stop_on_signals(self) -> None:
        """Ctrl-C and SIGTERM end the tail as -n does: at once, cleanly."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, self.output.done.set)
                # asyncio runs done.set on the loop, which a write waiting on a stalled
                # reader holds (on the loop, or joining a lane that waits): Python's own
                # handler runs in the main thread even then, and ends that wait. asyncio
                # still dispatches the signal (its wake-up fd), and restores the handler.
                signal.signal(sig, self._interrupted)
                signal.siginterrupt(sig, False)  # as asyncio had it: fewer EINTRs

    def _interrupted(self, signum: int, frame: object) -> None:
        self.output.interrupt()

    async def begin(self) -> None:
        """Connect (the partitions asked for checked first); --until on the original
        family ends the tail at once, printing nothing."""
        source, output, consumer = self.plan.source, self.output, self.consumer
        await check_partitions(self.cluster.lookupd, source.topic, source.partitions or ())
        try:
            await consumer.start()
        except BaseException:
            output.forget_answered()
            raise
        if self.lanes is not None:
            self.lanes.lend()
        if self.until is not None and not any(c.is_redesign for c in consumer.connections.values()):
            output.unpartitioned = True
            output.close()
        if self.plan.time_travel and not output.unpartitioned:
            print(
                f"nsqctl tail: reading history on the temporary channel {source.channel} "
                "(nsqd deletes it when tail exits; no other channel is moved)",
                file=sys.stderr,
                flush=True,
            )

    async def follow(self) -> None:
        """Flush (and FIN) at every tick until the tail is done: -n reached, a signal, the
        reader gone, the consumer failed, the trace log failed, or (--until-empty,
        --until) the channel caught up, checked after a tick without arrivals."""
        output, consumer, lanes = self.output, self.consumer, self.lanes
        check, log = self.check, self.log
        loop = asyncio.get_running_loop()
        seen = -1  # arrivals at the previous tick: a check runs after a tick with none
        pause = STOP_CHECK_MIN  # between checks that found messages left: they cost a poll
        next_check = 0.0
        down = UnansweredWait(self.plan.source.connect_timeout)
        while not output.done.is_set() and consumer.error is None and not _log_failed(log):
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
            # lands just after the event is set (CPython gh-86296).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FLUSH_INTERVAL):
                    await output.done.wait()
            output.flush()
            output.check_reader()
            if lanes is not None:
                lanes.drain()
                lanes.lend()  # a partition taken back (an error frame, a new leader)
            if output.arrivals != seen:
                seen, pause, next_check = output.arrivals, STOP_CHECK_MIN, 0.0
            elif check is not None and not output.done.is_set() and loop.time() >= next_check:
                if await _finished(check, output, consumer, self.until, down):
                    break
                next_check = loop.time() + pause
                pause = min(pause * 2, STOP_CHECK_MAX)

    async def wind_down(self) -> None:
        """However the tail ended: FIN what was printed, give back the rest once, close."""
        output, until, log = self.output, self.until, self.log
        output.stop_intake()  # RDY 0 first: the FINs below must not release more messages
        output.flush()  # FIN what was printed before the connections close
        # Anything still arriving (sent before nsqd saw RDY 0) goes straight back, once,
        # from now on: settle may wait for the pipe's reader, and what came in meanwhile
        # would have joined the unprinted batch, neither printed nor given back, in
        # flight until nsqd's msg_timeout (as many as a flush takes, less one).
        output.close()
        await output.settle()  # on a pipe: once its reader has it, else given back
        if until is not None:
            until.give_back()  # what was past --until, unprinted: back once, after close
        if self.check is not None:
            await self.check.aclose()
        await self.consumer.stop(timeout=5)
        if log is not None:
            log.close()
        _summary(self.consumer, self.output, ordered=self.plan.source.ordered)

    def raise_outcome(self) -> None:
        """Why the tail ended, when that was not success: the error, or the exit status."""
        output, log = self.output, self.log
        if self.consumer.error is not None:
            raise self.consumer.error
        if log is not None and log.error is not None:
            raise TraceLogWriteError(
                f"{log.error}: stopped; what was printed was acknowledged (without its trace "
                "record), the rest given back"
            )
        if output.write_error is not None:
            cause = output.write_error.strerror or output.write_error
            # nsqctl's own error, of no narrower kind: nothing in the library raises it
            raise NsqctlError(
                f"cannot write to standard output ({cause}): stopped; what was printed was "
                "acknowledged, the rest given back"
            )
        if output.unpartitioned:
            raise ConfigError(
                "--until needs the redesign (youzan nsq): the original family keeps no history "
                "to read up to a time; stop with -n N or --until-empty instead"
            )
        if output.reader_gone:
            # Quietly, with the status a Unix tool killed by SIGPIPE has (128 + 13), so that
            # `set -o pipefail` sees tail stopped early, as it does for `yes | head`.
            raise typer.Exit(SIGPIPE_STATUS)
