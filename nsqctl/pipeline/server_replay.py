"""Replay from the redesign server's own history: SUB_ADVANCED on a fresh channel from a
time or queue offset, re-publishing each message to the target topic before FINing it.

youzan's SUB_ORDERED takes no start position, so the channel is subscribed unordered
(SUB_ADVANCED). One partition's messages still arrive in queue order (nothing on a fresh
channel is requeued), and they are published one at a time per partition, in arrival
order (shard key = source partition), each before it is FINed: per-partition order
carries over. Stops after ``until`` (message time), ``count`` messages, or when idle
(:class:`~nsqctl.pipeline.idle.IdleExit`): quiet *and* reading every partition. A partition
with no leader (or one that does not answer) is waited for, then given up on after the
failover window with an error naming it: a replay that missed a partition is not done.

At the count, RDY goes to 0 and every message nsqd had sent already is given back once,
untouched. The fresh channel is deleted at the end (through nsqlookupd), so a replay
leaves nothing behind that would keep the history's messages; while a partition has no
leader no delete is taken, and the channel is left with a note saying when to delete it.

There is no checkpoint: the report says, per partition, the offset just past the last
message done (published or filtered out) in that partition's order, where a replay of the
partition alone goes on without repeating or missing one, whether this one stopped at the
count, was interrupted or failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
import string
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.failover import DEFAULT_FAILOVER_WINDOW
from nsqctl.message import Message
from nsqctl.pipeline.idle import IdleExit
from nsqctl.pipeline.schema import to_signed64
from nsqctl.producer import Producer, ProducerOptions


@dataclass
class HistoryOptions:
    topic: str
    to_topic: str
    start: str  # SUB_ADVANCED start: "timestamp:<sec>" or "virtual_queue:<bytes>"
    lookupd: list[str] = field(default_factory=list)
    nsqd: list[str] = field(default_factory=list)
    config: ConnectionConfig | None = None
    partitions: list[int] | None = None
    until_ns: int | None = None
    trace_id: int | None = None
    grep: str | None = None
    count: int = 0
    #: messages read per second over the whole replay (those ``grep``/``trace_id`` filter
    #: out count too), held back by the consumer's RDY; None: as fast as they come
    rate: float | None = None
    idle_exit: float = 5.0
    #: seconds a partition without a leader is waited for before the replay fails
    failover_window: float = DEFAULT_FAILOVER_WINDOW
    dry_run: bool = False
    channel: str = ""
    #: called about five times a second while the replay runs (a terminal's progress line)
    progress: Callable[[HistoryReport], None] | None = None


def start_arg(from_time_ns: int | None, from_offset: int | None) -> str:
    """The SUB_ADVANCED start argument for --from-time / --from-offset."""
    if (from_time_ns is None) == (from_offset is None):
        raise ConfigError("give exactly one of `from_time` and `from_offset`")
    if from_time_ns is not None:
        return f"timestamp:{from_time_ns // 1_000_000_000}"
    return f"virtual_queue:{from_offset}"


def history_producer(opts: HistoryOptions) -> Producer:
    """The producer a history replay publishes with. The failover window bounds both
    sides: a partition of the target topic without a leader is waited for as long as
    one of the source topic, not the library's default."""
    return Producer(
        lookupd_http=opts.lookupd or None,
        nsqd_tcp=opts.nsqd or None,
        config=opts.config,
        options=ProducerOptions(failover_window=opts.failover_window),
    )


def fresh_channel() -> str:
    return "nsqctl_replay_" + "".join(random.choices(string.ascii_lowercase + string.digits, k=8))


log = logging.getLogger("nsqctl.replay")


@dataclass
class HistoryReport:
    """What one history replay did; ``to_json`` is ``nsqctl replay --json``'s shape."""

    channel: str
    matched: int = 0
    published: int = 0
    skipped: int = 0
    given_back: int = 0
    channel_deleted: bool = False
    note: str | None = None
    #: per source partition, the virtual-queue offset just past the last message this
    #: replay published (or filtered out) in partition order: a replay of that partition
    #: started there repeats none of them. Partitions with nothing done are not here.
    resume: dict[int, int] = field(default_factory=dict)
    #: partitions that were still out of reach when the replay stopped
    unreached: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


