"""A redesign topic delete's loss preview: a partition's channels are cursors into the
queue it stores, so their bytes are shown but counted once in the total, in the stored
queue's row (built records, no cluster)."""

from __future__ import annotations

from dataclasses import replace

import msgspec

from nsqctl.admin.blast import BlastRadius, partition_losses
from nsqctl.stats.model import ClusterSnapshot, NodeStats
from nsqctl.stats.view import build_view
from tests.helpers.stats import RECORDED_A, channel_stats, topic_stats


def _radius(action: str) -> BlastRadius:
    """Partition 0 of ``t`` storing 63587 bytes; channel ``c`` has 1930 of them unread."""
    ch = msgspec.structs.replace(channel_stats("c", 1930), depth_bytes=63587)
    part = replace(
        topic_stats(RECORDED_A, "t", ch, partition=0),
        depth=63587,
        depth_is_bytes=True,
    )
    node = NodeStats(RECORDED_A, 1.0, "up", is_redesign=True, topics=(part,))
    topic = build_view(ClusterSnapshot(1.0, (node,))).topic("t")
    assert topic is not None
    (p,) = topic.partitions
    losses = tuple(partition_losses(action, p, node, None))
    return BlastRadius(f"topic {action}", "t", None, "redesign", losses)


def test_a_deleted_partitions_channel_bytes_are_counted_once() -> None:
    blast = _radius("delete")
    stored, channel = blast.losses
    assert (stored.channel, stored.bytes) == (None, 63587)
    assert (channel.channel, channel.messages, channel.within_stored) == ("c", 1930, True)
    assert blast.bytes == 63587 and blast.to_json()["bytes"] == 63587
    lines = blast.lines()
    assert lines[-1] == "  total: 1930 messages, 63587 bytes"
    assert lines[2].endswith("channel c: 1930 messages, 63587 bytes (within the stored queue)")
