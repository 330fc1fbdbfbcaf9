"""Hot spots (nsqctl.stats.hotspots) and the node summary (nsqctl.stats.node_totals) on snapshots
built from records: ranking by each key, and every reason a channel or client is flagged."""

from __future__ import annotations

import pytest

from nsqctl.errors import ConfigError
from nsqctl.stats.history import History
from nsqctl.stats.hotspots import (
    SORT_KEYS,
    ChannelHotSpot,
    held_messages,
    rank_channels,
    rank_clients,
)
from nsqctl.stats.model import (
    ChannelStats,
    ClientStats,
    ClusterSnapshot,
    NodeStats,
)
from nsqctl.stats.node_totals import NO_DRAIN, node_summaries
from nsqctl.stats.view import ClusterView, build_view
from tests.helpers.stats import channel_stats as channel
from tests.helpers.stats import topic_stats

A, B = "127.0.0.1:4151", "127.0.0.1:4251"


def client(
    addr: str, rdy: int, in_flight: int, requeued: int = 0, timeouts: int | None = 0
) -> ClientStats:
    return ClientStats(
        client_id=addr,
        hostname="worker",
        remote_address=addr,
        user_agent="test",
        ready_count=rdy,
        in_flight_count=in_flight,
        message_count=0,
        finish_count=0,
        requeue_count=requeued,
        timeout_count=timeouts,
        connect_ts=0,
    )


def snapshot(at: float, channels: list[ChannelStats], *, topic: str = "orders") -> ClusterSnapshot:
    """One original-family nsqd holding ``topic`` with ``channels``, polled at ``at``."""
    tp = topic_stats(A, topic, *channels)
    node = NodeStats(address=A, fetched_at=at, state="up", topics=(tp,))
    return ClusterSnapshot(taken_at=at, nodes=(node,))


def two_polls(
    before: list[ChannelStats], after: list[ChannelStats], dt: float = 2.0
) -> ClusterView:
    return build_view(snapshot(100.0 + dt, after), snapshot(100.0, before))


def by_name(entries: list[ChannelHotSpot]) -> dict[str, ChannelHotSpot]:
    return {e.channel: e for e in entries}


def test_rates_per_second_and_ranking_by_each_key() -> None:
    busy = [client("10.0.0.1:1", rdy=10, in_flight=10)]
    idle = [client("10.0.0.2:1", rdy=10, in_flight=1)]
    view = two_polls(
        [
            channel("retry", 50, requeued=0, timeouts=0, clients=tuple(idle)),
            channel("slow", 500, in_flight=10, timeouts=0, clients=tuple(busy)),
            channel("fine", 100, in_flight=1, clients=tuple(idle)),
        ],
        [
            channel("retry", 50, requeued=40, timeouts=2, in_flight=1, clients=tuple(idle)),
            channel("slow", 480, in_flight=10, timeouts=20, clients=tuple(busy)),
            channel("fine", 0, in_flight=1, clients=tuple(idle)),
        ],
    )
    requeue = rank_channels(view, "requeue")
    assert requeue[0].channel == "retry"
    assert requeue[0].requeue_rate == pytest.approx(20.0)  # 40 in 2 s
    timeout = rank_channels(view, "timeout")
    assert [e.channel for e in timeout] == ["slow", "retry", "fine"]
    assert timeout[0].timeout_rate == pytest.approx(10.0)
    drain = by_name(rank_channels(view, "drain"))
    assert drain["slow"].drain_rate == pytest.approx(10.0)  # 500 → 480 in 2 s
    assert drain["slow"].time_to_drain == pytest.approx(48.0)
    assert drain["retry"].time_to_drain is None  # holds 50, not falling: never drains
    assert drain["fine"].time_to_drain == 0.0
    assert [e.channel for e in rank_channels(view, "drain")] == ["retry", "slow", "fine"]
    sat = rank_channels(view, "saturation")
    assert sat[0].channel == "slow" and sat[0].saturation == pytest.approx(1.0)
    assert "starved" in sat[0].reasons
    assert len(rank_channels(view, "requeue", limit=2)) == 2


def test_first_poll_has_no_rates_and_ranks_by_name() -> None:
    view = build_view(snapshot(100.0, [channel("b", 5), channel("a", 5)]))
    entries = rank_channels(view, "requeue")
    assert [e.channel for e in entries] == ["a", "b"]
    assert all(e.requeue_rate is None and e.timeout_rate is None for e in entries)


