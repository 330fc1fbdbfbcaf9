"""The parts of ``nsqctl node drain`` that need no server: the state file, what a node
still holds (from a stats view built from records), where leaders go, the progress line."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from nsqctl.admin.drain_progress import DrainProgress, NodeLoad, estimate, node_load
from nsqctl.admin.drain_redesign import LeaderMove, plan_leader_moves
from nsqctl.admin.drain_state import (
    DrainRecord,
    MovedLeader,
    drain_labels,
    drain_states,
    drains_path,
    read_drains,
    update_drain,
)
from nsqctl.stats.model import (
    ChannelStats,
    ClusterSnapshot,
    CoordInfo,
    NodeStats,
    TopicPartitionStats,
)
from nsqctl.stats.view import build_view
from tests.helpers.stats import channel_stats, topic_stats

A, B, C = "127.0.0.1:4151", "127.0.0.1:4251", "127.0.0.1:4351"


def _channel(
    name: str, depth: int, clients: int, in_flight: int = 0, deferred: int = 0
) -> ChannelStats:
    return channel_stats(name, depth, in_flight=in_flight, deferred=deferred, client_count=clients)


def _node(address: str, *topics: TopicPartitionStats, redesign: bool = False) -> NodeStats:
    return NodeStats(address, 0.0, "up", is_redesign=redesign, topics=topics)


# ------------------------------------------------------------------ state file


def test_records_round_trip_and_the_dashboard_mapping(tmp_path: Path) -> None:
    moved = (MovedLeader("t", 0, A, B),)
    update_drain(
        A, lambda old: DrainRecord(A, "redesign", "draining", 1.0, 1.0, moved=moved), tmp_path
    )
    update_drain(B, lambda old: DrainRecord(B, "original", "drained", 1.0, 1.0), tmp_path)
    update_drain(A, lambda old: replace(old, state="restored") if old else None, tmp_path)
    records = read_drains(tmp_path)
    assert records[A].state == "restored" and records[A].moved == moved
    assert dict(drain_states(tmp_path)) == {A: "restored", B: "drained"}


def test_the_dashboard_label_shows_a_running_drains_progress(tmp_path: Path) -> None:
    running = DrainRecord(A, "original", "draining", 1.0, 1.0, remaining=120, eta=30.4)
    stuck = DrainRecord(B, "original", "draining", 1.0, 1.0, remaining=7, eta=None)
    update_drain(A, lambda old: running, tmp_path)
    update_drain(B, lambda old: stuck, tmp_path)
    assert dict(drain_labels(tmp_path)) == {
        A: "draining: 120 left, ~30s",
        B: "draining: 7 left, not falling",
    }
    update_drain(A, lambda old: replace(old, state="drained") if old else None, tmp_path)
    assert drain_labels(tmp_path)[A] == "drained"


def test_a_torn_file_or_unknown_state_does_not_break_reading(tmp_path: Path) -> None:
    path = drains_path(tmp_path)
    path.write_text("{not json")
    assert read_drains(tmp_path) == {}
    path.write_text(json.dumps({"drains": {A: {"node": A, "state": "weird"}, "x": {}}}))
    assert dict(drain_states(tmp_path)) == {A: "stopped"}
    assert drain_states(tmp_path / "none") == {}


# ------------------------------------------------------------------ what the node holds


def test_original_load_counts_every_message_once_and_names_what_nothing_drains() -> None:
    snap = ClusterSnapshot(
        0.0,
        (
            _node(
                A,
                topic_stats(A, "orders", _channel("c", 5, 1, in_flight=3, deferred=2), depth=4),
                topic_stats(A, "orders2", _channel("archive", 120, 0)),
                topic_stats(A, "raw", depth=9),
            ),
            _node(B, topic_stats(B, "orders", _channel("c", 50, 1))),
        ),
    )
    load = node_load(build_view(snap), A)
    assert (load.depth, load.in_flight, load.deferred) == (4 + 5 + 120 + 9, 3, 2)
    assert load.remaining == 4 + 5 + 3 + 2 + 120 + 9
    assert [u.describe() for u in load.undrained] == [
        "no consumer drains orders2/archive: 120 messages",
        "no channel takes raw: 9 messages",
    ]
    assert node_load(build_view(snap), C).up is False


def test_redesign_load_is_what_the_node_leads_and_what_depends_on_it() -> None:
    snap = ClusterSnapshot(
        0.0,
        (
            _node(A, topic_stats(A, "t", _channel("c", 7, 1), partition=0), redesign=True),
            _node(
                B,
                topic_stats(B, "t", _channel("c", 7, 1), partition=0, leader=False),
                topic_stats(B, "u", _channel("c", 4, 1), partition=0),
                redesign=True,
            ),
        ),
        coordinator=(CoordInfo("t", 0, A, isr=(A, B)), CoordInfo("u", 0, B, isr=(B,))),
    )
    view = build_view(snap)
    load = node_load(view, A)
    assert load.remaining == 7 and load.dependent == ("t/0 (leader)",)
    follower = node_load(view, B)
    assert follower.remaining == 4 and follower.dependent == ("u/0 (leader)",)


# ------------------------------------------------------------------ where leaders go


def _leads(isr: tuple[str, ...], others: tuple[TopicPartitionStats, ...] = ()) -> ClusterSnapshot:
    nodes = {n: _node(n, redesign=True) for n in (A, B, C)}
    nodes[A] = _node(A, topic_stats(A, "t", partition=0), redesign=True)
    for t in others:
        nodes[t.node] = _node(t.node, *nodes[t.node].topics, t, redesign=True)
    coord = (CoordInfo("t", 0, A, isr=isr),)
    return ClusterSnapshot(0.0, tuple(nodes.values()), coordinator=coord)


def test_leadership_goes_to_the_least_loaded_in_sync_copy() -> None:
    view = build_view(_leads((A, B, C)))
    moves, blocked = plan_leader_moves(view, A, {B: 0.5, C: 0.1})
    assert moves == [LeaderMove("t", 0, A, C)] and blocked == []
    moves, _ = plan_leader_moves(view, A, {B: 0.5, C: 0.1}, avoid={C})  # C drains too
    assert moves == [LeaderMove("t", 0, A, B)]


def test_a_single_copy_moves_to_a_free_nsqd_or_is_reported() -> None:
    moves, blocked = plan_leader_moves(build_view(_leads((A,))), A, {})
    assert moves == [LeaderMove("t", 0, A, B)] and blocked == []
    taken = (topic_stats(B, "t", partition=1), topic_stats(C, "t", partition=2))
    moves, blocked = plan_leader_moves(build_view(_leads((A,), taken)), A, {})
    assert moves == [] and blocked and blocked[0].startswith("t partition 0: no other nsqd")


# ------------------------------------------------------------------ progress


def test_progress_is_done_only_when_empty_unlisted_and_independent() -> None:
    empty = NodeLoad(0, 0, 0, 0)
    assert DrainProgress(A, 1.0, empty).done
    assert not DrainProgress(A, 1.0, empty, listed=("t",)).done
    assert not DrainProgress(A, 1.0, NodeLoad(0, 0, 0, 0, up=False)).done
    busy = DrainProgress(A, 3.0, NodeLoad(10, 2, 0, 12), rate=4.0, eta=3.0)
    assert not busy.done
    assert busy.line() == (
        f"{A}: 12 messages left; depth 10, in flight 2, deferred 0; 4.0/s; empty in ~3s (3s)"
    )
    assert busy.left() == ["12 messages (depth 10, in flight 2, deferred 0)"]


def test_estimate_uses_the_shared_drain_rules() -> None:
    assert estimate([100, 80, 60], [0.0, 1.0, 2.0]) == (20.0, 3.0)
    assert estimate([100, 80, 60], [0.0, 2.0, 4.0]) == (10.0, 6.0)  # slow polls: slower
    assert estimate([5, 5, 5], [0.0, 1.0, 2.0]) == (None, None)
    assert estimate([5], [0.0]) == (None, None)
