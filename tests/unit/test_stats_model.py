"""The stats model on payloads recorded from real servers of both families: parsing, rates
between polls, starved/stalled rules, leaders, replicas and ISR, history and severity.

The redesign recording (``tests/data/stats/README.md``) is replayed through the real
poller, so these also cover which requests it makes (focus) and how it resolves node ids."""

from __future__ import annotations

import asyncio
import gc
import json
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from nsqctl.stats.gcpause import freeze_after_bursts, gc_paused
from nsqctl.stats.history import History
from nsqctl.stats.model import ClusterSnapshot, CoordInfo, NodeStats
from nsqctl.stats.parse import (
    LazyClients,
    StatsProtocolError,
    node_id_key,
    nsqd_http_addresses,
    parse_channel,
    parse_client,
    parse_nsqd_body,
    parse_nsqd_stats,
    resolve_node_ids,
)
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.recording import RecordedPoller, Recording, play_back
from nsqctl.stats.rules import delta, is_growing, is_stalled, is_starved, rate
from nsqctl.stats.series import sparkline
from nsqctl.stats.view import ClusterView, build_view
from tests.helpers.nsqd_answers import narrowed, recorded_body, without_clients
from tests.helpers.stats import RECORDED_A, RECORDED_B, STATS_DATA
from tests.helpers.stats import recorded_original as original

DATA = STATS_DATA
A, B = RECORDED_A, RECORDED_B


MANIFEST = recorded_body(DATA / "redesign_manifest.json")
POLLS = {p["name"]: i for i, p in enumerate(MANIFEST["polls"])}
RECORDED = asyncio.run(play_back(DATA / "redesign_manifest.json", ["t0", "t1"], focus=None))
"""The recorded t0 and t1 polls (2 s apart), every topic in focus, as the poller makes them."""


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


def test_sparkline_scales() -> None:
    assert sparkline([0, 0, 0]) == "▁▁▁"
    assert sparkline([0, 4, 8]) == "▁▅█"
    assert len(sparkline(range(100), width=16)) == 16


# ------------------------------------------------------------------ original (recorded)


CHANNEL_COUNTERS = (
    "depth",
    "backend_depth",
    "in_flight_count",
    "deferred_count",
    "message_count",
    "requeue_count",
    "timeout_count",
)
"""Channel counters named alike in nsqd's JSON and in ChannelStats."""


def test_a_channel_record_field_by_field() -> None:
    """Every field from its own key (distinct values, so no two can be swapped unseen)."""
    record = {
        "channel_name": "c",
        **{k: i for i, k in enumerate(CHANNEL_COUNTERS, start=1)},
        "client_num": 8,
        "depth_size": 9,
        "paused": True,
        "skipped": False,
        "clients": None,
    }
    ch = parse_channel(record)
    assert [getattr(ch, k) for k in CHANNEL_COUNTERS] == [1, 2, 3, 4, 5, 6, 7]
    assert (ch.name, ch.client_count, ch.depth_bytes, ch.paused, ch.skipped) == (
        "c",
        8,
        9,
        True,
        False,
    )
    assert not ch.clients_listed and ch.clients == ()
    listed = parse_channel({**record, "clients": [], "client_num": None, "client_count": "2"})
    assert listed.clients_listed and listed.client_count == 2 and len(listed.clients) == 0


def test_parse_original_payload() -> None:
    node = parse_nsqd_stats(recorded_body(DATA / "original_nsqd_a_t0.json"), A, fetched_at=1.0)
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
    raw0 = {n: recorded_body(DATA / f"original_nsqd_{n}_t0.json") for n in "ab"}
    raw1 = {n: recorded_body(DATA / f"original_nsqd_{n}_t1.json") for n in "ab"}

    def msgs(raw: dict[str, Any], topic: str) -> int:
        return int(next(t["message_count"] for t in raw["topics"] if t["topic_name"] == topic))

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
    raw = [recorded_body(DATA / f"original_nsqd_{n}_t1.json") for n in "ab"]
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


