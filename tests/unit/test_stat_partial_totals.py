"""``stat``'s topic and channel rows on the redesign sum only the partitions read: with a
partition no nsqd that answered holds, their state says the figures are partial (its
partition rows show ``?``), so a depth of 0 is not read as an empty topic (built records,
no cluster)."""

from __future__ import annotations

from nsqctl.cli.commands.stat import format_row, stat_rows, state_marker
from nsqctl.lookup.topology import TopicMeta
from nsqctl.stats.model import ClusterSnapshot, NodeStats
from nsqctl.stats.view import build_view
from tests.helpers.stats import RECORDED_A, channel_stats, topic_stats


def _rows(partitions: int) -> dict[str, dict[str, object]]:
    """Topic ``t`` with channel ``c``: partitions 0 and 1 read, the rest of the
    ``partitions`` its meta counts with no live copy."""
    parts = tuple(
        topic_stats(RECORDED_A, "t", channel_stats("c"), partition=p, leader=True) for p in (0, 1)
    )
    node = NodeStats(RECORDED_A, 1.0, "up", is_redesign=True, topics=parts)
    meta = {"t": TopicMeta(partition_num=partitions, replica=1)}
    view = build_view(ClusterSnapshot(1.0, (node,), topic_meta=meta))
    return {str(r["scope"]): r for r in stat_rows(view, "t", None)}


def test_a_partition_unread_makes_the_topic_and_channel_rows_partial() -> None:
    rows = _rows(3)
    for scope in ("topic", "channel"):
        assert state_marker(rows[scope]) == "PARTIAL (1 partition unread)", rows[scope]
        assert format_row("12:00:00", rows[scope]).endswith("PARTIAL (1 partition unread)")
    assert state_marker(_rows(4)["topic"]) == "PARTIAL (2 partitions unread)"


def test_every_partition_read_is_no_partial_total() -> None:
    rows = _rows(2)
    assert state_marker(rows["topic"]) == "" and state_marker(rows["channel"]) == ""
