"""The parts of ``nsqctl node drain`` that need no server: the state file, what a node
still holds (from a stats view built from records), where leaders go, the progress line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from nsqctl.admin.drain.moves import LeaderMove
from nsqctl.admin.drain.progress import DrainProgress, NodeLoad, estimate, node_load
from nsqctl.admin.drain.records import (
    DrainRecord,
    MovedLeader,
    drain_labels,
    drain_states,
    drains_path,
    read_drains,
    running_elsewhere,
    update_drain,
)
from nsqctl.admin.drain.redesign import plan_leader_moves, with_leaderless
from nsqctl.admin.drain.safety import KeptCopy, StopPlan, node_name, readable, stop_plan
from nsqctl.admin.partitions import NsqdNode, PartitionState, TopicState
from nsqctl.admin.partitions.state import RegisteredNsqds, absent_copies
from nsqctl.lookup.topology import TopicMeta
from nsqctl.stats.model import (
    ChannelStats,
    ClusterSnapshot,
    CoordInfo,
    NodeStats,
    TopicPartitionStats,
)
from nsqctl.stats.view import build_view
from tests.helpers.cli import assert_one_line_error, run_main
from tests.helpers.stats import channel_stats, topic_stats

A, B, C, D = "127.0.0.1:4151", "127.0.0.1:4251", "127.0.0.1:4351", "127.0.0.1:4451"


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
    assert dict(drain_states(tmp_path)) == {A: "gave up"}  # "stopped" reads as the nsqd
    assert drain_states(tmp_path / "none") == {}


def test_a_drain_runs_elsewhere_only_while_its_process_lives() -> None:
    """A drain whose process has exited but is not yet reaped by its parent (a zombie,
    which ``kill(pid, 0)`` still finds) is not running: a restore would otherwise wait for
    it to its deadline, and a new drain of the node be refused."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        record = DrainRecord(A, "original", "draining", 1.0, 1.0, pid=child.pid)
        assert running_elsewhere(record)
        assert not running_elsewhere(replace(record, state="drained"))
        assert not running_elsewhere(replace(record, pid=os.getpid()))  # this process's own
        assert child.stdin is not None
        child.stdin.close()  # it exits; WNOWAIT leaves it unreaped
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        assert not running_elsewhere(record)
    finally:
        child.kill()
        child.wait()


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
    assert moves == [] and blocked and blocked[0].describe().startswith("t/0: no other nsqd")


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


def test_a_leader_is_never_moved_to_an_isr_member_that_is_down() -> None:
    # youzan keeps a dead nsqd in the ISR (by its node id, no lookupd lists it) while
    # dropping it would leave too few copies: it cannot take leadership
    dead = "127.0.0.1:20913:20911:2"
    moves, blocked = plan_leader_moves(build_view(_leads((A, dead))), A, {dead: 0.0})
    assert [m.target for m in moves] in ([B], [C]) and blocked == []


# ------------------------------------------------------------------ safe to stop


def _topic(name: str, replicas: int, *parts: PartitionState, ordered: bool = False) -> TopicState:
    """A topic as the lookup gives it: ``metainfo`` as nsqlookupd sends it, partitions with
    leader and ISR as nsqd HTTP addresses (a node id for an nsqd no lookupd lists)."""
    meta = TopicMeta.from_json(
        {"partition_num": len(parts), "replica": replicas, "ordered": ordered}
    )
    return TopicState(name, meta, {p.partition: p for p in parts})


DEAD = "127.0.0.1:20913:20911:2"  # youzan's id of C, which is down (tcp 127.0.0.1:20911)


def _up(*https: str) -> dict[str, NsqdNode]:
    """The nsqds registered now, by HTTP address, each with its TCP address (port - 1, as
    the sandbox lays them out) and youzan node id."""
    nodes: dict[str, NsqdNode] = {}
    for http in https:
        host, port = http.rsplit(":", 1)
        tcp = f"{host}:{int(port) - 1}"
        nodes[http] = NsqdNode(http, tcp, f"{host}:{int(port) + 1}:{int(port) - 1}:0")
    return nodes