def test_channel_rates_interval_and_previous_depth_sum_the_partitions() -> None:
    """The totals hot spots rank by are folded with the channel, without reading its
    per-partition views: they must equal what those views add up to."""
    view = build_view(original(1, 102.0), original(0, 100.0))
    billing = view.topic("orders").channel("billing")  # type: ignore[union-attr]
    assert billing is not None and len(billing.parts) == 2
    parts = billing.parts
    assert all(p.previous is not None for p in parts)
    assert billing.interval == pytest.approx(sum(p.dt for p in parts) / len(parts))
    assert billing.previous_depth == sum(p.previous.depth for p in parts if p.previous is not None)
    for total, counter in (
        (billing.requeue_rate, "requeue_count"),
        (billing.timeout_rate, "timeout_count"),
    ):
        rates = [rate(getattr(p.stats, counter), getattr(p.previous, counter), p.dt) for p in parts]
        assert total == pytest.approx(sum(r for r in rates if r is not None))
    first = build_view(original(1, 102.0)).topic("orders").channel("billing")  # type: ignore[union-attr]
    assert first is not None and first.requeue_rate is None and first.previous_depth is None
    assert first.interval == 0.0


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
        h2.begin(190.0 + depth_snap)
        h2.record(("topic", "events", "depth"), depth_snap, "msgs")
        h2.end()
    grown = build_view(original(1, 200.0), original(0, 198.0), h2).topic("events")
    assert grown is not None and grown.depth_growing and grown.severity != "ok"


def test_nodes_from_lookupd() -> None:
    producers = recorded_body(DATA / "original_lookupd_nodes.json")["producers"]
    assert nsqd_http_addresses(producers) == ["127.0.0.1:24603", "127.0.0.1:24605"]
    assert nsqd_http_addresses([{"hostname": "x"}]) == []


def test_error_payload_is_a_protocol_error() -> None:
    with pytest.raises(StatsProtocolError, match="INTERNAL_ERROR"):
        parse_nsqd_stats(
            {"status_code": 500, "status_txt": "INTERNAL_ERROR", "data": None}, A, fetched_at=0
        )


def test_numbers_spelled_as_digits_are_read_and_a_misfit_field_is_named() -> None:
    body = {
        "version": "0.3.7-HA.1.12.7",
        "topics": [
            {
                "topic_name": "t",
                "topic_partition": "3",
                "depth": "40",
                "channels": [{"channel_name": "c", "depth": "7", "client_num": "2"}],
            }
        ],
    }
    node = parse_nsqd_body(json.dumps(body).encode(), A, fetched_at=0)
    topic = node.topic("t")
    assert topic is not None and (topic.partition, topic.depth) == (3, 40)
    assert node.channel("t", "c") is not None
    assert (node.channel("t", "c").depth, node.channel("t", "c").client_count) == (7, 2)  # type: ignore[union-attr]
    body["topics"][0]["channels"][0]["depth"] = [7]  # type: ignore[index]
    with pytest.raises(ValueError, match=r"topics\[0\]\.channels\[0\]\.depth"):
        parse_nsqd_body(json.dumps(body).encode(), A, fetched_at=0)
    with pytest.raises(StatsProtocolError, match="non-object"):
        parse_nsqd_body(b"[1, 2]", A, fetched_at=0)


def test_clients_of_an_enveloped_body_are_read_from_inside_the_envelope() -> None:
    """The pre-v1 envelope wraps the body in ``data``: RDY totals come from the first
    decode, each connection later from a second one that must unwrap it the same way."""
    raw = recorded_body(DATA / "original_nsqd_a_t1.json")
    plain = parse_nsqd_body(json.dumps(raw).encode(), A, fetched_at=1.0)
    wrapped = {"status_code": 200, "status_txt": "OK", "data": raw}
    node = parse_nsqd_body(json.dumps(wrapped).encode(), A, fetched_at=1.0)
    billing = node.channel("orders", "billing")
    assert billing is not None and len(billing.clients) > 0
    assert billing.clients == plain.channel("orders", "billing").clients  # type: ignore[union-attr]
    assert billing.clients[0].user_agent.startswith("nsqctl/")


