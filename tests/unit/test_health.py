"""Health rules: their syntax, precedence, and what they find on recorded polls."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client.samples import Sample

from nsqctl.errors import ConfigError
from nsqctl.health import Latest, Rule, RuleSet, Threshold, evaluate, judge, parse_rule
from nsqctl.health.evaluate import isr_focus
from nsqctl.health.findings import overall
from nsqctl.stats.history import History
from nsqctl.stats.model import ClientStats, ClusterSnapshot, LookupdStatus, NodeStats
from nsqctl.stats.view import ClusterView, build_view
from tests.helpers.stats import RECORDED_A, RECORDED_B, channel_stats, topic_stats
from tests.helpers.stats import recorded_original as original

A, B = RECORDED_A, RECORDED_B


def polls(*ks: int) -> list[ClusterView]:
    """Views of the recorded original polls ``ks`` taken 2 s apart, as a session makes them."""
    history = History()
    views, prev = [], None
    for i, k in enumerate(ks):
        snap = original(k, 100.0 + 2 * i)
        views.append(build_view(snap, prev, history))
        prev = snap
    return views


def lines(views: list[ClusterView], *rules: str) -> list[str]:
    found = evaluate(views, RuleSet.parse(rules, defaults=False))
    return [f.line() for f in found if f.status != "ok"]


def test_rule_syntax_thresholds_and_globs() -> None:
    rule = parse_rule("max-depth:orders*/bill*=50,100")
    assert (rule.kind, rule.topic, rule.channel) == ("max-depth", "orders*", "bill*")
    assert rule.threshold == Threshold(50, 100) and str(rule) == "max-depth:orders*/bill*=50,100"
    assert [rule.threshold.severity(v) for v in (50, 51, 101)] == ["ok", "warn", "crit"]
    assert rule.matches("orders", "billing") and not rule.matches("orders", "audit")
    assert not rule.matches(None, None)  # a scoped rule never covers a node
    assert parse_rule("orphan").level == "crit" and parse_rule("isr=off").enabled is False
    bad_rules = (
        "max-depth",
        "max-depth=x",
        "max-depth=100,50",
        "depth=1",
        "orphan=loud",
        "node-down:orders=off",
        "isr:orders/c=warn",
    )
    for bad in bad_rules:
        with pytest.raises(ConfigError):
            parse_rule(bad)


def rule(rules: RuleSet, kind: str, topic: str | None, channel: str | None) -> Rule:
    """The rule that decides for this subject (the test expects one)."""
    found = rules.rule_for(kind, topic, channel)
    assert found is not None
    return found


def test_the_last_matching_rule_of_a_kind_decides() -> None:
    rules = RuleSet.parse(["max-depth=100", "max-depth:orders/*=1000", "orphan:orders=off"])
    assert rule(rules, "max-depth", "events", "archive").threshold == Threshold(None, 100)
    assert rule(rules, "max-depth", "orders", "audit").threshold == Threshold(None, 1000)
    assert rules.rule_for("orphan", "orders", "audit") is None
    assert rule(rules, "orphan", "events", "archive").level == "warn"  # the default
    assert rule(rules, "node-down", None, None).level == "crit"
    assert isr_focus(rules) is None  # the default isr rule covers every topic
    narrowed = RuleSet.parse(["isr=off", "isr:orders=warn", "isr:billing=crit"])
    assert isr_focus(narrowed) == frozenset({"orders", "billing"})
    assert isr_focus(RuleSet.parse(["isr=off"])) == frozenset()


def test_findings_on_recorded_polls() -> None:
    views = polls(0, 1)
    assert lines(views, "max-depth:orders/*=400") == [
        "CRITICAL: max-depth orders/audit: depth 459 > 400"
    ]
    # depth rose between the polls: never drains; the channel without client is an orphan
    assert lines(views, "max-time-to-drain:events=60", "orphan=warn") == [
        "CRITICAL: max-time-to-drain events/archive: depth 154 did not fall over the last "
        "2.0s (2 polls): it does not drain at this pace",
        "WARNING: orphan events/archive: depth grew 125 -> 154 with no client connected",
        "WARNING: orphan orders/audit: depth grew 374 -> 459 with no client connected",
    ]
    assert lines(views, "max-requeue-rate=0.1,1", "max-timeout-rate=0") == []
    # falling depth (poll 1 then 0): 154 -> 125 in 2 s, so the 125 left drain in 8.6 s
    assert lines(polls(1, 0), "max-time-to-drain:events=5,60") == [
        "WARNING: max-time-to-drain events/archive: drains in 8.6s > 5s, "
        "at its pace over the last 2.0s (2 polls)"
    ]


def test_rules_about_change_are_unknown_after_one_poll() -> None:
    [view] = polls(0)
    found = lines([view], "orphan", "max-requeue-rate=1", "max-depth=10000")
    assert (
        found[0] == "UNKNOWN: max-requeue-rate events/archive: needs 2 polls of the channel, got 1"
    )
    result = judge([view], RuleSet.parse(["max-depth=10000"]))
    assert (result.status, result.exit_code) == ("unknown", 3)  # the default orphan rule
    assert judge([view], RuleSet.parse(["max-depth=100"])).exit_code == 2  # crit beats unknown
    assert overall(["ok", "unknown", "warn"]) == "warn" and overall([]) == "ok"


def test_poison_compares_the_windows_requeues_with_what_the_channel_holds() -> None:
    """Three messages held (waiting, in flight, deferred): 5 requeues over the window is a
    consumer retrying, 7 (more than twice each) is poison; a deep channel never is."""

    def window(requeued: list[int], depth: int = 1) -> list[ClusterView]:
        history, views, prev = History(), [], None
        for i, count in enumerate(requeued):
            ch = channel_stats("retry", depth, in_flight=1, deferred=1, requeued=count)
            at = 100.0 + i
            node = NodeStats(RECORDED_A, at, "up", topics=(topic_stats(RECORDED_A, "t", ch),))
            snap = ClusterSnapshot(at, (node,))
            views.append(build_view(snap, prev, history))
            prev = snap
        return views

    assert lines(window([10, 12, 15]), "poison=warn") == []
    assert lines(window([10, 13, 17]), "poison:t/retry=crit") == [
        "CRITICAL: poison t/retry: 7 requeues of the 3 message(s) it holds in 2.0s: "
        "the same messages fail over and over"
    ]
    assert lines(window([10, 500], depth=5000), "poison") == []
    assert lines(window([10]), "poison") == [
        "UNKNOWN: poison t/retry: needs 2 polls of the channel, got 1"
    ]
    assert lines(window([10, 13, 17]), "poison=crit", "poison:t=off") == []
    assert RuleSet.parse([]).rule_for("poison", "t", "retry") is None  # not a default


def test_perf_data_follow_the_status_line() -> None:
    """Nagios: ``'label'=value[UOM];warn;crit;min`` after the ``|`` of the first line only,
    one per threshold rule and channel, most urgent first; ``U`` for what was not measured."""
    rules = ["max-depth:orders/*=300,400", "max-time-to-drain:events=5,60", "orphan"]
    first, *rest = judge(polls(0, 1), RuleSet.parse(rules, defaults=False)).lines()
    assert first == (
        "CRITICAL: max-depth orders/audit: depth 459 > 400 | 'orders/audit depth'=459;300;400;0 "
        "'events/archive time_to_drain'=U;5;60;0 'orders/billing depth'=363;300;400;0"
    )
    assert rest and all("|" not in line for line in rest)
    falling = judge(polls(1, 0), RuleSet.parse(rules[1:2], defaults=False))
    assert falling.lines() == [
        "WARNING: max-time-to-drain events/archive: drains in 8.6s > 5s, at its pace over "
        "the last 2.0s (2 polls) | 'events/archive time_to_drain'=8.621s;5;60;0"
    ]
    assert "perfdata" not in falling.to_json()  # --json keeps its shape
    fine = judge(polls(0, 1), RuleSet.parse(["max-depth:events=1000"], defaults=False))
    assert fine.lines()[0].endswith(" polls | 'events/archive depth'=154;;1000;0")
    no_threshold = judge(polls(0, 1), RuleSet.parse(["orphan=off"], defaults=False))
    assert "|" not in no_threshold.lines()[0]


def test_node_down_and_an_unreachable_cluster() -> None:
    snap = original(0, 100.0)
    dead = NodeStats(address=B, fetched_at=100.0, state="down", error="timed out")
    lookupd = (LookupdStatus("127.0.0.1:4161", ok=True),)
    view = build_view(ClusterSnapshot(100.0, (snap.nodes[0], dead), lookupds=lookupd))
    assert lines([view], "node-down") == [
        f"CRITICAL: node-down {B}: does not answer /stats: timed out"
    ]
    nobody = build_view(
        ClusterSnapshot(100.0, (), lookupds=(LookupdStatus("127.0.0.1:1", ok=False),))
    )
    result = judge([nobody], RuleSet.parse([]))
    assert result.lines() == ["UNKNOWN: cluster: no nsqlookupd answered (127.0.0.1:1)"]
    assert result.to_json()["exit_code"] == 3


def test_profile_rules_come_before_the_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nsqctl.cli.commands.check import build_rules, rule_texts
    from nsqctl.profiles import load_config

    path = tmp_path / "config.toml"
    path.write_text('[profiles.p]\nlookupd = ["127.0.0.1:4161"]\ncheck = ["max-depth=5"]\n')
    monkeypatch.setenv("NSQCTL_CONFIG", str(path))
    assert load_config().profile("p").check == ("max-depth=5",)
    flags = rule_texts([], ["orders*"], [], max_depth="10,20")
    assert flags == ["max-depth:orders*/*=10,20"]
    rules = build_rules("p", False, flags)
    assert rule(rules, "max-depth", "events", "archive").threshold == Threshold(None, 5)
    assert rule(rules, "max-depth", "orders", "audit").threshold == Threshold(10, 20)
    path.write_text("[profiles.p]\ncheck = [1]\n")
    with pytest.raises(ConfigError, match="check must be a list of rule strings"):
        load_config()
    with pytest.raises(ConfigError, match="scope the --max-"):
        rule_texts([], ["orders*"], [])


def test_collector_series_on_recorded_polls() -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from nsqctl.health.metrics import ClusterCollector

    views = polls(0, 1)
    result = judge(views, RuleSet.parse(["max-depth=400"]))
    registry = CollectorRegistry(auto_describe=False)
    latest = Latest(views[-1], result, 1.0, 0.5, 2, tuple(views))
    registry.register(ClusterCollector(lambda: latest))
    samples = [
        s
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    ]

    def value(name: str, **labels: str) -> float:
        [found] = [s.value for s in samples if s.name == name and s.labels == labels]
        return found

    billing = {"topic": "orders", "channel": "billing", "partition": ""}
    assert value("nsq_channel_depth", **billing, node=A) == 181
    assert value("nsq_channel_messages_total", **billing, node=B) == 230
    clients = [
        s for s in samples if s.name == "nsq_client_ready" and s.labels["channel"] == "billing"
    ]
    assert len(clients) == 2 and all(s.labels["client_id"] for s in clients)
    status = {"rule": "max-depth", "partition": "", "node": ""}
    assert value("nsqctl_check_status", **status, topic="orders", channel="audit") == 2
    assert value("nsqctl_check_status", **status, topic="events", channel="archive") == 0
    assert value("nsqctl_up") == 1 and value("nsqctl_poll_duration_seconds") == 0.5
    # depth rose between the polls: the channel does not drain, and says so as +Inf
    drain = "nsq_channel_time_to_drain_seconds"
    assert value(drain, topic="events", channel="archive") == float("inf")
    assert {s.labels["channel"] for s in samples if s.name == drain} == {
        "archive",
        "audit",
        "billing",
    }


class _Scripted:
    """Snapshots handed out in order, as a poller would take them: the monitor's input
    without a server (the rule and the collector are sans-IO; only the order matters)."""

    def __init__(self, snapshots: list[ClusterSnapshot]) -> None:
        self._left = iter(snapshots)

    async def snapshot(self) -> ClusterSnapshot:
        return next(self._left)

    async def aclose(self) -> None:
        return None


def _scrape(latest: Latest) -> list[Sample]:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from nsqctl.health.metrics import ClusterCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(lambda: latest))
    text = generate_latest(registry).decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def _monitor_polls(snapshots: list[ClusterSnapshot], rules: RuleSet) -> list[Latest]:
    """Every poll of an exporter's monitor (5 s apart, the rules seeing 4 polls, the
    exporter's defaults) over ``snapshots``."""
    from nsqctl.health import HealthMonitor
    from nsqctl.stats.sources import StatsSession

    async def run() -> list[Latest]:
        session = StatsSession(_Scripted(snapshots), history_length=4)
        monitor = HealthMonitor(session, rules, interval=5.0, samples=4)
        return [await monitor.poll_once() for _ in snapshots]

    return asyncio.run(run())


