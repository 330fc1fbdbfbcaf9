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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx

from nsqctl.admin.offsets import partition_stats
from nsqctl.admin.placement import fetch_stats
from nsqctl.admin.requests import AdminRequest, Node, NodeResult, send_request

POLL = 0.05
REWIND = b"virtual_queue:0"


TEMPORARY = "nsqctl-carry-channels"
"""Registered and unregistered at once to make nsqlookupd write the registered channel
list onto every partition (see :func:`register_again`)."""

Key = tuple[int, str]  # (partition, channel)


@dataclass
class Carried:
    """Per new partition and channel: the nsqd leading it that holds the channel, the
    create that worked (or the last refusal), the registration requests of a topic whose
    channels nsqlookupd keeps, and the set-backs for messages written before a channel
    existed."""

    leaders: dict[Key, str] = field(default_factory=dict)
    created: dict[Key, NodeResult] = field(default_factory=dict)
    refused: dict[Key, NodeResult] = field(default_factory=dict)
    registered: list[NodeResult] = field(default_factory=list)
    rewound: list[NodeResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.refused.keys() - self.leaders.keys()

    def results(self) -> list[NodeResult]:
        """The registrations; one result per (partition, channel) created, or why not;
        then the set-backs."""
        keys = sorted({*self.created, *self.refused})
        out = [self.created.get(k) or self.refused[k] for k in keys]
        return [*self.registered, *out, *self.rewound]


def channel_create(address: str, topic: str, channel: str, partition: int) -> AdminRequest:
    params = (("topic", topic), ("channel", channel), ("partition", str(partition)))
    return AdminRequest(Node(address, "nsqd", partition), "/channel/create", params)


@dataclass(frozen=True)
class NewPartitions:
    """What to carry where: ``channels`` of ``topic`` onto ``partitions``, led by some of
    ``nsqds`` (HTTP addresses), until ``deadline`` (``time.monotonic``)."""

    topic: str
    channels: Sequence[str]
    partitions: Sequence[int]
    nsqds: Sequence[str]
    deadline: float

    def wanted(self) -> list[Key]:
        return [(p, c) for p in self.partitions for c in self.channels]


async def create_until_led(client: httpx.AsyncClient, new: NewPartitions) -> Carried:
    """Create every channel on every new partition on whichever nsqd leads it, asking
    all of them every ``POLL`` s until each is created or the deadline passes. Before the
    topic check a new partition's nsqds answer "not leader" or "topic not exist": those
    are the expected refusals, kept only as the reason when time runs out."""
    carried, topic = Carried(), new.topic
    while True:
        missing = [k for k in new.wanted() if k not in carried.created]
        if not missing:
            return carried
        sent = await asyncio.gather(
            *(
                send_request(client, channel_create(a, topic, c, p))
                for p, c in missing
                for a in new.nsqds
            )
        )
        for result, _ in sent:
            node = result.request.node
            key = (node.partition or 0, dict(result.request.params)["channel"])
            if result.outcome == "ok":
                carried.created.setdefault(key, result)
                carried.leaders.setdefault(key, node.address)
            elif key not in carried.created and (
                key not in carried.refused or "NOT_LEADER" in result.error
            ):
                carried.refused[key] = result  # a leader's refusal says the most
        if time.monotonic() > new.deadline:
            for key in missing:
                if key in carried.created:
                    continue
                last = carried.refused[key]
                last.error = (
                    f"channel {key[1]} could not be created on new partition {key[0]} "
                    f"before the wait ran out (last answer: {last.error}): consumers of "
                    f"{key[1]} will miss what is published there; create it with "
                    f"`channel_create({topic}, {key[1]})` and check `lookup({topic})`"
                )
            return carried
        await asyncio.sleep(POLL)


async def rewind_early_writes(client: httpx.AsyncClient, topic: str, carried: Carried) -> None:
    """Set a carried channel back to its partition's start when the partition took
    messages before the channel existed there (more stored than the channel holds)."""
    stats = await fetch_stats(client, sorted(set(carried.leaders.values())), topic)
    for (part, channel), address in sorted(carried.leaders.items()):
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
                f"there and setting it back failed ({result.error}): run `channel_setoffset("
                f"{topic}, {channel}, partition={part}, virtual_offset=0)`"
            )
        carried.rewound.append(result)


def _lookupd_channel(leader: str, topic: str, channel: str, action: str) -> AdminRequest:
    params = (("topic", topic), ("channel", channel))
    return AdminRequest(Node(leader, "lookupd"), f"/channel/{action}", params)


async def register_again(
    send: Callable[[AdminRequest], Awaitable[NodeResult]], leader: str, topic: str
) -> list[NodeResult]:
    """For a topic whose channels nsqlookupd registers (channel auto-create disabled):
    its nsqds create on a partition exactly the registered list stored with that
    partition, and refuse any other create. youzan's expand stores new partitions with no
    list, and writes the list onto every partition only when it changes (a name already
    registered is refused). So register a temporary channel and unregister it: the
    registered list lands on the new partitions too, and their nsqds create the channels
    when nsqlookupd hands them the partition (before writes, when this comes before the
    topic check that enables them; :func:`rewind_early_writes` covers it otherwise).
    ``send`` sends one request to nsqlookupd, as the partition operations do (again
    while it calls the cluster unstable)."""
    create = await send(_lookupd_channel(leader, topic, TEMPORARY, "create"))
    if create.outcome != "ok":
        return [create]
    return [create, await send(_lookupd_channel(leader, topic, TEMPORARY, "delete"))]


async def wait_registered(client: httpx.AsyncClient, leader: str, new: NewPartitions) -> Carried:
    """Wait until each new partition's leader holds every registered channel, or the
    deadline; what is missing then is a failure (``leader``: the lookupd leader)."""
    carried, topic, channels = Carried(), new.topic, new.channels
    while True:
        stats = await fetch_stats(client, new.nsqds, topic)
        for address, node in stats.nodes.items():
            for entry in node.topics:
                if entry.topic != topic or not entry.is_leader or entry.partition is None:
                    continue
                for channel in channels:
                    if entry.channel(channel) is not None:
                        carried.leaders.setdefault((entry.partition, channel), address)
        missing = [k for k in new.wanted() if k not in carried.leaders]
        if not missing:
            return carried
        if time.monotonic() > new.deadline:
            for part, channel in missing:
                failed = NodeResult(_lookupd_channel(leader, topic, channel, "create"), "failed")
                failed.error = (
                    f"registered channel {channel} did not reach new partition {part} before "
                    f"the wait ran out: consumers of {channel} cannot read what is published "
                    f"there; check `stat({topic})` and the nsqd logs"
                )
                carried.refused[(part, channel)] = failed
            return carried
        await asyncio.sleep(POLL * 5)