def test_poison_a_few_messages_requeued_over_and_over() -> None:
    # original family: 3 messages held (1 waiting, 1 in flight, 1 deferred), 30 REQs
    consumer = (client("10.0.0.1:1", rdy=1, in_flight=1),)
    view = two_polls(
        [channel("bad", 1, in_flight=1, deferred=1, requeued=100, clients=consumer)],
        [channel("bad", 1, in_flight=1, deferred=1, requeued=130, clients=consumer)],
    )
    [hot] = rank_channels(view, "requeue")
    assert hot.held == 3 and "poison" in hot.reasons
    # the same requeues over a deep channel are a slow consumer, not poison
    deep = two_polls(
        [channel("deep", 5000, requeued=100, clients=consumer)],
        [channel("deep", 5000, requeued=130, clients=consumer)],
    )
    assert "poison" not in rank_channels(deep, "requeue")[0].reasons


def test_redesign_held_is_the_channel_depth() -> None:
    tp = topic_stats(A, "orders", channel("c", 7, in_flight=3, deferred=1), depth=4096, partition=0)
    view = build_view(
        ClusterSnapshot(
            taken_at=1.0,
            nodes=(
                NodeStats(address=A, fetched_at=1.0, state="up", is_redesign=True, topics=(tp,)),
            ),
        )
    )
    topic = view.topic("orders")
    assert topic is not None
    assert held_messages(topic, topic.channels[0]) == 7  # in flight already counted


def test_stalled_and_orphan_reasons() -> None:
    stalled = (client("10.0.0.1:1", rdy=0, in_flight=0),)
    history = History()
    prev = None
    view = None
    for i in range(5):  # the orphan's depth grows poll after poll, nobody connected
        snap = snapshot(
            100.0 + 2 * i, [channel("left", 10 * (i + 1)), channel("stuck", 5, clients=stalled)]
        )
        view = build_view(snap, prev, history)
        prev = snap
    assert view is not None
    entries = by_name(rank_channels(view, "drain"))
    assert entries["left"].reasons == ("orphan",)
    assert entries["stuck"].reasons == ("stalled",)
    assert entries["left"].time_to_drain is None


def test_clients_ranked_with_their_own_rates_and_reasons() -> None:
    before = (
        client("10.0.0.1:1", 5, 5, requeued=0, timeouts=0),
        client("10.0.0.2:1", 0, 0, requeued=0, timeouts=0),
    )
    after = (
        client("10.0.0.1:1", 5, 5, requeued=2, timeouts=8),
        client("10.0.0.2:1", 0, 0, requeued=10, timeouts=None),
    )
    view = two_polls([channel("c", 20, clients=before)], [channel("c", 20, clients=after)])
    requeue = rank_clients(view, "requeue")
    assert [c.remote_address for c in requeue] == ["10.0.0.2:1", "10.0.0.1:1"]
    assert requeue[0].requeue_rate == pytest.approx(5.0) and requeue[0].reasons == ("stalled",)
    assert requeue[0].timeout_rate is None  # not reported per client (original family)
    assert requeue[1].reasons == ("starved",) and requeue[1].saturation == pytest.approx(1.0)
    assert rank_clients(view, "timeout")[0].timeout_rate == pytest.approx(4.0)
    assert all(c.time_to_drain is None for c in requeue)  # the channel's: 20, not falling


def test_unknown_sort_key_is_refused() -> None:
    assert set(SORT_KEYS) == {"requeue", "timeout", "drain", "saturation"}
    with pytest.raises(ConfigError, match="unknown hot-spot sort") as caught:
        rank_channels(build_view(snapshot(1.0, [])), "depth")  # type: ignore[arg-type]
    assert caught.value.setting == "key"


def test_node_summary_totals_leaders_only_and_drain_state() -> None:
    led = topic_stats(
        A,
        "orders",
        channel("c", 7, in_flight=3, deferred=1),
        channel("d", 2),
        depth=1 << 20,
        partition=0,
    )
    other = topic_stats(A, "events", channel("c", 1), depth=1 << 20, partition=1)
    replica = topic_stats(A, "orders", channel("c", 900), depth=1 << 20, partition=1, leader=False)
    nodes = (
        NodeStats(
            address=A, fetched_at=1.0, state="up", is_redesign=True, topics=(led, other, replica)
        ),
        NodeStats(address=B, fetched_at=1.0, state="down", error="timed out"),
    )
    view = build_view(ClusterSnapshot(taken_at=1.0, nodes=nodes))
    a, b = node_summaries(view, {A: "draining 3/5"})
    assert (a.depth, a.in_flight, a.deferred) == (10, 3, 1)  # the replica's 900 not counted
    assert (a.topics, a.partitions, a.partitions_led) == (2, 3, 2)
    assert a.drain_state == "draining 3/5"
    assert b.state == "down" and b.error == "timed out" and b.drain_state == NO_DRAIN
    assert b.depth == 0
    original = node_summaries(build_view(snapshot(1.0, [channel("c", 4)])))[0]
    assert original.partitions_led is None and original.depth == 4
