"""The archive consumer loop: hold messages un-FINed, write them durably, then FIN them.

Every delivered message stays in flight until the Parquet file holding it is fsynced and
renamed into place. Rotation happens on size, row count, age, and whenever the consumer
is starved (its RDY window is full of held messages: nothing more would arrive), so held
messages never approach nsqd's msg_timeout. On ordered topics (one message in flight per
partition) that means one small file per message: correct, but slow by nature.

A stop (a signal, ``exit_when_idle``, a failure) writes what is held and waits for every
write under way, so each message is FINed once on disk or given back once if its write
failed; what still arrives is given back; only then does the consumer close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from nsqctl import protocol as p
from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions, FailoverHook
from nsqctl.errors import (
    ArchiveWriteError,
    LookupUnavailableError,
    NsqctlError,
)
from nsqctl.failover import DEFAULT_FAILOVER_WINDOW
from nsqctl.message import Message, finish_all
from nsqctl.pipeline.idle import IdleExit
from nsqctl.pipeline.rotation import RotationPolicy
from nsqctl.pipeline.writer import ArchiveBuffer, ArchiveWriter, remove_stale_tmp
from nsqctl.tracelog import TraceLog, TraceLogWriteError

log = logging.getLogger("nsqctl.pipeline.archiver")

TICK = 0.05
STARVED_MIN_AGE = 0.2  # a starved consumer rotates once its batch is this old
# Seconds the consumer's stop waits for what is unanswered (nothing the archive holds
# by then: only a message still arriving, which the closing consumer gives back).
STOP_TIMEOUT = 5.0


@dataclass
class ArchiveOptions:
    topic: str
    channel: str
    out_dir: Path
    lookupd: list[str] = field(default_factory=list)
    nsqd: list[str] = field(default_factory=list)
    config: ConnectionConfig | None = None
    max_in_flight: int = 5000
    ordered: bool | None = None  # None: as the topic needs (lookupd meta, else nsqd's refusal)
    partitions: list[int] | None = None
    policy: RotationPolicy = field(default_factory=RotationPolicy)
    # seconds without messages, every source connected → stop (None: run on)
    exit_when_idle: float | None = None
    trace_log: Path | None = None
    fsync: bool = True
    # redesign: wait for a new leader; with exit_when_idle, for any source cut off (0: ever)
    failover_window: float = DEFAULT_FAILOVER_WINDOW
    on_failover: FailoverHook | None = None  # "waiting for a leader" / "consuming again"


@dataclass
class ArchiveStats:
    received: int = 0
    written: int = 0
    files: int = 0
    ordered: bool = False
    reconnects: int = 0
    duplicates: int = 0  # delivered again after a reconnect (at-least-once), archived again


#: What a quiet archive that gave up on a cut-off source says of itself.
ARCHIVE_INCOMPLETE = "the archive is not complete: everything received is written and acknowledged"


class Archiver:
    """Runs one archive: ``await Archiver(opts).run(stop_event)``.

    Pipelined: while a batch is written and fsynced in a worker thread (pyarrow and
    fsync release the GIL), the next one fills; a batch's messages are FINed when its
    write returns. Batches are half the RDY window, so the server keeps sending meanwhile.
    """

    def __init__(
        self, opts: ArchiveOptions, progress: Callable[[ArchiveStats], None] | None = None
    ) -> None:
        self.opts = opts
        self.writer = ArchiveWriter(opts.out_dir, fsync=opts.fsync)
        self.buffer: ArchiveBuffer[Message] = ArchiveBuffer()
        self.stats = ArchiveStats()
        self.progress = progress
        self._writes: deque[asyncio.Task[None]] = deque()  # oldest first
        self._writer_lock = asyncio.Lock()
        self._wake = asyncio.Event()  # a write ended, or stop
        self._max_rows = opts.policy.max_rows  # lowered to half the window by _size_batches
        self._policy = opts.policy  # its max_age bounded by nsqd's msg timeout, likewise
        self._running: Consumer | None = None  # set once started: _give_back stops its RDY
        self._closing = False

    @property
    def closing(self) -> bool:
        """The run is stopping: what arrives now is given back at once, and the writes
        under way are finished (their messages FINed) before the consumer closes."""
        return self._closing

    def _on_message(self, msg: Message) -> None:
        if self._closing:  # nothing is written after the last writes: back at once, once
            msg.requeue(delay=0, backoff=False)
            return
        # FINed by _write once on disk. Through the consumer, so that a close that found
        # it still unanswered (a failure that ended the run first) would give it back.
        msg.disable_auto_response()
        buffer = self.buffer
        buffer.add(msg)
        if buffer.rows >= self._max_rows or buffer.bytes >= self.opts.policy.max_bytes:
            self._start_rotation()

    def _size_batches(self, consumer: Consumer) -> None:
        """Rotate at half the RDY window actually granted, so the server keeps sending
        while the previous batch is written, and before nsqd's msg timeout (below). The
        window can be far below max-in-flight: nsqd caps each connection's RDY at its
        max-rdy-count (2500 by default)."""
        window = consumer.total_rdy
        limit = self.opts.policy.max_rows
        self._max_rows = min(limit, window // 2) if window >= 2 else limit
        # A held message is in flight on nsqd: held past the msg timeout it negotiated
        # (IDENTIFY's msg_timeout; operators lower nsqd's --msg-timeout) it times out there
        # and is requeued, and its FIN after the write fails. So a batch is written within
        # half the shortest timeout of the connections, whatever the policy's age says.
        timeouts = [
            conn.identify.msg_timeout / 1000
            for conn in consumer.connections.values()
            if conn.identify is not None and conn.identify.msg_timeout > 0
        ]
        age = min(self.opts.policy.max_age, min(timeouts) / 2) if timeouts else None
        if age is not None and age != self._policy.max_age:
            self._policy = replace(self.opts.policy, max_age=age)

    def _consumer(self, ordered: bool, trace: TraceLog | None) -> Consumer:
        o = self.opts
        return Consumer(
            o.topic,
            o.channel,
            self._on_message,
            lookupd_http=o.lookupd or None,
            nsqd_tcp=None if o.lookupd else (o.nsqd or None),  # the lookup's nsqds win
            config=o.config,
            options=ConsumerOptions(
                max_in_flight=o.max_in_flight,
                ordered=ordered,
                partitions=o.partitions,
                failover_window=o.failover_window,
            ),
            trace_log=trace,
            on_failover=o.on_failover,
        )

    async def _topic_is_ordered(self) -> bool | None:
        """The topic's ``ordered`` flag from nsqlookupd's meta (redesign cluster mode); None
        when unknown (no lookupd, an original lookupd, no answer): the consumer then finds
        out from nsqd, which refuses a plain SUB to an ordered topic."""
        if not self.opts.lookupd:
            return None
        from nsqctl.lookup.client import LookupClient

        try:
            async with LookupClient(self.opts.lookupd) as client:
                topo = await client.lookup(self.opts.topic, access="r", metainfo=True)
        except LookupUnavailableError:
            raise  # the consumer's own lookup would wait as long again, then fail the same way
        except NsqctlError as err:
            log.debug("no topic meta for %s (%s): SUB decides", self.opts.topic, err)
            return None
        return None if topo.meta is None else topo.meta.ordered

    async def _start(self, trace: TraceLog | None) -> Consumer:
        ordered = self.opts.ordered
        if ordered is None and await self._topic_is_ordered():
            log.info("topic %s is ordered: subscribing with SUB_ORDERED", self.opts.topic)
            ordered = True
        consumer = self._consumer(bool(ordered), trace)
        try:
            await consumer.start()
        except p.SubOrderIsMustError:
            if ordered is not None:
                raise
            log.info("topic %s is ordered: subscribing with SUB_ORDERED", self.opts.topic)
            ordered = True
            consumer = self._consumer(True, trace)
            await consumer.start()
        self.stats.ordered = bool(ordered)
        return consumer

    async def _write(self, batch: ArchiveBuffer[Message]) -> None:
        """Write ``batch`` durably, then FIN its messages (never before)."""
        try:
            async with self._writer_lock:  # one file at a time, batches in order
                paths = await asyncio.to_thread(self.writer.write, batch)
        except Exception:
            self._give_back(batch.messages)
            raise
        finish_all(msg for msg in batch.messages if msg.outcome is None)
        self.stats.written += batch.rows
        self.stats.files += len(paths)
        if self.progress is not None:
            self.progress(self.stats)

    def _give_back(self, messages: list[Message]) -> None:
        """Give unwritten messages back now rather than after msg_timeout: once each, after
        RDY 0 (a failed write ends the run), or nsqd would send them straight back to be
        buffered, fail and be given back again."""
        if self._running is not None:
            self._running.set_max_in_flight(0)
        for msg in messages:
            if msg.outcome is None:
                with contextlib.suppress(Exception):  # a connection that is gone: nsqd has it
                    msg.requeue(delay=0, backoff=False)

    async def _reap(self, wait_all: bool = False) -> None:
        """Forget finished writes (re-raising a failure); with ``wait_all``, wait for all."""
        while self._writes and (wait_all or self._writes[0].done()):
            await self._writes.popleft()

    def _start_rotation(self) -> None:
        """Hand the current buffer to the writer and start filling a new one at once.

        Called from the message handler as soon as a batch is full: nsqd refills the
        window in bursts, and cutting later would grow one batch to the whole window. Earlier
        writes are not waited for; the RDY window bounds what is held.
        """
        if not self.buffer.rows:
            return
        batch, self.buffer = self.buffer, ArchiveBuffer[Message]()
        task = asyncio.create_task(self._write(batch))
        task.add_done_callback(lambda _: self._wake.set())
        self._writes.append(task)

    async def rotate(self) -> None:
        """Write everything held durably and FIN it; returns when done."""
        self._start_rotation()
        await self._reap(wait_all=True)

    def _should_rotate(self, consumer: Consumer) -> bool:
        if self.buffer.due(self._policy) or self.buffer.rows >= self._max_rows:
            return True
        # Starved: the window is full of held messages, so nothing more arrives until a
        # batch is FINed. With a write under way its FINs reopen the window; wait for it.
        return bool(
            self.buffer.rows
            and not self._writes
            and consumer.is_starved()
            and self.buffer.age() >= STARVED_MIN_AGE
        )

    async def _tick(self, stop: asyncio.Event) -> None:
        if stop.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(TICK):
                await self._wake.wait()
        self._wake.clear()

    def _prepare_dir(self) -> None:
        """Make the archive directory, and remove an earlier run's unfinished files."""
        try:
            self.opts.out_dir.mkdir(parents=True, exist_ok=True)
            stale = remove_stale_tmp(self.opts.out_dir)
        except OSError as err:
            raise ArchiveWriteError(
                f"cannot use the archive directory {self.opts.out_dir}: {err}"
            ) from err
        if stale:
            log.info("removed %d unfinished temporary file(s) of an earlier run", stale)

    def _count(self, consumer: Consumer) -> None:
        """The consumer's counts, into the stats the progress line shows."""
        counts, stats = consumer.stats, self.stats
        stats.received, stats.reconnects = counts.received, counts.reconnects
        stats.duplicates = counts.duplicates

    async def _archive(
        self, consumer: Consumer, stop: asyncio.Event, trace: TraceLog | None
    ) -> None:
        """Write batches as they fill or age until ``stop``, a failure that ends the run
        (the consumer's or the trace log's: raised once what is held is written), or
        with ``exit_when_idle`` quiet (:class:`IdleExit`)."""
        idle = self.opts.exit_when_idle
        quiet = (
            None
            if idle is None
            else IdleExit(
                idle,
                self.opts.failover_window,
                consumer.stats.received,
                time.monotonic(),
                incomplete=ARCHIVE_INCOMPLETE,
            )
        )
        while not stop.is_set():
            await self._tick(stop)
            self._size_batches(consumer)
            await self._reap()  # raises if a write failed
            if self._should_rotate(consumer):
                self._start_rotation()
            now = time.monotonic()
            self._count(consumer)
            if consumer.error is not None:  # e.g. no new leader within the window
                return
            if trace is not None and trace.error is not None:
                return  # what is held is still written and acknowledged
            if quiet is None:
                continue
            busy = bool(self.buffer.rows or self._writes)
            down = consumer.unconnected
            if quiet.due(consumer.stats.received, busy, down, now, consumer.unreached_error):
                return

    async def _close(self, consumer: Consumer, trace: TraceLog | None) -> None:
        """Write what is held and wait for every write under way (each FINs its messages
        once on disk, or gives them back if it failed), giving back what arrives
        meanwhile; only then stop the consumer, and close the trace log.

        The consumer is not stopped while a write is under way: its stop gives back
        what is still unanswered after its timeout, and a write that outlasted it would
        have its messages both on disk and given back (their FIN then refused). A write
        cannot be abandoned half way (a thread in fsync), so the stop waits for it, as
        the run's last rotation does."""
        self._closing = True
        consumer.set_max_in_flight(0)  # already, unless the run ended by an exception
        self._start_rotation()
        # Writes that failed after the first failure (already raised) or now: their
        # messages were given back; their errors are not news.
        await asyncio.gather(*self._writes, return_exceptions=True)
        self._writes.clear()
        await consumer.stop(timeout=STOP_TIMEOUT)
        if trace is not None:
            trace.close()

    def _raise_why_ended(self, consumer: Consumer, trace: TraceLog | None) -> None:
        """Once what was held is on disk and FINed: the failure that ended the run."""
        if consumer.error is not None:
            raise consumer.error
        if trace is not None and trace.error is not None:
            raise TraceLogWriteError(
                f"{trace.error}: stopped; the {self.stats.written} message(s) received were "
                "archived and acknowledged, without their trace records"
            )

    async def run(self, stop: asyncio.Event) -> ArchiveStats:
        self._prepare_dir()
        trace = TraceLog(self.opts.trace_log) if self.opts.trace_log else None
        try:
            consumer = self._running = await self._start(trace)
        except BaseException:
            if trace is not None:
                trace.close()
            raise
        stop_waiter = asyncio.create_task(stop.wait())
        stop_waiter.add_done_callback(lambda _: self._wake.set())
        try:
            await self._archive(consumer, stop, trace)
            # Stop deliveries, write what is held, then close (held messages count as
            # in flight, so the consumer's stop would otherwise wait for them).
            consumer.set_max_in_flight(0)
            await asyncio.sleep(0.2)
            await self.rotate()
        finally:
            stop_waiter.cancel()
            await self._close(consumer, trace)
        self._raise_why_ended(consumer, trace)
        return self.stats
