"""The session's rolling history of depth and rate (nsqctl.stats.history) and how the
dashboard draws it (trend cells, the history view): window bounds, counter resets, gaps,
ranges. Snapshots are built from records, as one poll of the original family parses."""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.errors import NsqctlError
from nsqctl.stats.history import History, Series
from nsqctl.stats.model import ChannelStats, ClusterSnapshot, NodeStats, TopicPartitionStats
from nsqctl.stats.series import sparkline
from nsqctl.stats.sources import StatsSession
from nsqctl.stats.view import ClusterView, build_view
from nsqctl.tui.format import span_text, trend_cell
from nsqctl.tui.history import chart, columns, history_text

A, B = "10.0.0.1:4151", "10.0.0.2:4151"


def copy(node: str, depth: int, messages: int) -> TopicPartitionStats:
    """Topic ``t`` on ``node`` with channel ``c`` holding ``depth`` of ``messages``."""
    ch = ChannelStats("c", depth, 0, 0, 0, messages, 0, 0, 1, False)
    return TopicPartitionStats("t", None, node, 0, 0, messages, False, True, channels=(ch,))


def node(address: str, at: float, depth: int, messages: int, start: int = 1000) -> NodeStats:
    return NodeStats(address, at, "up", start_time=start, topics=(copy(address, depth, messages),))


def down(address: str, at: float) -> NodeStats:
    return NodeStats(address, at, "down", error="timed out")


def polls(history: History, snaps: list[ClusterSnapshot]) -> ClusterView:
    previous = None
    view = None
    for snap in snaps:
        view = build_view(snap, previous, history)
        previous = snap
    assert view is not None
    return view


def snap(at: float, *nodes: NodeStats) -> ClusterSnapshot:
    return ClusterSnapshot(taken_at=at, nodes=nodes)


def test_the_window_keeps_the_last_samples_with_their_poll_times() -> None:
    history = History(length=5)
    view = polls(history, [snap(2.0 * i, node(A, 2.0 * i, i, 10 * i)) for i in range(8)])
    topic = view.topic("t")
    assert topic is not None
    assert topic.depth_trend.values == (3, 4, 5, 6, 7)
    assert topic.depth_trend.times == (6.0, 8.0, 10.0, 12.0, 14.0)
    assert topic.rate_trend.values == (5.0,) * 5  # 10 messages every 2 s
    assert topic.depth_trend.seconds == 8.0
    with pytest.raises(ValueError, match="at least 1"):
        History(length=0)


def test_a_counter_reset_is_a_gap_never_a_negative_rate() -> None:
    history = History()
    view = polls(
        history,
        [
            snap(0.0, node(A, 0.0, 5, 100)),
            snap(2.0, node(A, 2.0, 5, 200)),
            snap(4.0, node(A, 4.0, 5, 50)),  # nsqd restarted: its counters began again
            snap(6.0, node(A, 6.0, 5, 80)),
            # restarted again (new start time) and already past the last count: still no
            # rate across the restart
            snap(8.0, node(A, 8.0, 5, 500, start=2000)),
            snap(10.0, node(A, 10.0, 5, 520, start=2000)),
        ],
    )
    channel = view.topic("t").channel("c")  # type: ignore[union-attr]
    assert channel is not None
    assert channel.rate_trend.values == (None, 50.0, None, 15.0, None, 10.0)
    assert view.topic("t").rate_trend.values == channel.rate_trend.values  # type: ignore[union-attr]
    assert channel.rate_history == (50.0, 15.0, 10.0)  # the known samples, no zeros
    assert channel.rate_trend.span == (10.0, 50.0)