def test_the_stats_envelope_is_read_as_every_answer_is() -> None:
    """``/stats`` leaves the pre-v1 envelope the way every answer does
    (:func:`nsqctl.answers.unwrapped`): an envelope in ``data`` is unwrapped in turn (the
    clients too), an error status inside one is an error, and a ``data`` of the wrong
    shape is a :class:`StatsProtocolError` naming the nsqd and the field, as every bad
    ``/stats`` answer is, rather than a bare ``ValueError``."""
    raw = recorded_body(DATA / "original_nsqd_a_t1.json")
    plain = parse_nsqd_body(json.dumps(raw).encode(), A, fetched_at=1.0)
    twice = {"status_code": 200, "status_txt": "OK", "data": {"status_code": 200, "data": raw}}
    node = parse_nsqd_body(json.dumps(twice).encode(), A, fetched_at=1.0)
    assert node.topics == plain.topics
    billing = node.channel("orders", "billing")
    assert billing is not None and len(billing.clients) > 0
    assert billing.clients == plain.channel("orders", "billing").clients  # type: ignore[union-attr]
    failed = {"status_code": 200, "data": {"status_code": 500, "status_txt": "GONE", "data": raw}}
    with pytest.raises(StatsProtocolError, match="answered an error: GONE"):
        parse_nsqd_body(json.dumps(failed).encode(), A, fetched_at=1.0)
    misfit = {"status_code": 200, "status_txt": "OK", "data": {"topics": 5}}
    with pytest.raises(StatsProtocolError, match=rf"nsqd {A} answered /stats .*`\$\.topics`"):
        parse_nsqd_body(json.dumps(misfit).encode(), A, fetched_at=1.0)


# ------------------------------------------------------------------ redesign (recorded)
#
# Expectations are read from the raw recorded JSON here, independently of the parser, and
# then compared with what the poller + model made of the same payloads.


def raw_stats(poll: str) -> dict[str, dict[str, Any]]:
    """nsqd HTTP address → its recorded ``/stats`` body for one poll."""
    out = {}
    for ex in MANIFEST["polls"][POLLS[poll]]["exchanges"]:
        if urlsplit(ex["url"]).path == "/stats":
            out[urlsplit(ex["url"]).netloc] = recorded_body(DATA / ex["file"])
    return out


def raw_partitions(poll: str, topic: str) -> dict[int, dict[str, dict[str, Any]]]:
    """partition → nsqd → that nsqd's recorded copy of it."""
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for address, body in raw_stats(poll).items():
        for t in body["topics"]:
            if t["topic_name"] == topic:
                out.setdefault(int(t["topic_partition"]), {})[address] = t
    return out


