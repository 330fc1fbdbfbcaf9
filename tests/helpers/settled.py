"""One nsqd's view of one channel, read while a test waits for its messages to settle."""

from __future__ import annotations

import asyncio

from nsqctl.stats import read_nsqd_stats
from nsqctl.stats.model import ChannelStats
from tests.helpers.wait import wait_for


async def channel_on(http: str, topic: str, channel: str) -> ChannelStats:
    """``channel`` of ``topic`` on the nsqd at ``http`` now (fails if it has none)."""
    stats = await asyncio.to_thread(read_nsqd_stats, http, topic=topic)
    found = stats.channel(topic, channel)
    if found is None:
        raise AssertionError(f"no channel {channel} on {http}")
    return found


async def settled_channel(http: str, topic: str, channel: str, timeout: float) -> ChannelStats:
    """The channel once nothing is in flight on it: nsqd has handled the FINs and REQs
    sent to it (a message left in flight would wait for nsqd's msg-timeout)."""
    ch = await channel_on(http, topic, channel)

    async def settled() -> bool:
        nonlocal ch
        ch = await channel_on(http, topic, channel)
        return ch.in_flight_count == 0

    await wait_for(settled, timeout, lambda: f"nothing in flight on nsqd: {ch}")
    return ch


async def copied_to_channel(http: str, topic: str, channel: str, count: int) -> None:
    """Wait until the original nsqd at ``http`` has copied ``count`` messages in all into
    ``channel`` (its message count). A PUB's or MPUB's OK means the topic holds them; the
    topic's pump copies them to each channel afterwards, so a /stats read at once may see
    a channel short of them, or its depth from before a copy and its count from after."""
    ch: ChannelStats | None = None

    async def copied() -> bool:
        nonlocal ch
        stats = await asyncio.to_thread(read_nsqd_stats, http, topic=topic)
        ch = stats.channel(topic, channel)
        return ch is not None and ch.message_count >= count

    await wait_for(copied, 30, lambda: f"{count} messages copied to {channel} on {http}: {ch}")