def test_stopping_must_leave_more_than_half_the_replicas_in_sync() -> None:
    """3 nsqd, C dead, replicas 2: stopping B leaves T/0 and O/0 without enough copies,
    and no nsqd is free to take B's copy first."""
    states = [
        _topic("T", 2, PartitionState(0, A, (A, B))),
        _topic("O", 2, PartitionState(0, B, (B, DEAD)), PartitionState(1, A, (A, B))),
        _topic("three", 3, PartitionState(0, A, (A, B, C))),
        _topic("single", 1, PartitionState(0, A, (A,))),
    ]
    plan = stop_plan(states, B, _up(A, B))
    moves, blockers = plan.moves, plan.blocked
    assert moves == []
    assert [(b.topic, b.partition) for b in blockers] == [
        ("T", 0),
        ("O", 0),
        ("O", 1),
        ("three", 0),  # C, down, counts for nothing
    ]
    assert blockers[0].describe() == (
        f"T/0: stopping {B} leaves 1 in-sync copy ({A}); with replicas 2 it takes writes and "
        "elects a leader only with 2: add an nsqd (or lower its replicas with `topic_update`) "
        "first"
    )
    assert blockers[1].describe() == (
        f"O/0: stopping {B} leaves 0 in-sync copies; with replicas 2 it takes writes and "
        "elects a leader only with 2 (127.0.0.1:20911 in its ISR is down): bring "
        "127.0.0.1:20911 back first"
    )
    assert all(DEAD not in b.describe() for b in blockers)
    # elected in place of C, B is O/0's only in-sync copy and C, down, is in its catch-up
    # list: C is the copy it misses, not a new nsqd
    caught = [_topic("O", 2, PartitionState(0, B, (B,), (DEAD,)))]
    [blocker] = stop_plan(caught, B, _up(A, B)).blocked
    assert blocker.why.endswith(
        "(127.0.0.1:20911 in its catch-up list is down): bring 127.0.0.1:20911 back first"
    )
    # C free, so B's copy can go there first... but O/0 would still have only one copy up
    assert stop_plan(states[:1], B, _up(A, B, C)) == StopPlan(
        [LeaderMove("T", 0, B, C, copy=True)], [], []
    )
    # replicas 3 keeps 2 of 3 when C stops: nothing to do, and C's follower copy stays
    kept = [KeptCopy("three", 0, 3, 2, 2)]
    assert stop_plan(states[2:3], C, _up(A, B, C)) == StopPlan([], [], kept)
    assert stop_plan(states, C, _up(A, B, C)).kept == kept
    assert plan.kept == []  # every copy of B's blocks or leads


def test_a_short_partition_waits_for_its_catching_up_copies_not_for_a_new_nsqd() -> None:
    """youzan puts the copies it assigns a partition (a new one, or a failed ISR member)
    in its catch-up list until they have synced from the leader: one that is up is on its
    way into the ISR, so the advice is to wait for it (named by its TCP address, with how
    to watch), not to add an nsqd the cluster already has."""
    catching = "127.0.0.1:4350"  # C's TCP address
    wait = f"wait for {catching} to catch up"
    watch = "(`lookup(T)` shows when it joins the ISR)"
    # replicas 3: stopping A leaves B alone in sync; C, up and catching up, makes two
    states = [_topic("T", 3, PartitionState(0, A, (A, B), (C,)))]
    [blocker] = stop_plan(states, A, _up(A, B, C)).blocked
    assert blocker.why.endswith(
        f"only with 2 ({catching} in its catch-up list is catching up): {wait} first {watch}"
    ), blocker.why
    # not enough alone: what else it takes, the down copy if any, else an nsqd
    alone = PartitionState(0, A, (A,), (C,))
    assert absent_copies("T", alone, _up(A, C), 2, node=A) == (
        f" ({catching} in its catch-up list is catching up)",
        f"{wait} and add an nsqd (or lower its replicas with `topic_update`) first {watch}",
    )
    with_dead = PartitionState(0, A, (A, DEAD), (C,))
    assert absent_copies("T", with_dead, _up(A, C), 3) == (
        f" (127.0.0.1:20911 in its ISR is down; {catching} in its catch-up list is catching up)",
        f"{wait} and bring 127.0.0.1:20911 back first {watch}",
    )
    # no leader and no in-sync copy up to elect one: nothing to catch up from
    stranded = PartitionState(0, None, (DEAD,), (C,))
    assert absent_copies("T", stranded, _up(A, C), 1) == (
        " (127.0.0.1:20911 in its ISR is down)",
        "bring 127.0.0.1:20911 back first",
    )
    # the node to stop catching up itself is no copy the partition will have
    assert absent_copies("T", alone, _up(A, C), 2, node=C)[1] == (
        "add an nsqd (or lower its replicas with `topic_update`) first"
    )
    # a partition of one replica has no fewer to go to
    single = PartitionState(0, A, (A,), ())
    assert absent_copies("T", single, _up(A), 1, node=A)[1] == "add an nsqd first"