async def replay_history(opts: HistoryOptions, stop: asyncio.Event) -> HistoryReport:
    """Stream history to ``to_topic``; a failed publish requeues and stops the replay."""
    replay = _Replay(opts, stop)
    try:
        await replay.run()
    finally:
        if replay.temporary:
            await _delete_channel(opts, replay.report)
    if replay.failure:
        raise replay.failure[0]
    return replay.report


class _Replay:
    """One replay of :func:`replay_history`: its report, the consumer reading the history,
    the producer publishing it, and :meth:`handle`, which the consumer calls per message."""

    def __init__(self, opts: HistoryOptions, stop: asyncio.Event) -> None:
        self.opts = opts
        self.stop = stop
        self.temporary = not opts.channel
        self.report = HistoryReport(channel=opts.channel or fresh_channel())
        self.pattern = re.compile(opts.grep.encode()) if opts.grep else None
        self.trace = to_signed64(opts.trace_id)
        self.failure: list[BaseException] = []
        self.taken = 0  # matched messages accepted for publishing, counted before the publish
        self.turns: dict[int | None, asyncio.Lock] = {}  # one publish at a time per partition
        self.producer = history_producer(opts)
        self.consumer = Consumer(
            opts.topic,
            self.report.channel,
            self.handle,
            lookupd_http=opts.lookupd or None,
            nsqd_tcp=None if opts.lookupd else (opts.nsqd or None),  # the lookup's nsqds win
            config=opts.config,
            options=ConsumerOptions(
                partitions=opts.partitions,
                start=opts.start,
                max_in_flight=HISTORY_MAX_IN_FLIGHT,
                max_rate=opts.rate,
                failover_window=opts.failover_window,
                # a message waits behind its partition's lock while the one before it is
                # published (a failover can take minutes): untouched past nsqd's message
                # timeout, it would come again after later ones, be published twice, and
                # move the resume offset back
                auto_touch=True,
            ),
        )

    async def run(self) -> None:
        """Until stopped, or idle for ``idle_exit`` seconds with every partition read;
        then both clients closed. Raises when a partition stays out of reach."""
        opts, stop, consumer = self.opts, self.stop, self.consumer
        await consumer.start()
        quiet = IdleExit(
            opts.idle_exit,
            opts.failover_window,
            consumer.stats.received,
            time.monotonic(),
            incomplete=(
                "the replay is not complete: "
                + (
                    "nothing was published (a dry run)"
                    if opts.dry_run
                    else f"what it read of the other partitions was published to {opts.to_topic}"
                )
            ),
        )
        try:
            while not stop.is_set():
                down = consumer.unconnected
                self.report.unreached = sorted({p for _nsqd, p in down if p is not None})
                if consumer.error is not None:  # e.g. no new leader within the window
                    raise consumer.error
                if opts.progress is not None:
                    opts.progress(self.report)
                if quiet.due(
                    consumer.stats.received,
                    consumer.in_flight > 0,
                    down,
                    time.monotonic(),
                    consumer.unreached_error,
                ):
                    return
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.2):
                        await stop.wait()
        finally:
            await self.consumer.stop(timeout=10)
            await self.producer.close()

    def wanted(self, msg: Message) -> bool:
        if self.trace is not None and to_signed64(msg.trace_id) != self.trace:
            return False
        return self.pattern is None or self.pattern.search(msg.body) is not None

    def give_back(self, msg: Message) -> None:
        msg.requeue(delay=0, backoff=False)
        self.report.given_back += 1

    def close_intake(self) -> None:
        self.consumer.set_max_in_flight(0)  # RDY 0 before anything more is given back
        self.stop.set()

    def admit(self, msg: Message) -> bool | None:
        """Whether ``msg`` is to be published: not once the replay stopped, reached
        --count or passed --until (given back: False), nor when it does not match
        (skipped: None)."""
        opts = self.opts
        if self.stop.is_set() or (opts.count and self.taken >= opts.count):
            self.give_back(msg)
            return False
        if opts.until_ns is not None and msg.timestamp >= opts.until_ns:
            self.close_intake()
            self.give_back(msg)
            return False
        if not self.wanted(msg):
            self.report.skipped += 1
            return None
        self.taken += 1
        if opts.count and self.taken >= opts.count:
            self.close_intake()
        return True

    def passed(self, msg: Message) -> None:
        """``msg`` is done with (published, or filtered out) in its partition's order."""
        if msg.partition is not None and msg.offset is not None and msg.size is not None:
            self.report.resume[msg.partition] = msg.offset + msg.size

    async def handle(self, msg: Message) -> None:
        verdict = self.admit(msg)
        if verdict is False:
            return
        # Handlers run concurrently; a per-partition lock (FIFO) keeps arrival order, so
        # what a partition's resume offset passes was all done before it.
        async with self.turns.setdefault(msg.partition, asyncio.Lock()):
            if self.failure:  # an earlier publish failed: publishing later ones would reorder
                if verdict:
                    self.give_back(msg)
                return  # a skipped one is not passed either: the resume offsets stay put
            if verdict is None:
                self.passed(msg)
                return
            self.report.matched += 1
            if not self.opts.dry_run:
                try:
                    await self.producer.publish(
                        self.opts.to_topic, msg.body, shard_key=msg.partition
                    )
                except Exception as err:
                    self.failure.append(err)
                    self.stop.set()
                    raise
                self.report.published += 1
            self.passed(msg)