def test_time_to_drain_holds_still_on_a_consumer_that_drains_in_bursts() -> None:
    """A steady producer (+10 a poll) and a consumer that takes 140 at once every fourth
    poll: the channel falls 100 every 20 s, 5/s. Measured over the monitor's last 4 polls
    (15 s) a window without a burst read as "never drains" (CRITICAL) and the next one as
    OK; over the last minute every window holds three bursts, so once the minute is
    polled the verdict and the gauge stay put. Both say what window they measured."""
    snapshots, depth = [], 2000
    for i in range(36):
        depth += 10 - (140 if i % 4 == 3 else 0)
        ch = channel_stats("work", depth, client_count=1)
        at = 100.0 + 5 * i
        node = NodeStats(RECORDED_A, at, "up", topics=(topic_stats(RECORDED_A, "t", ch),))
        snapshots.append(ClusterSnapshot(at, (node,)))
    rules = RuleSet.parse(["max-time-to-drain=600,3600"], defaults=False)
    polled = _monitor_polls(snapshots, rules)
    settled = polled[12:]  # 13 polls: the first full minute
    verdicts = {p.result.status for p in settled if p.result is not None}
    assert verdicts == {"ok"}, [p.result.lines()[0] for p in settled if p.result is not None]
    last = polled[-1].result
    assert last is not None and last.findings[0].message == (
        f"drains in {_shown_drain(depth)}s <= 600s, at its pace over the last 60.0s (13 polls)"
    )
    gauges = [
        s.value
        for p in settled
        for s in _scrape(p)
        if s.name == "nsq_channel_time_to_drain_seconds"
    ]
    assert len(gauges) == len(settled) and all(0 < g < 600 for g in gauges)