def raw_leader(copies: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    [(address, leader)] = [(a, t) for a, t in copies.items() if t["is_leader"]]
    return address, leader


def test_recorded_redesign_units_channel_depth_counts_topic_depth_is_bytes() -> None:
    """The paused, never-consumed channel holds every message the partition got: its depth
    equals the message count and its depth_size the partition's byte depth."""
    for copies in raw_partitions("t1", "orders").values():
        _, leader = raw_leader(copies)
        audit = next(c for c in leader["channels"] if c["channel_name"] == "audit")
        assert audit["paused"] and audit["depth"] == leader["message_count"] > 0
        assert audit["depth_size"] == leader["depth"] > audit["depth"]
    node = parse_nsqd_stats(recorded_body(DATA / "redesign_t1_nsqd_a_stats.json"), A, fetched_at=0)
    assert node.is_redesign and node.version == "0.3.7-HA.1.12.7"
    part = next(t for t in node.topics if t.topic == "orders" and t.is_leader)
    audit_stats = next(c for c in part.channels if c.name == "audit")
    assert part.depth_is_bytes and audit_stats.depth_bytes == part.depth
    assert audit_stats.depth == part.message_count


def test_recorded_redesign_leaders_replicas_and_stored_bytes() -> None:
    view = build_view(RECORDED[1], RECORDED[0])
    assert view.is_redesign
    for name in ("orders", "events"):
        topic = view.topic(name)
        assert topic is not None and topic.is_redesign
        raw = raw_partitions("t1", name)
        assert [p.partition for p in topic.partitions] == sorted(raw) == [0, 1]
        for p in topic.partitions:
            assert p.partition is not None
            leader_at, leader = raw_leader(raw[p.partition])
            assert p.leader == leader_at and p.write_enabled
            assert p.replicas == tuple(a for a in sorted(raw[p.partition]) if a != leader_at)
            assert len(p.replicas) == 1  # replicas 2: one copy besides the leader
            assert p.stored_bytes == leader["depth"] - leader["backend_start"] > 0
            assert p.depth == sum(c["depth"] for c in leader["channels"])
    assert view.topic("events").ordered  # type: ignore[union-attr]


def test_recorded_redesign_isr_as_nsqd_addresses() -> None:
    """ISR node ids (ip:rpc:tcp:n) become the HTTP addresses lookupd /nodes lists for them."""
    nodes = recorded_body(DATA / "redesign_t1_lookupd_nodes.json")["producers"]
    by_tcp = {
        f"{n['broadcast_address']}:{n['tcp_port']}": f"127.0.0.1:{n['http_port']}" for n in nodes
    }
    view = build_view(RECORDED[1], RECORDED[0])
    seen = set()
    for ex in MANIFEST["polls"][POLLS["t1"]]["exchanges"]:
        if urlsplit(ex["url"]).path != "/coordinator/stats":
            continue
        for item in recorded_body(DATA / ex["file"])["topic_coord_stats"]:
            ids = [i["node_id"] for i in item["isr_stats"]]
            expected = tuple(by_tcp[f"{i.split(':')[0]}:{i.split(':')[2]}"] for i in ids)
            part = view.topic(item["name"]).partitions[item["partition"]]  # type: ignore[union-attr]
            assert part.isr == expected and len(expected) == 2
            assert set(part.isr) == {part.leader, *part.replicas} and not part.out_of_sync
            assert item["catchup_stats"] is None and part.catchup == ()
            seen.add((item["name"], item["partition"]))
    assert len(seen) == 4  # two partitions of two topics (leaders list their replicas' too)


def test_recorded_redesign_rates_count_leaders_only() -> None:
    view = build_view(RECORDED[1], RECORDED[0])
    dt = RECORDED[1].taken_at - RECORDED[0].taken_at
    for name in ("orders", "events"):
        grown = sum(
            raw_leader(raw_partitions("t1", name)[p])[1]["message_count"]
            - raw_leader(raw_partitions("t0", name)[p])[1]["message_count"]
            for p in (0, 1)
        )
        assert grown > 0
        assert view.topic(name).rate == pytest.approx(grown / dt)  # type: ignore[union-attr]


def test_recorded_redesign_channels_starved_stalled_paused_and_timeouts() -> None:
    view = build_view(RECORDED[1], RECORDED[0])
    orders = view.topic("orders")
    assert orders is not None
    billing, slow, audit = (orders.channel(n) for n in ("billing", "slow", "audit"))
    assert billing is not None and slow is not None and audit is not None
    # billing: max_in_flight 4 over two partitions, a handler slower than the publisher
    assert [
        (c.partition, c.stats.ready_count, c.stats.in_flight_count) for c in billing.clients
    ] == [(0, 2, 2), (1, 2, 2)]
    assert billing.starved and billing.ready == billing.in_flight == 4
    assert all(c.stats.user_agent.startswith("nsqctl/") for c in billing.clients)
    assert all(c.finish_rate and c.finish_rate > 0 for c in billing.clients)
    # slow: max_in_flight 1 → RDY 1 on one partition (starved), 0 on the other (stalled)
    states = sorted((c.partition, c.stats.ready_count, c.starved, c.stalled) for c in slow.clients)
    assert [(r, st, sl) for _, r, st, sl in states] in (
        [(1, True, False), (0, False, True)],
        [(0, False, True), (1, True, False)],
    )
    assert not slow.stalled  # one partition still delivers
    assert slow.timeout_delta is not None and slow.timeout_delta > 0 and slow.severity == "warn"
    assert all(c.stats.snappy for c in slow.clients)
    # audit: paused, nobody reading
    assert audit.paused and audit.no_consumers and audit.client_count == 0
    leaders = [raw_leader(c)[1] for c in raw_partitions("t1", "orders").values()]
    raw_audit = [c for t in leaders for c in t["channels"] if c["channel_name"] == "audit"]
    assert audit.depth == sum(c["depth"] for c in raw_audit)
    assert audit.depth_bytes == sum(c["depth_size"] for c in raw_audit)
    tail = view.topic("events").channel("tail")  # type: ignore[union-attr]
    assert tail is not None and {c.stats.user_agent.split()[0] for c in tail.clients} == {
        "nsq_tail/0.3.7-HA.1.12.7"
    }


def test_recorded_redesign_cluster_stats() -> None:
    raw = recorded_body(DATA / "redesign_t1_lookupd_cluster_stats.json")
    view = build_view(RECORDED[1])
    assert view.cluster is not None and view.cluster.stable is raw["stable"]
    assert {n.address for n in view.cluster.nodes} == {n.address for n in view.nodes}
    assert all(n.leader_load_factor > 0 for n in view.cluster.nodes)
    leaders = [lk for lk in view.lookupds if lk.is_leader]
    assert len(leaders) == 1 and leaders[0].ok


async def test_isr_is_asked_only_for_topics_in_focus() -> None:
    source = RecordedPoller(Recording(DATA / "redesign_manifest.json"), ["t0", "t1"])
    try:  # the dashboard starts with nothing in focus
        first = await source.snapshot()
        source.set_focus(["orders"])
        second = await source.snapshot()
    finally:
        await source.aclose()
    assert source.transport.missed == []
    assert first.coordinator == ()
    assert all(p.isr is None for t in build_view(first).topics for p in t.partitions)
    assert {c.topic for c in second.coordinator} == {"orders"}
    view = build_view(second, first)
    assert all(p.isr and len(p.isr) == 2 for p in view.topic("orders").partitions)  # type: ignore[union-attr]
    assert all(p.isr is None for p in view.topic("events").partitions)  # type: ignore[union-attr]


async def test_stat_variant_narrowed_to_a_topic_and_channel() -> None:
    """What `nsqctl stat orders billing` asks: /stats?topic&channel, ISR for orders."""
    [snap] = await play_back(DATA / "redesign_manifest.json", ["t1_orders_billing"])
    view = build_view(snap)
    assert [t.name for t in view.topics] == ["orders"]
    orders = view.topic("orders")
    assert orders is not None and [c.name for c in orders.channels] == ["billing"]
    assert all(p.isr and p.leader in p.isr for p in orders.partitions)


async def test_replay_answers_only_what_was_recorded() -> None:
    source = RecordedPoller(Recording(DATA / "redesign_manifest.json"), ["t0"])
    source.poller._known["127.0.0.1:1"] = None  # an nsqd the recording never saw
    try:
        snap = await source.snapshot()
    finally:
        await source.aclose()
    assert next(n for n in snap.nodes if n.address == "127.0.0.1:1").state == "down"
    assert source.transport.missed == ["GET http://127.0.0.1:1/stats?format=json&needClients=true"]


async def test_a_stats_body_that_does_not_fit_marks_its_node_down_naming_the_field() -> None:
    """A scripted answer: no real nsqd sends a list where a count belongs."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"version": "1.3.0", "topics": [{"depth": [1]}]})

    poller = StatsPoller(nsqd_http=["127.0.0.1:4151"], transport=httpx.MockTransport(answer))
    try:
        snap = await poller.snapshot()
    finally:
        await poller.aclose()
    (node,) = snap.nodes
    assert node.state == "down"
    assert node.error.startswith("/stats is unreadable: ") and "$.topics[0].depth" in node.error


def test_dead_leader_leaves_the_partition_without_leader() -> None:
    snap = RECORDED[1]
    orders = build_view(snap).topic("orders")
    assert orders is not None
    leader = orders.partitions[0].leader
    assert leader is not None
    dead = NodeStats(address=leader, fetched_at=snap.taken_at, state="down", error="timed out")
    nodes = tuple(dead if n.address == leader else n for n in snap.nodes)
    coordinator = tuple(c for c in snap.coordinator if c.reported_by != leader)
    view = build_view(replace(snap, nodes=nodes, coordinator=coordinator))
    orders = view.topic("orders")
    assert orders is not None
    p0 = orders.partitions[0]
    assert p0.no_leader and not p0.write_enabled and leader not in p0.replicas
    assert len(p0.replicas) == 1 and p0.isr is None  # only the dead leader was asked for it
    assert orders.leaderless == 1 and orders.severity == "crit"


def test_isr_missing_a_replica_is_out_of_sync() -> None:
    snap = RECORDED[1]
    shrunk = tuple(replace(c, isr=c.isr[:1]) for c in snap.coordinator)
    orders = build_view(replace(snap, coordinator=shrunk)).topic("orders")
    assert orders is not None
    assert all(p.out_of_sync == p.replicas for p in orders.partitions)
    assert orders.out_of_sync == 2 and orders.severity == "warn"


def test_node_ids_resolve_to_addresses_or_stay_as_they_are() -> None:
    assert node_id_key("127.0.0.1:24711:24709:2") == "127.0.0.1:24709"
    assert node_id_key("nsqd-a") is None
    info = CoordInfo("t", 0, A, isr=("10.0.0.1:1:4150:1", "odd"), catchup=("10.0.0.2:1:4150:2",))
    [resolved] = resolve_node_ids([info], {"10.0.0.1:4150": "10.0.0.1:4151"})
    assert resolved.isr == ("10.0.0.1:4151", "odd")
    assert resolved.catchup == ("10.0.0.2:1:4150:2",)


# ------------------------------------------------------------------ polled without clients
#
# The dashboard asks each nsqd without clients and the topic it shows with them. The
# payloads here are the recorded ones as nsqd answers that (its nsqd/stats.go of both
# families): ``"clients": null`` with the count kept, and the topic alone with its clients.
# tests/integration/test_dash.py checks that real servers answer so.


def polled(
    bodies: dict[str, dict[str, Any]],
    taken_at: float,
    *,
    lean: bool = False,
    shown: str | None = None,
    channel: str | None = None,
) -> ClusterSnapshot:
    """The snapshot of ``bodies`` (nsqd address → /stats) as the poller makes it: every
    client listed, or (``lean``) none but those of topic ``shown`` (of its ``channel``)."""

    def node(address: str, body: dict[str, Any]) -> NodeStats:
        main = without_clients(body) if lean else body
        details = []
        if lean and shown:
            details = [json.dumps(narrowed(body, shown, channel)).encode()]
        return parse_nsqd_body(
            json.dumps(main).encode(), address, fetched_at=taken_at, details=details
        )

    return ClusterSnapshot(taken_at, tuple(node(a, b) for a, b in bodies.items()))


def recorded_bodies(family: str, k: int) -> dict[str, dict[str, Any]]:
    if family == "redesign":
        return raw_stats(f"t{k}")
    return {
        a: recorded_body(DATA / f"original_nsqd_{n}_t{k}.json") for a, n in ((A, "a"), (B, "b"))
    }


def counters(view: ClusterView) -> dict[tuple[str, str], tuple[object, ...]]:
    """What a channel shows that needs no client record."""
    return {
        (t.name, c.name): (c.depth, c.in_flight, c.client_count, c.msg_rate, c.no_consumers)
        for t in view.topics
        for c in t.channels
    }


def rdy_rules(view: ClusterView, topic: str) -> list[tuple[object, ...]]:
    return [
        (c.name, c.ready, c.starved, c.stalled, c.severity, [v.stats for v in c.clients])
        for c in view.topic(topic).channels  # type: ignore[union-attr]
    ]


@pytest.mark.parametrize("family", ["original", "redesign"])
def test_polled_without_clients_counts_them_and_leaves_rdy_unknown(family: str) -> None:
    t0, t1 = recorded_bodies(family, 0), recorded_bodies(family, 1)
    full = build_view(polled(t1, 102.0), polled(t0, 100.0))
    lean = build_view(polled(t1, 102.0, lean=True), polled(t0, 100.0, lean=True))
    assert counters(lean) == counters(full)  # client counts from client_count / client_num
    billing = full.topic("orders").channel("billing")  # type: ignore[union-attr]
    assert billing is not None and billing.starved and billing.client_count > 0
    for topic in lean.topics:
        assert not topic.clients_listed
        for c in topic.channels:
            assert not c.clients_listed and c.ready is None and c.clients == ()
            assert not c.starved and not c.stalled  # unknown, so not flagged
    lean_billing = lean.topic("orders").channel("billing")  # type: ignore[union-attr]
    assert lean_billing is not None and lean_billing.severity == "ok"

    shown = build_view(
        polled(t1, 102.0, lean=True, shown="orders"), polled(t0, 100.0, lean=True, shown="orders")
    )
    assert counters(shown) == counters(full)
    assert rdy_rules(shown, "orders") == rdy_rules(full, "orders")
    assert shown.topic("orders").clients_listed  # type: ignore[union-attr]
    assert not shown.topic("events").clients_listed  # type: ignore[union-attr]

    one = build_view(  # the channel screen: that channel's clients only
        polled(t1, 102.0, lean=True, shown="orders", channel="billing"),
        polled(t0, 100.0, lean=True, shown="orders", channel="billing"),
    )
    assert counters(one) == counters(full)
    [billing_rules] = [r for r in rdy_rules(full, "orders") if r[0] == "billing"]
    assert [r for r in rdy_rules(one, "orders") if r[1] is not None] == [billing_rules]


def test_a_topics_detail_replaces_its_copies_in_place() -> None:
    body = recorded_body(DATA / "original_nsqd_a_t1.json")
    names = [t["topic_name"] for t in body["topics"]]
    fresh = {**body, "topics": [{**narrowed(body, "orders")["topics"][0], "topic_name": "new"}]}
    error = {"status_code": 500, "status_txt": "INTERNAL_ERROR", "data": None}
    details = [json.dumps(d).encode() for d in (narrowed(body, "orders"), fresh, error)]
    node = parse_nsqd_body(
        json.dumps(without_clients(body)).encode(), A, fetched_at=1.0, details=[*details, b"{"]
    )
    assert [t.topic for t in node.topics] == [*names, "new"]  # order kept; a new one last
    listed = {t.topic: all(c.clients_listed for c in t.channels) for t in node.topics}
    assert listed == {"events": False, "orders": True, "new": True}  # bad details left out
    full = parse_nsqd_body(json.dumps(body).encode(), A, fetched_at=1.0)
    assert node.channel("orders", "billing") == full.channel("orders", "billing")
    # a channel's detail and its topic's for the same copy add up
    both = [json.dumps(narrowed(body, "orders", c)).encode() for c in ("billing", None)]
    node = parse_nsqd_body(
        json.dumps(without_clients(body)).encode(), A, fetched_at=1.0, details=both
    )
    assert node.topic("orders") == full.topic("orders")


# ------------------------------------------------------------------ laziness and GC


def test_clients_are_parsed_only_when_a_channel_view_reads_them() -> None:
    body = (DATA / "original_nsqd_a_t1.json").read_bytes()
    raw = recorded_body(DATA / "original_nsqd_a_t1.json")
    node = parse_nsqd_body(body, A, fetched_at=1.0)
    orders = next(t for t in node.topics if t.topic == "orders")
    billing = next(c for c in orders.channels if c.name == "billing")
    assert isinstance(billing.clients, LazyClients)
    view = build_view(ClusterSnapshot(taken_at=1.0, nodes=(node,)))
    assert billing.clients._parsed is None  # the view's rules used RDY/in-flight only
    assert view.topic("orders").channel("billing").ready == 2  # type: ignore[union-attr]
    raw_billing = next(
        c
        for t in raw["topics"]
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
        kept: list[object] = []
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
