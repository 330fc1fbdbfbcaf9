"""Whether a new channel reached every copy of its topic's partitions (redesign).

youzan creates a channel on the partition leader and copies the channel list to the
other replicas later (seconds after a create). Until a replica has it, a
leader failover to that replica loses the channel: the first consumer to subscribe on the
new leader creates it at the topic's end, and every message published before is silently
skipped for that channel. So `channel create` waits until every copy holds the channel,
asking the leaders again now and then, and says so when it does not happen in time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from nsqctl.admin.leader import lookupd_nsqds
from nsqctl.admin.placement import fetch_stats
from nsqctl.admin.requests import AdminRequest, execute

#: how long `channel create` waits for every replica to hold the new channel
COPY_TIMEOUT = 30.0
_POLL = 0.5
_RESEND = 2.0


@dataclass(frozen=True)
class ChannelCopies:
    """Which nsqds hold a copy of one partition, and which of them lack the channel."""

    partition: int
    holders: tuple[str, ...]
    missing: tuple[str, ...]


async def channel_copies(
    client: httpx.AsyncClient, nsqds: Sequence[str], topic: str, channel: str
) -> dict[int, ChannelCopies]:
    """partition → its copies (leader and replicas) on ``nsqds`` (HTTP addresses); an nsqd
    that does not answer counts as holding no copy."""
    stats = await fetch_stats(client, nsqds, topic)
    holders: dict[int, list[str]] = {}
    missing: dict[int, list[str]] = {}
    for address, node in stats.nodes.items():  # an nsqd in stats.errors holds nothing
        for entry in node.topics:
            if entry.topic != topic:
                continue
            part = entry.partition or 0
            holders.setdefault(part, []).append(address)
            if entry.channel(channel) is None:
                missing.setdefault(part, []).append(address)
    return {
        p: ChannelCopies(p, tuple(holders[p]), tuple(missing.get(p, ()))) for p in sorted(holders)
    }


def targeted_partitions(requests: Sequence[AdminRequest]) -> frozenset[int]:
    """The partitions ``requests`` name (their ``partition`` parameter); empty when none
    does."""
    return frozenset(int(value) for r in requests for key, value in r.params if key == "partition")


def copied_words(copies: dict[int, ChannelCopies], narrowed: bool) -> str:
    """Which copies a channel reached: the topic's partitions, or, ``narrowed``, only the
    partitions a create was narrowed to (``copies``' keys), which are not the topic's."""
    counts = sorted({len(c.holders) for c in copies.values()})
    per = "/".join(str(n) for n in counts)
    if not narrowed:
        return f"every copy of the topic's {len(copies)} partition(s) ({per} copies each)"
    named = ", ".join(str(p) for p in sorted(copies))
    each = " each" if len(copies) > 1 else ""
    return f"every copy of partition{'s' if len(copies) > 1 else ''} {named} ({per} copies{each})"


async def wait_channel_copied(
    client: httpx.AsyncClient,
    lookupd_http: Sequence[str],
    topic: str,
    channel: str,
    create_again: Sequence[AdminRequest],
    *,
    timeout: float = COPY_TIMEOUT,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[str | None, str | None]:
    """Wait until every copy of every partition holds ``channel``; returns (note, warning).

    Every couple of seconds the leaders are asked to create it again: youzan then sends
    its channel list to the replicas once more. Only the partitions ``create_again`` names
    are waited for: a create narrowed to one partition (or an expand's new ones) says
    nothing of the others, which may lack the channel on purpose.
    """
    asked = targeted_partitions(create_again)
    nsqds = await lookupd_nsqds(client, lookupd_http)
    if not nsqds:
        return None, (
            f"could not check that channel {channel} reached the replicas: no nsqd is "
            "registered with the lookupds given"
        )
    start = clock()
    resent = start
    while True:
        copies = await channel_copies(client, nsqds, topic, channel)
        narrowed = bool(asked) and not asked.issuperset(copies)
        if asked:
            copies = {p: c for p, c in copies.items() if p in asked}
        lacking = {p: c for p, c in copies.items() if c.missing}
        waited = clock() - start
        if copies and not lacking:
            return (
                f"channel {channel} is on {copied_words(copies, narrowed)} after {waited:.1f}s",
                None,
            )
        if waited >= timeout:
            where = (
                "; ".join(
                    f"{topic}/{p} lacks it on {', '.join(c.missing)} "
                    f"({len(c.holders) - len(c.missing)} of {len(c.holders)} copies have it)"
                    for p, c in lacking.items()
                )
                or "no copy of the topic answered"
            )
            return None, (
                f"channel {channel} did not reach every replica within {timeout:.0f}s: "
                f"{where}; a leader failover now would start the channel at the topic's "
                "end on the new leader, skipping what was published before. Run the "
                "create again, and check `stat()` on those nodes"
            )
        if clock() - resent >= _RESEND:
            await execute([list(create_again)], client)
            resent = clock()
        await asyncio.sleep(_POLL)
