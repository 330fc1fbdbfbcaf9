"""A redesign partition's confirmed position and the resume decision, without sockets
(tests/integration/test_redesign_resume_position.py proves the resume on real servers)."""

from __future__ import annotations

from dataclasses import replace

from nsqctl.consumer.leaders import LeaderWatch
from nsqctl.consumer.position import ConfirmedPositions, ResumePlan, plan_resume, skips_start
from nsqctl.consumer.stats import ConsumerStats
from nsqctl.failover import RESUMED_FROM_CONFIRMED, FailoverEvent
from nsqctl.protocol.raw_message import RawMessage
from nsqctl.stats.model import ChannelStats, TopicPartitionStats

SIZE = 10


def raw(offset: int | None) -> RawMessage:
    return RawMessage(0, 1, b"%016d" % (offset or 0), b"x", 1, 0, None, None, offset, SIZE)


def test_position_is_the_first_message_not_handled_yet() -> None:
    pos = ConfirmedPositions()
    assert pos.position(0) is None  # nothing received: nothing to protect
    pos.received(0, [raw(0), raw(10), raw(20), raw(30)])
    assert pos.position(0) == 0
    pos.handled(0, [raw(10), raw(30)])  # out of order: 0 and 20 still open
    assert pos.position(0) == 0
    pos.handled(0, [raw(0)])
    assert pos.position(0) == 20
    pos.handled(0, [raw(20)])
    assert pos.position(0) == 40  # all handled: the end of the furthest one
    assert pos.position(1) is None  # partitions apart


def test_a_requeued_message_stays_open_until_it_is_handled() -> None:
    pos = ConfirmedPositions()
    pos.received(0, [raw(0), raw(10)])
    pos.handled(0, [raw(10)])
    pos.received(0, [raw(0)])  # the requeued one again
    assert pos.position(0) == 0
    pos.handled(0, [raw(0)])
    assert pos.position(0) == 20


def test_frames_without_offsets_are_not_tracked() -> None:
    pos = ConfirmedPositions()
    pos.received(0, [raw(None)])
    pos.handled(0, [raw(None)])
    assert pos.position(0) is None


def copy(end: int, channel: ChannelStats | None) -> TopicPartitionStats:
    return TopicPartitionStats(
        "t",
        0,
        "127.0.0.1:4151",
        end,
        end,
        10,
        False,
        True,
        depth_is_bytes=True,
        channels=(channel,) if channel is not None else (),
    )


def channel(depth_bytes: int | None) -> ChannelStats:
    return ChannelStats("c", 0, 0, 0, 0, 0, 0, 0, 1, False, depth_bytes=depth_bytes)


def test_a_missing_channel_is_resumed_when_the_topic_ends_past_the_position() -> None:
    assert plan_resume(40, copy(100, None), "c") == ResumePlan(0, 40, None)
    assert plan_resume(100, copy(100, None), "c") is None  # a new channel starts right there


def test_an_existing_channel_is_resumed_only_when_it_is_past_the_position() -> None:
    assert plan_resume(40, copy(100, channel(30)), "c") == ResumePlan(0, 40, 70)
    assert plan_resume(40, copy(100, channel(60)), "c") is None  # at it
    assert plan_resume(40, copy(100, channel(80)), "c") is None  # behind: resent, not skipped


def test_on_the_same_nsqd_only_a_missing_channel_is_resumed() -> None:
    # moved on purpose there (channel empty, setoffset): not undone
    assert plan_resume(40, copy(100, channel(30)), "c", same_nsqd=True) is None
    assert plan_resume(40, copy(100, None), "c", same_nsqd=True) == ResumePlan(0, 40, None)


def test_no_resume_when_it_cannot_be_told() -> None:
    assert plan_resume(None, copy(100, None), "c") is None
    assert plan_resume(40, None, "c") is None
    assert plan_resume(40, copy(100, channel(None)), "c") is None


def test_a_channel_made_at_the_end_of_a_partition_that_was_empty_skips_what_came_since() -> None:
    """The channel a subscription from the end made: anything before it was published
    after nsqd found the log empty (tests/integration/test_redesign_empty_partition.py
    forces it on real servers)."""
    assert skips_start(copy(0, channel(0)), "c") is False  # still empty
    assert skips_start(copy(100, channel(100)), "c") is False  # it starts at the first
    assert skips_start(copy(100, channel(40)), "c") is True  # 60 bytes before it
    retained = replace(copy(100, channel(40)), backend_start=60)  # older ones deleted
    assert skips_start(retained, "c") is False
    assert skips_start(replace(retained, backend_start=50), "c") is True
    assert skips_start(None, "c") is None
    assert skips_start(copy(100, None), "c") is None
    assert skips_start(copy(100, channel(None)), "c") is None


def test_the_resumed_event_says_it_resumed_from_the_confirmed_position() -> None:
    events: list[FailoverEvent] = []
    watch = LeaderWatch(
        "t", 60.0, ConsumerStats(), refresh=lambda: None, on_failover=events.append, on_fatal=print
    )
    watch.joined(0, "127.0.0.1:4150", 0.0)
    watch.lost(0, 1.0)
    watch.joined(0, "127.0.0.1:4250", 5.0, RESUMED_FROM_CONFIRMED)
    assert [(e.kind, e.reason, e.waited, e.nsqd) for e in events] == [
        ("resumed", RESUMED_FROM_CONFIRMED, 4.0, "127.0.0.1:4250")
    ]
    assert events[0].describe() == (
        "t/0: consuming again on 127.0.0.1:4250 after 4.0s, resumed from the confirmed position"
    )
