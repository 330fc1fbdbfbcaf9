"""The archive consumer loop: hold messages un-FINed, write them durably, then FIN them.

Every delivered message stays in flight until the Parquet file holding it is fsynced and
renamed into place. Rotation happens on size, row count, age, and whenever the consumer
is starved (its RDY window is full of held messages: nothing more would arrive), so held
messages never approach nsqd's msg_timeout. On ordered topics (one message in flight per
partition) that means one small file per message: correct, but slow by nature.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nsqctl import protocol as p
from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer
from nsqctl.message import Message
from nsqctl.pipeline.schema import row_from_message
from nsqctl.pipeline.writer import ArchiveBuffer, ArchiveWriter, RotationPolicy, remove_stale_tmp
from nsqctl.tracelog import TraceLog

log = logging.getLogger("nsqctl.pipeline.archiver")

TICK = 0.05
STARVED_MIN_AGE = 0.2  # a starved consumer rotates once its batch is this old


@dataclass
class ArchiveOptions:
    topic: str
    channel: str
    out_dir: Path
    lookupd: list[str] = field(default_factory=list)
    nsqd: list[str] = field(default_factory=list)
    config: ConnectionConfig | None = None
    max_in_flight: int = 5000
    ordered: bool | None = None  # None: plain SUB, switch to ordered if the server says so
    partitions: list[int] | None = None
    policy: RotationPolicy = field(default_factory=RotationPolicy)
    exit_when_idle: float | None = None  # seconds without messages → stop (None: run on)
    trace_log: Path | None = None
    fsync: bool = True


@dataclass
class ArchiveStats:
    received: int = 0
    written: int = 0
    files: int = 0
    ordered: bool = False


class Archiver:
    """Runs one archive: ``await Archiver(opts).run(stop_event)``."""

    def __init__(
        self, opts: ArchiveOptions, progress: Callable[[ArchiveStats], None] | None = None
    ) -> None:
        self.opts = opts
        self.writer = ArchiveWriter(opts.out_dir, fsync=opts.fsync)
        self.buffer = ArchiveBuffer()
        self.stats = ArchiveStats()
        self.progress = progress
        self._last_message = time.monotonic()

    def _on_message(self, msg: Message) -> None:
        msg.disable_auto_response()
        partition, date, values = row_from_message(msg)
        self.buffer.add(partition, date, values, msg)
        self.stats.received += 1
        self._last_message = time.monotonic()

    def _consumer(self, ordered: bool, trace: TraceLog | None) -> Consumer:
        o = self.opts
        return Consumer(
            o.topic,
            o.channel,
            self._on_message,
            lookupd_http=o.lookupd or None,
            nsqd_tcp=o.nsqd or None,
            config=o.config,
            max_in_flight=o.max_in_flight,
            ordered=ordered,
            partitions=o.partitions,
            trace_log=trace,
        )

    async def _start(self, trace: TraceLog | None) -> Consumer:
        ordered = bool(self.opts.ordered)
        consumer = self._consumer(ordered, trace)
        try:
            await consumer.start()
        except p.SubOrderIsMustError:
            if self.opts.ordered is not None:
                raise
            log.info("topic %s is ordered: subscribing with SUB_ORDERED", self.opts.topic)
            ordered = True
            consumer = self._consumer(True, trace)
            await consumer.start()
        self.stats.ordered = ordered
        return consumer

    async def rotate(self) -> None:
        """Write the current buffer durably, then FIN its messages (never before)."""
        if not self.buffer.rows:
            return
        batch, self.buffer = self.buffer, ArchiveBuffer()
        try:
            paths = await asyncio.to_thread(self.writer.write, batch)
        except Exception:
            for msg in batch.tokens:  # give them back now rather than after msg_timeout
                with contextlib.suppress(Exception):
                    msg.requeue(delay=0, backoff=False)
            raise
        for msg in batch.tokens:
            if msg.outcome is None:
                msg.finish()
        self.stats.written += batch.rows
        self.stats.files += len(paths)
        if self.progress is not None:
            self.progress(self.stats)

    def _should_rotate(self, consumer: Consumer) -> bool:
        if self.buffer.due(self.opts.policy):
            return True
        return bool(
            self.buffer.rows
            and consumer.is_starved()
            and self.buffer.age() >= STARVED_MIN_AGE
        )

    async def run(self, stop: asyncio.Event) -> ArchiveStats:
        self.opts.out_dir.mkdir(parents=True, exist_ok=True)
        stale = remove_stale_tmp(self.opts.out_dir)
        if stale:
            log.info("removed %d unfinished temporary file(s) of an earlier run", stale)
        trace = TraceLog(self.opts.trace_log) if self.opts.trace_log else None
        consumer = await self._start(trace)
        idle = self.opts.exit_when_idle
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(TICK):
                        await stop.wait()
                if self._should_rotate(consumer):
                    await self.rotate()
                if (
                    idle is not None
                    and not self.buffer.rows
                    and time.monotonic() - self._last_message >= idle
                ):
                    break
            # Stop deliveries, write what is held, then close (held messages count as
            # in flight, so the consumer's stop would otherwise wait for them).
            consumer.set_max_in_flight(0)
            await asyncio.sleep(0.2)
            await self.rotate()
        finally:
            stopper = asyncio.create_task(consumer.stop(timeout=5))
            while not stopper.done():
                await asyncio.sleep(TICK)
                with contextlib.suppress(Exception):
                    await self.rotate()
            await stopper
            if trace is not None:
                trace.close()
        return self.stats