def test_a_copy_moves_to_the_least_loaded_free_nsqd_of_another_partition_s_topic() -> None:
    up = _up(A, B, C, D)
    moves = stop_plan([_topic("T", 2, PartitionState(0, A, (A, B)))], B, up, {C: 0.9, D: 0.1}).moves
    assert moves == [LeaderMove("T", 0, B, D, copy=True)]
    moves = stop_plan(
        [_topic("T", 2, PartitionState(0, A, (A, B)))], B, up, {C: 0.9, D: 0.1}, avoid={D}
    ).moves
    assert moves == [LeaderMove("T", 0, B, C, copy=True)]  # D drains too
    # an unordered topic keeps one partition per nsqd: C holds T/1, nowhere to go
    parts = (PartitionState(0, A, (A, B)), PartitionState(1, C, (C,)))
    plan = stop_plan([_topic("T", 2, *parts)], B, _up(A, B, C))
    assert plan.moves == [] and "add an nsqd" in plan.blocked[0].why
    # an ordered one may share: C takes it
    moves = stop_plan([_topic("T", 2, *parts, ordered=True)], B, _up(A, B, C)).moves
    assert moves == [LeaderMove("T", 0, B, C, copy=True)]


def test_a_partition_without_leader_or_isr_is_not_called_safe() -> None:
    states = [_topic("T", 2, PartitionState(0, None, ()), PartitionState(1, A, ()))]
    whys = [b.why for b in stop_plan(states, A, _up(A, B)).blocked]
    assert whys == [
        f"its leader {A} did not report the ISR: cannot tell if it stays writable",
    ]
    # no leader: waiting for an election is the advice only when enough of its ISR is up
    # for the leader elected to take writes; else the copy that is down must come back
    states = [_topic("T", 2, PartitionState(0, None, (A, B)))]
    why = stop_plan(states, A, _up(A, B)).blocked[0].why
    assert why.startswith("it has no leader now (not writable), and 2 of its in-sync copies")
    assert "wait for nsqlookupd to elect one (`lookup(T)` shows when)" in why
    states = [_topic("T", 2, PartitionState(0, None, (DEAD, A)))]
    why = stop_plan(states, A, _up(A, B)).blocked[0].why
    assert "1 of its in-sync copies are up (127.0.0.1:20911 in its ISR is down)" in why
    assert "waiting for an election will not do; bring 127.0.0.1:20911 back first" in why