def _shown_drain(depth: int) -> str:
    seconds = depth / 5.0
    return str(int(seconds)) if seconds == int(seconds) else f"{seconds:.1f}"


def _consumer(port: int, ready: int, finished: int) -> ClientStats:
    return ClientStats(
        client_id="worker-1",
        hostname="worker-1.example",
        remote_address=f"127.0.0.1:{port}",
        user_agent="go-nsq/1.1.0",
        ready_count=ready,
        finish_count=finished,
    )


def test_a_reconnecting_consumer_keeps_one_client_series() -> None:
    """The consumer reconnects between polls (a new ephemeral port each time) and, on the
    last poll, holds two connections: still one series per family, labelled by what it
    names itself, the two connections summed."""
    connections = [
        (_consumer(50001, 10, 40),),
        (_consumer(50002, 10, 3),),
        (_consumer(50003, 10, 8), _consumer(50004, 5, 2)),
    ]
    snapshots = []
    for i, clients in enumerate(connections):
        ch = channel_stats("work", 3, clients=clients)
        at = 100.0 + 5 * i
        node = NodeStats(RECORDED_A, at, "up", topics=(topic_stats(RECORDED_A, "t", ch),))
        snapshots.append(ClusterSnapshot(at, (node,)))
    polled = _monitor_polls(snapshots, RuleSet.parse([], defaults=False))
    series: set[tuple[tuple[str, str], ...]] = set()
    for p in polled:
        for s in _scrape(p):
            if s.name == "nsq_client_ready":
                series.add(tuple(sorted(s.labels.items())))
    assert series == {
        (
            ("channel", "work"),
            ("client_id", "worker-1"),
            ("hostname", "worker-1.example"),
            ("node", RECORDED_A),
            ("partition", ""),
            ("topic", "t"),
            ("user_agent", "go-nsq/1.1.0"),
        )
    }
    last = {s.name: s.value for s in _scrape(polled[-1]) if s.name.startswith("nsq_client")}
    assert last["nsq_client_ready"] == 15 and last["nsq_client_finished_total"] == 10


def test_an_ok_without_node_down_says_what_it_did_not_see() -> None:
    """node-down turned off: the max-depth verdict stands on the nsqd that answered, and
    the OK line says how many did not, and which nsqlookupd did not."""
    snap = original(0, 100.0)
    dead = NodeStats(address=B, fetched_at=100.0, state="down", error="timed out")
    lookupds = (
        LookupdStatus("127.0.0.1:4161", ok=True),
        LookupdStatus("127.0.0.1:4171", ok=False),
    )
    view = build_view(ClusterSnapshot(100.0, (snap.nodes[0], dead), lookupds=lookupds))
    result = judge([view], RuleSet.parse(["max-depth=1000000"], defaults=False))
    assert result.status == "ok"
    assert result.lines()[0].startswith(
        "OK: 3 checks on 1 of 2 nsqd answering (nsqlookupd 127.0.0.1:4171 not answering), "
    ), result.lines()
    doc = result.to_json()
    assert (doc["nodes"], doc["nodes_answering"], doc["lookupds_down"]) == (
        2,
        1,
        ["127.0.0.1:4171"],
    )
