"""A channel's changes since the previous poll, summed over its copies (one a partition):
which copies count when some cannot be compared."""

from __future__ import annotations

import pytest

from nsqctl.stats.history import History
from nsqctl.stats.model import ClusterSnapshot, NodeStats, TopicPartitionStats
from nsqctl.stats.view import ChannelView, build_view
from tests.helpers.stats import channel_stats, topic_stats

NODE = "127.0.0.1:4151"


def _copy(partition: int, messages: int, requeued: int, depth: int) -> TopicPartitionStats:
    """Partition ``partition`` of topic ``t`` with its one channel ``c``."""
    channel = channel_stats("c", depth, requeued=requeued, messages=messages, client_count=1)
    return topic_stats(NODE, "t", channel, partition=partition)


def _poll(at: float, *copies: TopicPartitionStats) -> ClusterSnapshot:
    node = NodeStats(address=NODE, fetched_at=at, state="up", is_redesign=True, topics=copies)
    return ClusterSnapshot(taken_at=at, nodes=(node,))


def _channel(now: ClusterSnapshot, before: ClusterSnapshot, history: History) -> ChannelView:
    topic = build_view(now, before, history).topic("t")
    channel = topic.channel("c") if topic is not None else None
    assert channel is not None
    return channel


def test_a_copy_whose_counter_went_back_or_that_is_new_is_left_out_of_the_sums() -> None:
    """Partition 1's counters went back (its channel was emptied and made again) and
    partition 2 is new: the rate and requeues are partition 0's, the depth one poll
    earlier is unknown, and the channel's rate goes into its history as a gap (a sum over
    some partitions would be a dip); once every copy compares, all of them count."""
    history = History()
    first = _poll(100.0, _copy(0, 1000, 10, 5), _copy(1, 1000, 10, 7))
    build_view(first, None, history)
    second = _poll(102.0, _copy(0, 1100, 14, 6), _copy(1, 900, 3, 8), _copy(2, 50, 1, 9))
    channel = _channel(second, first, history)
    assert channel.msg_rate == pytest.approx(50.0)  # partition 0 alone: 100 in 2 s
    assert channel.requeue_delta == 4 and channel.requeue_rate == pytest.approx(2.0)
    assert channel.previous_depth is None
    assert channel.interval == pytest.approx(2.0)  # partitions 0 and 1 compared
    assert (channel.depth, channel.requeued, channel.messages) == (23, 18, 2050)
    assert channel.depth_trend.values[-1] == 23 and channel.rate_trend.values[-1] is None

    third = _poll(104.0, _copy(0, 1200, 14, 6), _copy(1, 1000, 5, 8), _copy(2, 150, 1, 4))
    channel = _channel(third, second, history)
    assert channel.msg_rate == pytest.approx(150.0)  # (100 + 100 + 100) / 2 s
    assert channel.requeue_delta == 2 and channel.requeue_rate == pytest.approx(1.0)
    assert channel.previous_depth == 23
    assert channel.rate_trend.values[-1] == pytest.approx(150.0)


def test_no_copy_compared_leaves_every_change_unknown() -> None:
    """Every counter went back: no rate, no delta (unknown, not zero), no interval."""
    history = History()
    first = _poll(100.0, _copy(0, 1000, 10, 5))
    build_view(first, None, history)
    channel = _channel(_poll(102.0, _copy(0, 10, 1, 5)), first, history)
    assert channel.msg_rate is None
    assert channel.requeue_delta is None and channel.requeue_rate is None
    assert channel.previous_depth == 5 and channel.interval == pytest.approx(2.0)
    assert channel.rate_trend.values[-1] is None


def test_a_copy_new_since_the_previous_poll_makes_the_channels_rate_a_gap() -> None:
    """Partition 1 appeared (the topic grew): its messages have no rate yet, so the sum is
    partition 0's alone, shown as the channel's rate but not recorded as it."""
    history = History()
    first = _poll(100.0, _copy(0, 1000, 10, 5))
    build_view(first, None, history)
    channel = _channel(_poll(102.0, _copy(0, 1100, 10, 5), _copy(1, 500, 0, 2)), first, history)
    assert channel.msg_rate == pytest.approx(50.0)
    assert channel.requeue_delta == 0 and channel.previous_depth is None
    assert channel.depth_trend.values[-1] == 7 and channel.rate_trend.values[-1] is None
