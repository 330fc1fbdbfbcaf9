"""Carrying a topic's channels onto the partitions an expand adds (redesign).

A youzan channel starts where its partition's queue ends when it is created: a new
partition that takes writes before a channel exists there keeps those messages from that
channel for good (a consumer subscribing later creates it at the end). So an expand must
create every existing channel on every new partition before anyone publishes there.

What the server allows (youzan's nsqdserver/http.go ``doCreateChannel`` and
consistence/nsqlookup_coordinator.go): an nsqd creates a channel only on a partition it
leads with its leader session set; nsqlookupd sets the session of a new partition in its
topic check and enables writes on it in the same step, milliseconds later. There is no
moment when a new partition accepts a channel but not a write, so the creates are sent as
soon as each leader accepts them (polled every ``POLL`` s from the moment the expand is
accepted) and the expand finishes only after they are all done. What remains is the few
milliseconds between the leader session and our create: a producer that looks the topic
up exactly then may write there first. That is checked after the creates: a channel whose
partition holds more messages than the channel has to deliver is set back to the
partition's start, so those messages are delivered (at least once: a consumer that already
read some gets them again).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx

from nsqctl.admin.offsets import partition_stats
from nsqctl.admin.placement import fetch_stats
from nsqctl.admin.requests import AdminRequest, Node, NodeResult, send_request

POLL = 0.05
REWIND = b"virtual_queue:0"


@dataclass
class Carried:
    """Per new partition and channel: the create that worked (or the last refusal), and
    the set-backs sent for messages written before a channel existed."""

    created: dict[tuple[int, str], NodeResult] = field(default_factory=dict)
    refused: dict[tuple[int, str], NodeResult] = field(default_factory=dict)
    rewound: list[NodeResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def results(self) -> list[NodeResult]:
        """One result per (partition, channel): created, or why not; then the set-backs."""
        keys = sorted({*self.created, *self.refused})
        out = [self.created.get(k) or self.refused[k] for k in keys]
        return [*out, *self.rewound]


def channel_create(address: str, topic: str, channel: str, partition: int) -> AdminRequest:
    params = (("topic", topic), ("channel", channel), ("partition", str(partition)))
    return AdminRequest(Node(address, "nsqd", partition), "/channel/create", params)


async def create_until_led(
    client: httpx.AsyncClient,
    nsqds: Sequence[str],
    topic: str,
    channels: Sequence[str],
    partitions: Sequence[int],
    deadline: float,
) -> Carried:
    """Create every channel on every partition in ``partitions`` on whichever of ``nsqds``
    leads it, asking all of them every ``POLL`` s until each is created or ``deadline``
    (``time.monotonic``) passes. Before the topic check a new partition's nsqds answer
    "not leader" or "topic not exist": those are the expected refusals, kept only as the
    reason when time runs out."""
    carried = Carried()
    wanted = [(p, c) for p in partitions for c in channels]
    while True:
        missing = [k for k in wanted if k not in carried.created]
        if not missing:
            return carried
        sent = await asyncio.gather(
            *(
                send_request(client, channel_create(a, topic, c, p))
                for p, c in missing
                for a in nsqds
            )
        )
        for result, _ in sent:
            node = result.request.node
            key = (node.partition or 0, dict(result.request.params)["channel"])
            if result.outcome == "ok":
                carried.created.setdefault(key, result)
            elif key not in carried.created and (
                key not in carried.refused or "NOT_LEADER" in result.error
            ):
                carried.refused[key] = result  # a leader's refusal says the most
        if time.monotonic() > deadline:
            for key in missing:
                if key in carried.created:
                    continue
                last = carried.refused[key]
                last.error = (
                    f"channel {key[1]} could not be created on new partition {key[0]} "
                    f"before the wait ran out (last answer: {last.error}): consumers of "
                    f"{key[1]} will miss what is published there; create it with `nsqctl "
                    f"channel create {topic} {key[1]}` and check `nsqctl lookup {topic}`"
                )
            return carried
        await asyncio.sleep(POLL)


async def rewind_early_writes(client: httpx.AsyncClient, topic: str, carried: Carried) -> None:
    """Set a carried channel back to its partition's start when the partition took
    messages before the channel existed there (more stored than the channel holds)."""
    leaders = sorted({r.request.node.address for r in carried.created.values()})
    stats = await fetch_stats(client, leaders, topic)
    for (part, channel), created in sorted(carried.created.items()):
        address = created.request.node.address
        entry = partition_stats(stats, address, topic, part)
        found = entry.channel(channel) if entry is not None else None
        if entry is None or found is None:
            carried.notes.append(
                f"could not read {address}'s stats for partition {part}: whether it took "
                f"messages before channel {channel} existed there is unknown"
            )
            continue
        early = entry.message_count - found.depth
        if early <= 0:
            continue
        params = (("topic", topic), ("channel", channel), ("partition", str(part)))
        req = AdminRequest(Node(address, "nsqd", part), "/channel/setoffset", params, REWIND)
        result, _ = await send_request(client, req)
        if result.outcome == "ok":
            carried.notes.append(
                f"partition {part} took {early} message(s) before channel {channel} existed "
                f"there: set {channel} back to the partition's start so they are delivered"
            )
        else:
            result.error = (
                f"partition {part} took {early} message(s) before channel {channel} existed "
                f"there and setting it back failed ({result.error}): run `nsqctl channel "
                f"setoffset {topic} {channel} --partition {part} --virtual-offset 0`"
            )
        carried.rewound.append(result)
