"""What a destructive admin command would lose, per nsqd and partition, measured before
anyone is asked: the operator confirms a number, not just a URL.

Read from each affected nsqd's ``/stats`` through the one reader
(:func:`nsqctl.stats.read.fetch_nsqd_stats`) and the stats view, so the counts are the
ones ``nsqctl stat`` and the dashboard show. What counts as lost, per family:

- original: a channel loses its depth plus its in-flight and deferred messages (nsqd's
  channel empty and delete drop all three); a topic's own queue loses its depth (topic
  empty leaves the channels alone; topic delete takes them too). The original nsqd does
  not report queued bytes: where it reports the bytes ever published, bytes are estimated
  as messages x that average size, and marked so; otherwise they are unknown.
- redesign: a channel's depth already counts every unconfirmed message (in-flight and
  deferred ones too) and its ``depth_size`` gives their bytes; a deleted partition also
  drops the bytes it stores, whose message count nsqd does not report.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import httpx

from nsqctl.admin.placement import Placement
from nsqctl.admin.requests import AdminRequest, Node, admin_client
from nsqctl.errors import NsqctlError
from nsqctl.protocol.raw_message import Family

if TYPE_CHECKING:
    from nsqctl.stats.model import ChannelStats, NodeStats
    from nsqctl.stats.view import PartitionView

DEFAULT_CONFIRM_ABOVE = 1000
"""Above this many messages at risk, confirming means typing the topic name back: a
reflexive "y" is too cheap for that much. Small enough that a real backlog counts, large
enough that emptying a test or near-idle channel stays a plain yes/no."""

MEASURED = ("empty", "delete", "skip")
"""The actions whose loss is measured (``setoffset`` may go back as well as forward)."""


@dataclass(frozen=True)
class Loss:
    """What one queue (a channel, or the topic's own: ``channel`` None) on one nsqd /
    partition would lose; ``messages``/``bytes`` None when nsqd does not say."""

    node: str
    partition: int | None
    channel: str | None
    messages: int | None
    bytes: int | None
    depth: int | None = None
    in_flight: int = 0
    deferred: int = 0
    bytes_estimated: bool = False
    within_stored: bool = False
    """A redesign channel of a deleted partition: its bytes are part of the partition's
    stored bytes (listed on their own row), so they are not added again to the total."""

    def describe(self) -> str:
        where = self.node if self.partition is None else f"{self.node} partition {self.partition}"
        if self.channel is None and self.partition is not None:
            return (
                f"{where}  stored queue: {_bytes_text(self.bytes, False)} (every retained message)"
            )
        queue = "topic queue" if self.channel is None else f"channel {self.channel}"
        count = "? messages" if self.messages is None else f"{self.messages} messages"
        if self.channel is not None and (self.in_flight or self.deferred):
            if self.partition is None:
                count += f" ({self.depth} queued, "
            else:  # the redesign's depth already counts them
                count += " (of which "
            count += f"{self.in_flight} in flight, {self.deferred} deferred)"
        size = _bytes_text(self.bytes, self.bytes_estimated)
        if self.within_stored:
            size += " (within the stored queue)"
        return f"{where}  {queue}: {count}, {size}"

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "partition": self.partition,
            "channel": self.channel,
            "messages": self.messages,
            "bytes": self.bytes,
            "bytes_estimated": self.bytes_estimated,
            "depth": self.depth,
            "in_flight": self.in_flight,
            "deferred": self.deferred,
            "within_stored": self.within_stored,
        }


def _bytes_text(size: int | None, estimated: bool) -> str:
    if size is None:
        return "bytes unknown"
    return f"~{size} bytes (estimated)" if estimated else f"{size} bytes"


@dataclass(frozen=True)
class BlastRadius:
    """Everything one command would lose; ``unreachable`` nsqds make it incomplete."""

    action: str
    topic: str
    channel: str | None
    family: Family
    losses: tuple[Loss, ...] = ()
    unreachable: tuple[tuple[str, str], ...] = ()

    @property
    def messages(self) -> int:
        """Messages known to be at risk (a partition's stored bytes have no count)."""
        return sum(loss.messages or 0 for loss in self.losses)

    @property
    def bytes(self) -> int | None:
        """Bytes at risk, None when any queue's are unknown."""
        sizes = [loss.bytes for loss in self.losses if not loss.within_stored]
        return None if any(s is None for s in sizes) else sum(s or 0 for s in sizes)

    @property
    def complete(self) -> bool:
        return not self.unreachable

    def exceeds(self, threshold: int) -> bool:
        """More than ``threshold`` messages at risk, or an nsqd that could not say."""
        return not self.complete or self.messages > threshold

    def lines(self) -> list[str]:
        """For a terminal: one line per queue, then the total."""
        subject = self.topic if self.channel is None else f"{self.topic}/{self.channel}"
        out = [f"{self.action} {subject} would lose:"]
        out.extend(f"  {loss.describe()}" for loss in self.losses)
        if not self.losses and self.complete:
            out.append("  nothing (no queued messages)")
        out.extend(f"  {address}: could not ask ({error})" for address, error in self.unreachable)
        estimated = any(loss.bytes_estimated for loss in self.losses)
        total = f"  total: {self.messages} messages, {_bytes_text(self.bytes, estimated)}"
        if not self.complete:
            total += " (and whatever the nsqds that did not answer hold)"
        out.append(total)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "bytes": self.bytes,
            "complete": self.complete,
            "losses": [loss.to_json() for loss in self.losses],
            "unreachable": [{"node": a, "error": e} for a, e in self.unreachable],
        }


def nodes_at_risk(placement: Placement, stages: Sequence[Sequence[AdminRequest]]) -> list[Node]:
    """The nsqds (with partition) a plan acts on; a plan sent only to lookupds (a redesign
    topic delete, a registered channel's delete) reaches every partition's leader."""
    planned = [r.node for stage in stages for r in stage if r.node.role == "nsqd"]
    return planned or list(placement.nsqds)


async def measure(
    action: str,
    placement: Placement,
    nodes: Sequence[Node],
    client: httpx.AsyncClient,
    *,
    channel: str | None = None,
) -> BlastRadius:
    """What ``action`` (empty, delete, skip; on ``channel`` or, None, the topic) would lose
    on ``nodes``, from their ``/stats`` now."""
    # The stats model loads only when something is measured: every admin command's
    # start-up (and --help) would pay for it otherwise.
    from nsqctl.stats.model import ClusterSnapshot, NodeStats
    from nsqctl.stats.read import fetch_nsqd_stats
    from nsqctl.stats.view import build_view

    topic = placement.topic
    addresses = list(dict.fromkeys(n.address for n in nodes))

    async def one(address: str) -> NodeStats | str:
        try:
            return await fetch_nsqd_stats(client, address, topic=topic, channel=channel)
        except NsqctlError as err:
            return str(err)

    found = dict(zip(addresses, await asyncio.gather(*(one(a) for a in addresses)), strict=True))
    stats = {a: s for a, s in found.items() if isinstance(s, NodeStats)}
    unreachable = tuple((a, s) for a, s in found.items() if isinstance(s, str)) + tuple(
        (f"partition {p}", "no leader and no live copy: its nsqds are down")
        for p in placement.leaderless
    )
    view = build_view(ClusterSnapshot(time.monotonic(), tuple(stats.values())))
    wanted = {(n.address, n.partition) for n in nodes}
    losses: list[Loss] = []
    topic_view = view.topic(topic)
    for part in topic_view.partitions if topic_view is not None else ():
        # a partition with no leader is measured on the copy the view read, when the plan
        # names that nsqd: data a deleted topic left on an nsqd is still lost by a delete
        holder = part.leader or (part.replicas[0] if part.live and part.replicas else None)
        if holder is None or (holder, part.partition) not in wanted:
            continue
        losses.extend(partition_losses(action, part, stats[holder], channel))
    return BlastRadius(
        f"{'topic' if channel is None else 'channel'} {action}",
        topic,
        channel,
        placement.family,
        tuple(losses),
        unreachable,
    )


def partition_losses(
    action: str, part: PartitionView, node: NodeStats, channel: str | None
) -> list[Loss]:
    """What ``action`` on ``channel`` (None: the topic) loses of one partition (one nsqd's
    copy on the original family), read from ``node``, the nsqd holding it."""
    held = node.topic(part.topic, part.partition)
    redesign = part.partition is not None
    average = None
    if held is not None and held.message_bytes and held.message_count:
        average = held.message_bytes / held.message_count
    address = node.address
    if channel is not None:
        return [
            _channel_loss(address, part.partition, ch, redesign, average)
            for ch in part.channels
            if ch.name == channel
        ]
    out: list[Loss] = []
    if redesign:
        if action == "delete":
            out.append(Loss(address, part.partition, None, None, part.stored_bytes))
    else:
        # The view's partition depth is the channels' plus, on the original family, what
        # the topic itself still holds.
        queued = part.depth - sum(ch.depth for ch in part.channels)
        out.append(_estimated(Loss(address, None, None, queued, None, depth=queued), average))
    if action == "delete":
        # a deleted redesign partition's channels are cursors into its stored queue: their
        # bytes are counted once, in the stored queue's row
        out.extend(
            replace(loss, within_stored=redesign)
            for loss in (
                _channel_loss(address, part.partition, ch, redesign, average)
                for ch in part.channels
            )
        )
    return out


def _channel_loss(
    address: str, partition: int | None, ch: ChannelStats, redesign: bool, average: float | None
) -> Loss:
    if redesign:  # depth counts every unconfirmed message, in flight and deferred too
        return Loss(
            address,
            partition,
            ch.name,
            ch.depth,
            ch.depth_bytes,
            depth=ch.depth,
            in_flight=ch.in_flight_count,
            deferred=ch.deferred_count,
        )
    messages = ch.depth + ch.in_flight_count + ch.deferred_count
    loss = Loss(
        address,
        None,
        ch.name,
        messages,
        None,
        depth=ch.depth,
        in_flight=ch.in_flight_count,
        deferred=ch.deferred_count,
    )
    return _estimated(loss, average)


def _estimated(loss: Loss, average: float | None) -> Loss:
    """Original family: bytes as messages x the topic's average published size."""
    if average is None or loss.messages is None:
        return loss
    return replace(loss, bytes=round(loss.messages * average), bytes_estimated=True)


async def measure_plan(
    action: str,
    placement: Placement,
    stages: Sequence[Sequence[AdminRequest]],
    *,
    channel: str | None = None,
) -> BlastRadius:
    """:func:`measure` for a plan from :func:`nsqctl.admin.prepare`, before it is sent."""
    async with admin_client() as client:
        return await measure(
            action, placement, nodes_at_risk(placement, stages), client, channel=channel
        )
