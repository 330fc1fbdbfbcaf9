"""Stats records for unit tests: nsqd /stats as the model holds it, built in a line, and
the recorded original-family polls of tests/data/stats."""

from __future__ import annotations

from pathlib import Path

from nsqctl.stats.model import ChannelStats, ClientStats, ClusterSnapshot, TopicPartitionStats
from nsqctl.stats.offline import snapshot_from_files

STATS_DATA = Path(__file__).resolve().parent.parent / "data" / "stats"
#: The addresses the recorded original polls are read as (nsqd a, nsqd b).
RECORDED_A, RECORDED_B = "127.0.0.1:4151", "127.0.0.1:4251"


def recorded_original(k: int, taken_at: float) -> ClusterSnapshot:
    """Recorded poll ``k`` (0 or 1) of two original nsqds."""
    return snapshot_from_files(
        {
            RECORDED_A: STATS_DATA / f"original_nsqd_a_t{k}.json",
            RECORDED_B: STATS_DATA / f"original_nsqd_b_t{k}.json",
        },
        taken_at=taken_at,
    )


def channel_stats(
    name: str,
    depth: int = 0,
    *,
    in_flight: int = 0,
    deferred: int = 0,
    requeued: int = 0,
    timeouts: int = 0,
    clients: tuple[ClientStats, ...] = (),
    client_count: int | None = None,
    messages: int = 0,
) -> ChannelStats:
    """A channel; ``client_count`` defaults to how many ``clients`` are given."""
    return ChannelStats(
        name=name,
        depth=depth,
        backend_depth=0,
        in_flight_count=in_flight,
        deferred_count=deferred,
        message_count=messages,
        requeue_count=requeued,
        timeout_count=timeouts,
        client_count=len(clients) if client_count is None else client_count,
        paused=False,
        clients=clients,
    )


def topic_stats(
    node: str,
    name: str,
    *channels: ChannelStats,
    depth: int = 0,
    partition: int | None = None,
    leader: bool = True,
) -> TopicPartitionStats:
    """A topic on one nsqd: the whole topic (``partition`` None, original) or one partition
    (redesign, whose depth counts bytes)."""
    return TopicPartitionStats(
        topic=name,
        partition=partition,
        node=node,
        depth=depth,
        backend_depth=0,
        message_count=0,
        paused=False,
        is_leader=leader,
        depth_is_bytes=partition is not None,
        channels=channels,
    )
