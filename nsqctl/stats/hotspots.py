"""Hot spots: the channels (or client connections) an operator should look at first.

Ranked from one :class:`ClusterView` (two polls: rates need the previous one) by requeue
rate, timeout rate, time to drain or in-flight saturation, each entry with the reasons it
is flagged. The reasons are the operator rules of :mod:`nsqctl.stats.rules`, applied here
and defined nowhere else. ``nsqctl top`` and the dashboard's hot-spots screen both read
:func:`rank_channels` / :func:`rank_clients`.

Channel entries are cheap (the channel views are already built every poll); client
entries parse every connection of the cluster, so they are built only when asked for.
Both need the clients listed in the poll (RDY: starved, stalled, saturation); a channel
polled without them has no RDY (``ready`` None), so it is neither flagged for them nor
ranked by saturation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar, get_args

from nsqctl.errors import ConfigError
from nsqctl.stats.rules import (
    drain_rate,
    is_orphan,
    is_poison,
    is_stalled,
    is_starved,
    rate,
    time_to_drain,
)
from nsqctl.stats.view import ChannelView, ClusterView, TopicView

SortKey = Literal["requeue", "timeout", "drain", "saturation"]
SORT_KEYS: tuple[SortKey, ...] = get_args(SortKey)
Reason = Literal["starved", "stalled", "orphan", "poison"]

DRAIN_SAMPLES = 5
"""Polls of depth history the drain rate is measured over: one interval is too noisy to
tell a draining channel from one that just had a burst delivered."""


@dataclass(frozen=True, slots=True)
class ChannelHotSpot:
    """One channel (summed over its partitions) with what it is ranked by.

    ``held`` is every message the channel still has to confirm (waiting, in flight and
    deferred): what "a few messages requeued over and over" is measured against.
    ``time_to_drain`` is None when the channel holds messages and is not draining.
    """

    topic: str
    channel: str
    depth: int
    held: int
    in_flight: int
    ready: int | None  # None: its clients were not listed (see ChannelView.ready)
    client_count: int
    requeue_rate: float | None
    timeout_rate: float | None
    drain_rate: float | None
    time_to_drain: float | None
    saturation: float | None
    reasons: tuple[Reason, ...]

    @property
    def key(self) -> str:
        return f"{self.topic}/{self.channel}"


@dataclass(slots=True)
class ClientHotSpot:
    """One consumer connection (one partition's on the redesign) of a channel.

    Not frozen, unlike :class:`ChannelHotSpot`: one is made per connection of the cluster
    while they are ranked, tens of thousands, and a frozen record costs several times a
    plain one to build. Treat it as read-only.

    ``timeout_rate`` is None on the original family (its nsqd does not count timeouts per
    client); ``time_to_drain`` is its channel's, so clients rank by drain as their channel.
    """

    topic: str
    channel: str
    node: str
    partition: int | None
    client_id: str
    hostname: str
    remote_address: str
    ready: int
    in_flight: int
    requeue_rate: float | None
    timeout_rate: float | None
    time_to_drain: float | None
    saturation: float | None
    reasons: tuple[Reason, ...]

    @property
    def key(self) -> str:
        part = "-" if self.partition is None else str(self.partition)
        return f"{self.node}/{part}/{self.topic}/{self.channel}/{self.remote_address}"


HotSpot = ChannelHotSpot | ClientHotSpot
_Entry = TypeVar("_Entry", ChannelHotSpot, ClientHotSpot)


def saturation(in_flight: int, ready: int | None) -> float | None:
    """In flight as a share of RDY (1.0: the consumer takes no more); None without RDY
    (or when RDY is not known)."""
    return in_flight / ready if ready else None


def held_messages(topic: TopicView, channel: ChannelView) -> int:
    """Messages the channel has not confirmed yet. The redesign's channel depth already
    counts in-flight and deferred ones; the original's counts only those waiting."""
    if topic.is_redesign:
        return channel.depth
    return channel.depth + channel.in_flight + channel.deferred


def _recent_depths(channel: ChannelView) -> list[float]:
    """The channel's depth over the last polls: the history when kept, else the previous
    poll's depth and this one's."""
    if len(channel.depth_history) >= 2:
        return list(channel.depth_history[-DRAIN_SAMPLES:])
    if channel.previous_depth is not None:
        return [float(channel.previous_depth), float(channel.depth)]
    return []


def channel_hot_spot(topic: TopicView, channel: ChannelView) -> ChannelHotSpot:
    held = held_messages(topic, channel)
    fall = drain_rate(_recent_depths(channel), channel.interval)
    reasons: list[Reason] = []
    if channel.starved:
        reasons.append("starved")
    if channel.stalled:
        reasons.append("stalled")
    if is_orphan(channel.client_count, channel.depth_growing):
        reasons.append("orphan")
    if is_poison(held, channel.requeue_delta):
        reasons.append("poison")
    return ChannelHotSpot(
        topic=topic.name,
        channel=channel.name,
        depth=channel.depth,
        held=held,
        in_flight=channel.in_flight,
        ready=channel.ready,
        client_count=channel.client_count,
        requeue_rate=channel.requeue_rate,
        timeout_rate=channel.timeout_rate,
        drain_rate=fall,
        time_to_drain=time_to_drain(channel.depth, fall),
        saturation=saturation(channel.in_flight, channel.ready),
        reasons=tuple(reasons),
    )


def _sort_value(entry: HotSpot, key: SortKey) -> float:
    """Bigger is hotter. A channel that holds messages and does not drain is the hottest
    by drain (it never empties); an unknown rate ranks below every known one."""
    if key == "requeue":
        value = entry.requeue_rate
    elif key == "timeout":
        value = entry.timeout_rate
    elif key == "saturation":
        value = entry.saturation
    else:
        value = entry.time_to_drain
        if value is None:
            return math.inf
    return -1.0 if value is None else value


def rank(entries: Iterable[_Entry], key: SortKey, limit: int | None = None) -> list[_Entry]:
    """Hottest first by ``key``, flagged entries before unflagged ones on a tie, then by
    name so the order is stable between polls."""
    if key not in SORT_KEYS:
        raise ConfigError(
            f"unknown hot-spot sort {key!r}: one of {', '.join(SORT_KEYS)}", setting="key"
        )
    ordered = sorted(entries, key=lambda e: (-_sort_value(e, key), not e.reasons, e.key))
    return ordered if limit is None else ordered[:limit]


def channel_hot_spots(view: ClusterView) -> list[ChannelHotSpot]:
    return [channel_hot_spot(t, c) for t in view.topics for c in t.channels]


def rank_channels(
    view: ClusterView, key: SortKey = "requeue", limit: int | None = None
) -> list[ChannelHotSpot]:
    return rank(channel_hot_spots(view), key, limit)


def _client_hot_spots(
    topic: TopicView, channel: ChannelView, drain: float | None
) -> list[ClientHotSpot]:
    out: list[ClientHotSpot] = []
    for part in channel.parts:
        before = (
            {c.remote_address: c for c in part.previous.clients}
            if part.previous is not None
            else {}
        )
        for cl in part.stats.clients:
            prev = before.get(cl.remote_address)
            reasons: list[Reason] = []
            if is_starved(cl.ready_count, cl.in_flight_count):
                reasons.append("starved")
            if is_stalled(cl.ready_count, part.stats.depth):
                reasons.append("stalled")
            timeout_rate = None
            if cl.timeout_count is not None and prev is not None:
                timeout_rate = rate(cl.timeout_count, prev.timeout_count, part.dt)
            # positional, in ClientHotSpot's field order (one per connection: see above)
            out.append(
                ClientHotSpot(
                    topic.name,
                    channel.name,
                    part.node,
                    part.partition,
                    cl.client_id,
                    cl.hostname,
                    cl.remote_address,
                    cl.ready_count,
                    cl.in_flight_count,
                    rate(cl.requeue_count, prev.requeue_count if prev else None, part.dt),
                    timeout_rate,
                    drain,
                    saturation(cl.in_flight_count, cl.ready_count),
                    tuple(reasons),
                )
            )
    return out


def client_hot_spots(view: ClusterView) -> list[ClientHotSpot]:
    """Every connection of every channel (parses them all: build only when shown)."""
    out: list[ClientHotSpot] = []
    for t in view.topics:
        for c in t.channels:
            drain = channel_hot_spot(t, c).time_to_drain
            out.extend(_client_hot_spots(t, c, drain))
    return out


def rank_clients(
    view: ClusterView, key: SortKey = "requeue", limit: int | None = None
) -> list[ClientHotSpot]:
    return rank(client_hot_spots(view), key, limit)
