"""The stats model on recorded original-family payloads and doc-derived redesign payloads:
parsing, rates between polls, starved/stalled rules, leaders, history and severity."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from nsqctl.stats.gcpause import freeze_after_bursts, gc_paused
from nsqctl.stats.history import History, sparkline
from nsqctl.stats.model import ClusterSnapshot, NodeStats
from nsqctl.stats.parse import (
    LazyClients,
    StatsProtocolError,
    nsqd_http_addresses,
    parse_client,
    parse_nsqd_body,
    parse_nsqd_stats,
)
from nsqctl.stats.replay import load_json, snapshot_from_files
from nsqctl.stats.rules import delta, is_growing, is_stalled, is_starved, rate
from nsqctl.stats.view import build_view

DATA = Path(__file__).resolve().parent.parent / "data" / "stats"
A, B = "127.0.0.1:4151", "127.0.0.1:4251"


def original(k: int, taken_at: float) -> ClusterSnapshot:
    return snapshot_from_files(
        {A: DATA / f"original_nsqd_a_t{k}.json", B: DATA / f"original_nsqd_b_t{k}.json"},
        taken_at=taken_at,
    )


def redesign(k: int, taken_at: float) -> ClusterSnapshot:
    return snapshot_from_files(
        {
            A: DATA / f"redesign_nsqd_a_t{k}_from_doc.json",
            B: DATA / f"redesign_nsqd_b_t{k}_from_doc.json",
        },
        taken_at=taken_at,
        coordinator={A: DATA / "redesign_coordinator_stats_from_doc.json"},
        cluster=DATA / "redesign_cluster_stats_from_doc.json",
    )


# ------------------------------------------------------------------ rules


@pytest.mark.parametrize(
    ("rdy", "in_flight", "starved"),
    [(10, 9, True), (10, 8, False), (20, 17, True), (20, 16, False), (0, 0, False), (1, 1, True)],
)
def test_starved_at_85_percent_of_rdy(rdy: int, in_flight: int, starved: bool) -> None:
    assert is_starved(rdy, in_flight) is starved


@pytest.mark.parametrize(
    ("rdy", "depth", "stalled"), [(0, 1, True), (0, 0, False), (1, 100, False)]
)
def test_stalled_when_rdy_zero_and_depth(rdy: int, depth: int, stalled: bool) -> None:
    assert is_stalled(rdy, depth) is stalled


def test_rate_and_delta_handle_first_sample_and_counter_reset() -> None:
    assert rate(120, 100, 2.0) == 10.0
    assert rate(120, None, 2.0) is None
    assert rate(5, 100, 2.0) is None  # nsqd restarted: no negative rate
    assert rate(120, 100, 0.0) is None
    assert delta(7, 4) == 3
    assert delta(1, 4) is None


def test_growing_needs_consecutive_increases() -> None:
    assert is_growing([1, 2, 3, 4])
    assert not is_growing([1, 2, 2, 4])
    assert not is_growing([1, 2, 3])  # too short to tell


def test_history_is_bounded_and_sparkline_scales() -> None:
    h = History(length=3)
    for v in (1, 2, 3, 4):
        series = h.push("k", v)
    assert series == (2, 3, 4)
    assert sparkline([0, 0, 0]) == "▁▁▁"
    assert sparkline([0, 4, 8]) == "▁▅█"
    assert len(sparkline(range(100), width=16)) == 16


# ------------------------------------------------------------------ original (recorded)


def test_parse_original_payload() -> None:
    node = parse_nsqd_stats(load_json(DATA / "original_nsqd_a_t0.json"), A, fetched_at=1.0)
    assert node.version == "1.3.0" and node.state == "up" and not node.is_redesign
    orders = next(t for t in node.topics if t.topic == "orders")
    assert orders.partition is None and orders.is_leader and not orders.depth_is_bytes
    billing = next(c for c in orders.channels if c.name == "billing")
    assert billing.client_count == 1
    client = billing.clients[0]
    assert client.user_agent.startswith("nsqctl/")
    assert client.timeout_count is None  # nsqd 1.3 has no per-client timeout_count
    events = next(t for t in node.topics if t.topic == "events")
    assert events.channels[0].paused


def test_original_partitions_collapse_to_one_per_nsqd() -> None:
    view = build_view(original(0, 100.0))
    orders = view.topic("orders")
    assert orders is not None and not orders.is_redesign
    assert [p.partition for p in orders.partitions] == [None, None]
    assert {p.leader for p in orders.partitions} == {A, B}
    assert set(orders.nodes) == {A, B}


def test_original_rates_between_recorded_polls() -> None:
    s0, s1 = original(0, 100.0), original(1, 102.0)
    view = build_view(s1, s0)
    orders = view.topic("orders")
    assert orders is not None
    raw0 = {n: load_json(DATA / f"original_nsqd_{n}_t0.json") for n in "ab"}
    raw1 = {n: load_json(DATA / f"original_nsqd_{n}_t1.json") for n in "ab"}

    def msgs(raw: dict, topic: str) -> int:
        return next(t["message_count"] for t in raw["topics"] if t["topic_name"] == topic)

    expected = sum(msgs(raw1[n], "orders") - msgs(raw0[n], "orders") for n in "ab") / 2.0
    assert expected > 0
    assert orders.rate == pytest.approx(expected)
    assert build_view(s1).topic("orders").rate is None  # type: ignore[union-attr]
    billing = orders.channel("billing")
    assert billing is not None and billing.msg_rate is not None and billing.msg_rate > 0


def test_original_depth_sums_channels_and_starvation_from_recording() -> None:
    view = build_view(original(1, 102.0), original(0, 100.0))
    orders = view.topic("orders")
    assert orders is not None
    raw = [load_json(DATA / f"original_nsqd_{n}_t1.json") for n in "ab"]
    expected_depth = sum(
        t["depth"] + sum(c["depth"] for c in t["channels"])
        for r in raw
        for t in r["topics"]
        if t["topic_name"] == "orders"
    )
    assert orders.depth == expected_depth
    billing = orders.channel("billing")
    audit = orders.channel("audit")
    assert billing is not None and audit is not None
    # the recorded consumer (max_in_flight 4 over 2 nsqd) held RDY 2 with 2 in flight
    assert [(c.stats.ready_count, c.stats.in_flight_count) for c in billing.clients] == [
        (2, 2),
        (2, 2),
    ]
    assert billing.starved and not billing.stalled and billing.severity == "warn"
    assert audit.no_consumers and audit.client_count == 0


def test_counter_reset_gives_no_rate() -> None:
    # swapping the polls makes every counter go down, as after an nsqd restart
    view = build_view(original(0, 102.0), original(1, 100.0))
    orders = view.topic("orders")
    assert orders is not None and orders.rate is None


def test_dead_node_is_down_and_excluded_from_totals() -> None:
    snap = original(0, 100.0)
    dead = NodeStats(address=B, fetched_at=100.0, state="down", error="timed out")
    snap = ClusterSnapshot(taken_at=100.0, nodes=(snap.nodes[0], dead))
    view = build_view(snap)
    assert view.nodes_down == 1
    node_b = next(n for n in view.nodes if n.address == B)
    assert node_b.severity == "crit" and node_b.stats.error == "timed out"
    orders = view.topic("orders")
    assert orders is not None and [p.leader for p in orders.partitions] == [A]


def test_depth_growing_sets_warning_through_history() -> None:
    history = History()
    prev = None
    view = None
    for i, k in enumerate((0, 1, 0, 1, 0)):
        snap = original(k, 100.0 + 2 * i)
        view = build_view(snap, prev, history)
        prev = snap
    assert view is not None
    events = view.topic("events")
    assert events is not None and len(events.depth_history) == 5
    assert not events.depth_growing  # went up and down
    h2 = History()
    for depth_snap in range(4):
        h2.push(("topic", "events", "depth"), depth_snap)
    grown = build_view(original(1, 200.0), original(0, 198.0), h2).topic("events")
    assert grown is not None and grown.depth_growing and grown.severity != "ok"


def test_nodes_from_lookupd() -> None:
    producers = load_json(DATA / "original_lookupd_nodes.json")["producers"]  # type: ignore[index]
    assert nsqd_http_addresses(producers) == ["127.0.0.1:24603", "127.0.0.1:24605"]
    assert nsqd_http_addresses([{"hostname": "x"}]) == []


def test_error_payload_is_a_protocol_error() -> None:
    with pytest.raises(StatsProtocolError, match="INTERNAL_ERROR"):
        parse_nsqd_stats(
            {"status_code": 500, "status_txt": "INTERNAL_ERROR", "data": None}, A, fetched_at=0
        )


# ------------------------------------------------------------------ redesign (from the doc)


def test_redesign_partitions_leaders_and_no_leader() -> None:
    view = build_view(redesign(0, 100.0))
    assert view.is_redesign
    rtopic = view.topic("rtopic")
    assert rtopic is not None and rtopic.is_redesign
    by_part = {p.partition: p for p in rtopic.partitions}
    assert sorted(by_part) == [0, 1, 2]
    assert by_part[0].leader == A and by_part[0].replicas == (B,)
    assert by_part[1].leader == B and by_part[1].replicas == (A,)
    assert by_part[2].no_leader and not by_part[2].write_enabled
    assert rtopic.leaderless == 1 and rtopic.severity == "crit"
    # topic depth is bytes on the redesign: kept apart, depth counts channel messages
    assert by_part[0].topic_bytes == 40960
    assert by_part[0].depth == 100  # ch1 100 + ch2 0 on the leader
    assert rtopic.depth == 100 + 50 + 75


def test_redesign_coordinator_isr_and_catchup() -> None:
    view = build_view(redesign(0, 100.0))
    rtopic = view.topic("rtopic")
    assert rtopic is not None
    by_part = {p.partition: p for p in rtopic.partitions}
    assert by_part[0].isr == ("nsqd-a", "nsqd-b")
    assert by_part[2].catchup[0].node_id == "nsqd-c" and by_part[2].catchup[0].progress == 42
    assert by_part[1].isr == ()  # no report for it


def test_redesign_cluster_stats_wrapped_payload() -> None:
    view = build_view(redesign(0, 100.0))
    assert view.cluster is not None and view.cluster.stable is False
    assert {n.address for n in view.cluster.nodes} == {"127.0.0.1:24703", "127.0.0.1:24705"}
    assert view.cluster.nodes[0].node_load_factor > 0


def test_redesign_clients_starved_stalled_and_rates_count_leaders_only() -> None:
    view = build_view(redesign(1, 102.0), redesign(0, 100.0))
    rtopic = view.topic("rtopic")
    assert rtopic is not None
    # leaders grew 40 (p0) + 20 (p1) messages in 2 s; replicas must not double it
    assert rtopic.rate == pytest.approx(30.0)
    ch1 = rtopic.channel("ch1")
    assert ch1 is not None
    states = {c.stats.client_id: (c.partition, c.starved, c.stalled) for c in ch1.clients}
    assert states == {"c-p0": (0, True, False), "c-p1": (1, False, True)}
    assert not ch1.stalled  # one partition still has RDY
    assert ch1.severity == "warn"
    ch2 = rtopic.channel("ch2")
    assert ch2 is not None and ch2.timeout_delta == 3 and ch2.severity == "warn"
    otopic = view.topic("otopic")
    assert otopic is not None and otopic.ordered and otopic.ext
    ordered = otopic.channel("ordered")
    assert ordered is not None and ordered.clients[0].stats.tls


def test_redesign_channel_parts_have_partition_rates() -> None:
    view = build_view(redesign(1, 102.0), redesign(0, 100.0))
    ch1 = view.topic("rtopic").channel("ch1")  # type: ignore[union-attr]
    assert ch1 is not None
    parts = {p.partition: p.msg_rate for p in ch1.parts}
    assert parts == {0: pytest.approx(20.0), 1: pytest.approx(10.0), 2: pytest.approx(0.0)}


# ------------------------------------------------------------------ laziness and GC


def test_clients_are_parsed_only_when_a_channel_view_reads_them() -> None:
    body = (DATA / "original_nsqd_a_t1.json").read_bytes()
    raw = load_json(DATA / "original_nsqd_a_t1.json")
    node = parse_nsqd_body(body, A, fetched_at=1.0)
    orders = next(t for t in node.topics if t.topic == "orders")
    billing = next(c for c in orders.channels if c.name == "billing")
    assert isinstance(billing.clients, LazyClients)
    view = build_view(ClusterSnapshot(taken_at=1.0, nodes=(node,)))
    assert billing.clients._parsed is None  # the view's rules used RDY/in-flight only
    assert view.topic("orders").channel("billing").ready == 2  # type: ignore[union-attr]
    raw_billing = next(
        c
        for t in raw["topics"]  # type: ignore[index]
        if t["topic_name"] == "orders"
        for c in t["channels"]
        if c["channel_name"] == "billing"
    )
    expected = tuple(parse_client(c) for c in raw_billing["clients"])
    assert view.topic("orders").channel("billing").clients[0].stats == expected[0]  # type: ignore[union-attr]
    assert billing.clients == expected and len(billing.clients) == len(expected)


def test_gc_pause_nests_and_restores_the_previous_state() -> None:
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # was off before: left off
    finally:
        gc.enable()


def test_freezing_after_bursts_freezes_survivors_and_unfreezes_every_nth() -> None:
    gc.unfreeze()
    freeze_after_bursts(3)
    try:
        kept = []
        counts = []
        for _ in range(4):
            with gc_paused():
                kept.append([[] for _ in range(1000)])  # lists: tracked by the collector
            counts.append(gc.get_freeze_count())
        assert counts[0] > 1000 and counts[1] >= counts[0] + 1000  # each burst's survivors
        assert counts[2] == 0  # the 3rd burst unfroze everything
        assert counts[3] > 1000
    finally:
        freeze_after_bursts(0)
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    with gc_paused():
        kept.append([object()])
    assert gc.get_freeze_count() == 0  # off again: nothing frozen