def test_a_leaderless_partition_with_the_node_in_its_isr_refuses_the_stop() -> None:
    """Right after T/0's leader A died, before an election, the lookup lists T/0 nowhere
    (it lists a partition only with a leader) while B, up, reports it with A and B in its
    ISR. The lookup's records alone show nothing of B's (T/1 is on C and D): the stop
    would be called safe, yet B may hold the copy the election needs. The nsqds' view
    adds T/0, and the stop is refused naming it."""
    snap = ClusterSnapshot(
        0.0,
        (
            _node(B, topic_stats(B, "T", partition=0, leader=False), redesign=True),
            _node(C, topic_stats(C, "T", partition=1), redesign=True),
            _node(D, topic_stats(D, "T", partition=1, leader=False), redesign=True),
        ),
        coordinator=(CoordInfo("T", 0, B, isr=(A, B)), CoordInfo("T", 1, C, isr=(C, D))),
    )
    view = build_view(snap)
    states = [_topic("T", 2, PartitionState(1, C, (C, D)))]  # what the lookup lists
    assert stop_plan(states, B, _up(B, C, D)) == StopPlan([], [], [])  # blind to T/0
    plan = stop_plan(with_leaderless(states, view, B), B, _up(B, C, D))
    assert plan.moves == []
    [blocker] = plan.blocked
    assert (blocker.topic, blocker.partition) == ("T", 0)
    assert blocker.describe().startswith("T/0: it has no leader now (not writable)")
    # a node in no leaderless partition's ISR is not held back by it
    assert with_leaderless(states, view, C) == states


def test_server_messages_name_nodes_by_address_not_by_youzan_id() -> None:
    text = "--to 127.0.0.1:20913:20911:2: not an nsqd registered with nsqlookupd"
    assert readable(text) == "--to 127.0.0.1:20911: not an nsqd registered with nsqlookupd"
    assert readable(f"{A} and {B}") == f"{A} and {B}"
    assert node_name(DEAD) == "127.0.0.1:20911" and node_name(A) == A


@pytest.mark.parametrize("node", ["nsqd1", "127.0.0.1:70000", "http://127.0.0.1:4151", "::1:4151"])
def test_a_malformed_node_is_bad_input_before_any_lookupd_is_asked(node: str) -> None:
    """Port 1 has no nsqlookupd: the address is refused before one would be asked."""
    proc = run_main("node", "drain", node, "--lookupd", "127.0.0.1:1", "--dry-run")
    line = assert_one_line_error(proc, 2)
    assert f"bad address '{node}'" in line and "e.g. 127.0.0.1:4151" in line, line


def test_a_hung_isr_member_is_said_to_hang_and_to_be_resumed_not_to_be_down() -> None:
    """An ISR member nsqlookupd still lists that does not answer (SIGSTOPped) was called
    down, with the advice to bring it back: it is there, stopped; it is to be resumed (or
    stopped for good, and nsqlookupd repairs the partition without it)."""
    hung_tcp = "127.0.0.1:4350"  # C's TCP address; its ISR entry stays a node id
    hung_id = f"127.0.0.1:4352:{hung_tcp.rsplit(':', 1)[1]}:3"
    up = RegisteredNsqds(_up(A, B))
    up.silent = ((C, hung_tcp),)
    p = PartitionState(0, A, (A, hung_id))
    assert absent_copies("T", p, up, 2, node=A) == (
        f" ({hung_tcp} in its ISR is registered but not answering (stopped, or crashed and "
        "not yet dropped))",
        f"resume {hung_tcp} (or bring it back if crashed) first (or stop it for good, or "
        "wait for nsqlookupd to drop it: it then repairs the partition without it)",
    )
    # with one down beside it, each is said as it is
    both = PartitionState(0, A, (A, hung_id, DEAD))
    named, advice = absent_copies("T", both, up, 3)
    assert named == (
        " (127.0.0.1:20911 in its ISR is down; "
        f"{hung_tcp} in its ISR is registered but not answering (stopped, or crashed and not "
        "yet dropped))"
    )
    assert advice.startswith(
        f"bring 127.0.0.1:20911 back and resume {hung_tcp} (or bring it back if crashed) first"
    ), advice
    # a drain of A is refused in the same words
    [blocker] = stop_plan([_topic("T", 2, p)], A, up).blocked
    assert blocker.why.endswith(
        "in its ISR is registered but not answering (stopped, or crashed and not yet "
        "dropped)): "
        f"resume {hung_tcp} (or bring it back if crashed) first (or stop it for good, or wait "
        "for nsqlookupd to drop it: it then repairs the partition without it)"
    ), blocker.why
