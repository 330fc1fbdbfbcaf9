"""Replay from the redesign server's own history: SUB_ADVANCED on a fresh channel from a
time or queue offset, re-publishing each message to the target topic before FINing it.

Order: one partition's messages arrive in queue order (SUB_ADVANCED is ordered), and each
is published (shard key = source partition) before it is FINed, so per-partition order
carries over. Stops after ``until`` (message time), ``count`` messages, or when idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import string
import time
from dataclasses import dataclass, field

from nsqctl.connection import ConnectionConfig
from nsqctl.consumer import Consumer
from nsqctl.errors import ConfigError
from nsqctl.message import Message
from nsqctl.pipeline.schema import to_signed64
from nsqctl.producer import Producer


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
    idle_exit: float = 5.0
    dry_run: bool = False
    channel: str = ""


def start_arg(from_time_ns: int | None, from_offset: int | None) -> str:
    """The SUB_ADVANCED start argument for --from-time / --from-offset."""
    if (from_time_ns is None) == (from_offset is None):
        raise ConfigError("give exactly one of --from-time and --from-offset")
    if from_time_ns is not None:
        return f"timestamp:{from_time_ns // 1_000_000_000}"
    return f"virtual_queue:{from_offset}"


def fresh_channel() -> str:
    return "nsqctl_replay_" + "".join(random.choices(string.ascii_lowercase + string.digits, k=8))


async def replay_history(opts: HistoryOptions, stop: asyncio.Event) -> dict[str, int]:
    """Stream history to ``to_topic``; a failed publish requeues and stops the replay."""
    stats = {"matched": 0, "published": 0, "skipped": 0}
    pattern = re.compile(opts.grep.encode()) if opts.grep else None
    trace = to_signed64(opts.trace_id)
    last = time.monotonic()
    failure: list[BaseException] = []
    producer = Producer(
        lookupd_http=opts.lookupd or None, nsqd_tcp=opts.nsqd or None, config=opts.config
    )

    def wanted(msg: Message) -> bool:
        if opts.until_ns is not None and msg.timestamp >= opts.until_ns:
            return False
        if trace is not None and to_signed64(msg.trace_id) != trace:
            return False
        return pattern is None or pattern.search(msg.body) is not None

    async def handler(msg: Message) -> None:
        nonlocal last
        last = time.monotonic()
        if opts.until_ns is not None and msg.timestamp >= opts.until_ns:
            stop.set()
        if not wanted(msg):
            stats["skipped"] += 1
            return
        stats["matched"] += 1
        if not opts.dry_run:
            try:
                await producer.publish(opts.to_topic, msg.body, shard_key=msg.partition)
            except Exception as err:
                failure.append(err)
                stop.set()
                raise
            stats["published"] += 1
        if opts.count and stats["matched"] >= opts.count:
            stop.set()

    consumer = Consumer(
        opts.topic,
        opts.channel or fresh_channel(),
        handler,
        lookupd_http=opts.lookupd or None,
        nsqd_tcp=opts.nsqd or None,
        config=opts.config,
        partitions=opts.partitions,
        start=opts.start,
        ordered=True,
        max_in_flight=1,
    )
    await consumer.start()
    try:
        while not stop.is_set() and time.monotonic() - last < opts.idle_exit:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.2):
                    await stop.wait()
    finally:
        await consumer.stop(timeout=10)
        await producer.close()
    if failure:
        raise failure[0]
    return stats