def test_a_node_not_answering_is_a_gap_not_a_dip() -> None:
    history = History()
    view = polls(
        history,
        [
            snap(0.0, node(A, 0.0, 10, 0), node(B, 0.0, 20, 0)),
            snap(2.0, node(A, 2.0, 10, 0), node(B, 2.0, 20, 0)),
            snap(4.0, node(A, 4.0, 11, 0), down(B, 4.0)),  # B held a copy of t
            snap(6.0, node(A, 6.0, 12, 0), down(B, 6.0)),
            snap(8.0, node(A, 8.0, 13, 0), node(B, 8.0, 20, 0)),
        ],
    )
    topic = view.topic("t")
    assert topic is not None
    assert topic.depth_trend.values == (30, 30, None, None, 33)
    assert topic.channel("c").depth_trend.values == (30, 30, None, None, 33)  # type: ignore[union-attr]
    assert topic.depth_history == (30, 30, 33)
    assert topic.depth_trend.span == (30, 33)


def test_a_failed_poll_is_a_gap_in_every_series() -> None:
    class Flaky:
        def __init__(self) -> None:
            self.n = 0

        async def snapshot(self) -> ClusterSnapshot:
            self.n += 1
            if self.n == 2:
                raise NsqctlError("no nsqd answered")
            return snap(float(self.n), node(A, float(self.n), self.n, 0))

        async def aclose(self) -> None:
            return None

    async def run() -> ClusterView:
        session = StatsSession(Flaky())
        await session.refresh()
        with pytest.raises(NsqctlError):
            await session.refresh()
        return await session.refresh()

    topic = asyncio.run(run()).topic("t")
    assert topic is not None and topic.depth_trend.values == (1, None, 3)


def test_a_key_gone_for_a_whole_window_is_forgotten() -> None:
    history = History(length=3)
    first = [snap(0.0, node(A, 0.0, 1, 0))]
    empty = [snap(float(i), NodeStats(A, float(i), "up")) for i in range(1, 4)]
    polls(history, first + empty[:2])
    assert history.series(("topic", "t", "depth"), "msgs").values == (1, None, None)
    # the depths of topic and channel are kept while in the window; their rates, never
    # known (one poll only), are gaps only, so already gone
    assert len(history) == 2
    polls(history, empty[2:])
    assert len(history) == 0
    assert history.series(("topic", "t", "depth"), "msgs").values == ()


def test_the_trend_cell_is_scaled_to_its_range_and_says_it() -> None:
    depth = Series((0.0, 2.0, 4.0, 6.0), (1000.0, None, 25000.0, 12000.0), "msgs")
    cell = trend_cell(depth, width=4)
    assert cell.plain.startswith("▁ █▄")
    assert cell.plain.endswith(" 1000–25.0k msgs")
    assert span_text(Series((0.0,), (None,), "msg/s")) == "-"
    assert span_text(Series((0.0, 1.0), (3.0, 3.0), "msg/s")) == "3.0 msg/s"
    assert sparkline([5.0, 5.0]) == "▄▄"  # flat, not zero: halfway
    rate = Series((0.0, 2.0, 4.0), (0.0, 7.5, 15.0), "msg/s")
    assert trend_cell(rate, width=16).plain == "▁▅█" + " " * 13 + " 0.0–15.0 msg/s"


def test_the_history_view_draws_the_whole_window_with_its_scale() -> None:
    values: list[float | None] = [float(v) for v in range(300)]
    values[100:110] = [None] * 10  # twenty seconds without an answer
    series = Series(tuple(2.0 * i for i in range(300)), tuple(values), "msgs")
    assert len(columns(series, 60)) == 60  # ten minutes in 60 columns of 5 polls
    assert columns(series, 60)[20:22] == [None, None]
    lines = [line.plain for line in chart("depth", series, 65)]
    assert lines[0] == "depth (msgs)  now 299  range 0–299 msgs  last 9m58s"
    assert lines[1].startswith("297┤") and lines[4].startswith("  2┤")
    assert lines[5].startswith("   └") and lines[5].count("·") == 2
    assert lines[4][4] == "▁" and lines[1][-1] == "█"  # lowest first, highest last
    text = history_text(series, Series(series.times, (None,) * 300, "msg/s"), 140)
    assert "rate (msg/s)  now -  range -" in text.plain and len(text.plain.splitlines()) == 6