#: messages in flight at once: a few per partition, so no partition waits for RDY to rotate
HISTORY_MAX_IN_FLIGHT = 16


async def _delete_channel(opts: HistoryOptions, report: HistoryReport) -> None:
    """Delete the replay's own channel; say how when it cannot be done here."""
    how = f"delete it with `channel_delete({opts.topic}, {report.channel})`"
    if not opts.lookupd:
        report.note = f"channel {report.channel} left on the nsqd (no nsqlookupd given): {how}"
        return
    from nsqctl import admin
    from nsqctl.admin.requests import admin_client

    try:
        async with admin_client() as client:
            found = await admin.locate_topic(opts.topic, opts.lookupd, [], client)
        if found.leaderless:
            # a channel delete is refused while a partition has no leader (nobody can be
            # asked to delete its copy), so the plain advice would be refused too
            report.note = leaderless_channel_note(opts.topic, report.channel, found.leaderless)
            return
        placement, stages = await admin.prepare(
            "channel", opts.topic, opts.lookupd, [], action="delete", channel=report.channel
        )
        result = await admin.run_plan("channel delete", placement, stages, channel=report.channel)
        result.raise_for_failures()
    except NsqctlError as err:
        log.debug("deleting replay channel %s failed: %s", report.channel, err)
        report.note = f"channel {report.channel} could not be deleted ({err}): {how}"
        return
    report.channel_deleted = True


def leaderless_channel_note(topic: str, channel: str, leaderless: Sequence[int]) -> str:
    """What to do with a replay channel left because partitions of ``topic`` have no
    leader: a delete is refused until each has one again, and until then the channel
    keeps the messages retained from where the replay started."""
    parts = ", ".join(map(str, leaderless))
    return (
        f"channel {channel} left on {topic}: partition(s) {parts} have no leader now, and a "
        "channel delete is refused until every partition has one; until it is deleted it "
        f"keeps {topic}'s messages from where the replay started from being cleaned up (up "
        "to the topic's retention): delete it with "
        f"`channel_delete({topic}, {channel})` once partition(s) {parts} have a leader again "
        f"(`lookup({topic})` shows when)"
    )
