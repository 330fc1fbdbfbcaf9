"""A redesign consumer's confirmed position per partition, and whether a new leader's
channel is past it (sans-IO: the caller reads the leader's ``/stats``).

A youzan channel can exist on the partition's leader only (a replica that joined the
ISR after the channel was made, or missed its copy, gets it on a later periodic sync;
ephemeral channels are never copied). After a failover the new leader then has no such channel, the
first SUB creates it at the topic's end, and every message in between would be skipped
for the channel without a word. So the consumer keeps, per partition, the queue offset up
to which it has handled every message it received (the frames carry each message's
offset and size), and on a new connection moves the channel back to it when the leader's
channel is missing or past it. Messages from there to what was in flight are delivered
again (at-least-once); none is skipped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from nsqctl.protocol.raw_message import RawMessage

if TYPE_CHECKING:
    from nsqctl.stats.model import ChannelStats, TopicPartitionStats


class ConfirmedPositions:
    """Per partition: the offsets of messages received and not handled yet, and the end
    of the furthest message handled. The confirmed position is the first of the former
    or, when every received message was handled, the latter: every message before it
    was handled by this consumer (a message requeued stays open until it is handled)."""

    def __init__(self) -> None:
        self._open: dict[int, dict[int, int]] = {}  # partition -> offset -> end
        self._done: dict[int, int] = {}  # partition -> end of the furthest handled

    def received(self, partition: int, raws: Iterable[RawMessage]) -> None:
        """Messages handed out (frames without offsets are not tracked)."""
        open_ = self._open.get(partition)
        if open_ is None:
            open_ = self._open[partition] = {}
        for raw in raws:
            offset = raw.offset
            if offset is None:
                return
            open_[offset] = offset + (raw.size or 0)

    def handled(self, partition: int, raws: Iterable[RawMessage]) -> None:
        """Messages FINed (whether or not the FIN reached the server: they were handled)."""
        open_ = self._open.get(partition)
        if open_ is None:
            return
        done = self._done.get(partition, 0)
        for raw in raws:
            if raw.offset is None:
                return
            end = open_.pop(raw.offset, None)
            if end is not None and end > done:
                done = end
        self._done[partition] = done

    def position(self, partition: int) -> int | None:
        """The partition's confirmed queue offset; None when no message was received."""
        open_ = self._open.get(partition)
        if open_:
            return min(open_)
        return self._done.get(partition)


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class ResumePlan(NamedTuple):
    """Where a partition's channel has to be moved back to, and why."""

    partition: int
    position: int  # our confirmed queue offset: the channel starts here again
    channel_at: int | None  # the leader's confirmed offset of the channel; None: missing

    def describe(self, topic: str, channel: str, nsqd: str) -> str:
        """One line for a log."""
        where = f"{topic}/{self.partition}"
        found = (
            f"has no channel {channel!r} (it would start at the topic's end)"
            if self.channel_at is None
            else f"has channel {channel!r} at offset {self.channel_at}"
        )
        return (
            f"{where}: {nsqd} {found}, past the offset {self.position} this consumer "
            f"confirmed: resuming from {self.position} so that nothing in between is skipped"
        )


def plan_resume(
    position: int | None,
    copy: TopicPartitionStats | None,
    channel: str,
    *,
    same_nsqd: bool = False,
) -> ResumePlan | None:
    """A plan when the leader's ``copy`` of the partition (from its ``/stats``) lacks the
    channel while the topic's queue ends past ``position`` (a SUB creates a missing
    channel at the end), or has it past ``position``; None when nothing would be skipped,
    or when the stats cannot tell (no copy, no byte counts).

    A channel past ``position`` counts only on another nsqd than the one read before
    (``same_nsqd`` False: a new leader, whose copy may lag or have been made late at the
    topic's end). On the same nsqd it was moved on purpose (``channel empty``,
    ``setoffset``, other consumers), and undoing that would replay what was skipped on
    purpose. A missing channel counts either way (an nsqd restarted without it). A wrong
    guess costs messages delivered again, never a skip.
    """
    if position is None or copy is None or copy.partition is None or not copy.depth_is_bytes:
        return None
    found = copy.channel(channel)
    if found is None:
        at = None
        ahead = copy.depth > position  # depth: the byte offset where the queue ends
    else:
        at = _channel_offset(copy, found)
        if at is None:
            return None
        ahead = at > position and not same_nsqd
    return ResumePlan(copy.partition, position, at) if ahead else None


def skips_start(copy: TopicPartitionStats | None, channel: str) -> bool | None:
    """Whether ``channel`` on the leader's ``copy`` of a partition (from its ``/stats``)
    starts past the partition's first retained message; None when the stats cannot tell
    (no copy, no channel, no byte counts).

    Asked right after a partition whose log was empty was subscribed from its end, before
    anything was consumed (see :class:`.connections.ConnectionSet`): the log was empty
    when nsqd refused the start, so anything before the channel's offset was published in
    between and would be skipped.
    """
    if copy is None or not copy.depth_is_bytes:
        return None
    found = copy.channel(channel)
    at = None if found is None else _channel_offset(copy, found)
    return None if at is None else at > copy.backend_start


def _channel_offset(copy: TopicPartitionStats, found: ChannelStats) -> int | None:
    """The channel's confirmed offset on a redesign copy: its unconsumed bytes end where
    the queue does (``depth``); None without byte counts."""
    return None if found.depth_bytes is None else copy.depth - found.depth_bytes
