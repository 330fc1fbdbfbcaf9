"""``stat``'s pause count on a redesign channel's own row: out of the partitions read that
hold the channel, with the unread ones said apart (built records, no cluster)."""

from __future__ import annotations

import msgspec

from nsqctl.cli.commands.stat import stat_rows, state_marker
from nsqctl.lookup.topology import TopicMeta
from nsqctl.stats.model import ChannelStats, ClusterSnapshot, NodeStats
from nsqctl.stats.view import build_view
from tests.helpers.stats import RECORDED_A, channel_stats, topic_stats


def _channel_row(paused_on: set[int], held_on: set[int], partitions: int) -> dict[str, object]:
    """Channel ``c`` of topic ``t`` as stat's row: partitions 0 and 1 read, the rest of
    the ``partitions`` its meta counts with no live copy; the channel is on ``held_on``,
    paused on ``paused_on``."""
    parts = []
    for p in (0, 1):
        chans: tuple[ChannelStats, ...] = ()
        if p in held_on:
            chans = (msgspec.structs.replace(channel_stats("c"), paused=p in paused_on),)
        parts.append(topic_stats(RECORDED_A, "t", *chans, partition=p, leader=True))
    node = NodeStats(RECORDED_A, 1.0, "up", is_redesign=True, topics=tuple(parts))
    meta = {"t": TopicMeta(partition_num=partitions, replica=1)}
    view = build_view(ClusterSnapshot(1.0, (node,), topic_meta=meta))
    [row] = [r for r in stat_rows(view, "t", "c") if r["scope"] == "channel"]
    return row


def test_paused_on_every_partition_read_says_what_went_unread() -> None:
    row = _channel_row({0, 1}, {0, 1}, 3)
    fields = (row["paused_partitions"], row["partitions"], row["unread_partitions"])
    assert fields == (2, 2, 1), row
    assert state_marker(row) == "PAUSED 2/2 (1 partition unread)"


def test_paused_on_every_partition_holding_it_reads_plain_paused() -> None:
    row = _channel_row({0}, {0}, 2)  # created on partition 0 only; both read
    fields = (row["paused_partitions"], row["partitions"], row["unread_partitions"])
    assert fields == (1, 1, 0), row
    assert state_marker(row) == "PAUSED"


def test_paused_on_some_partitions_counts_them() -> None:
    assert state_marker(_channel_row({0}, {0, 1}, 2)) == "PAUSED 1/2"
    assert state_marker(_channel_row({0}, {0, 1}, 4)) == "PAUSED 1/2 (2 partitions unread)"
