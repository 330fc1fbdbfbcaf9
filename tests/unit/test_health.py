"""Health rules: their syntax, precedence, and what they find on recorded polls."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqctl.errors import ConfigError
from nsqctl.health import RuleSet, Threshold, evaluate, judge, parse_rule
from nsqctl.health.evaluate import isr_focus
from nsqctl.health.findings import overall
from nsqctl.stats.model import ClusterSnapshot, LookupdStatus, NodeStats
from nsqctl.stats.series import KeyedSeries
from nsqctl.stats.view import ClusterView, build_view
from tests.helpers.stats import RECORDED_A, RECORDED_B, channel_stats, topic_stats
from tests.helpers.stats import recorded_original as original

A, B = RECORDED_A, RECORDED_B


def polls(*ks: int) -> list[ClusterView]:
    """Views of the recorded original polls ``ks`` taken 2 s apart, as a session makes them."""
    history = KeyedSeries()
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


def test_the_last_matching_rule_of_a_kind_decides() -> None:
    rules = RuleSet.parse(["max-depth=100", "max-depth:orders/*=1000", "orphan:orders=off"])
    assert rules.rule_for("max-depth", "events", "archive").threshold == Threshold(None, 100)
    assert rules.rule_for("max-depth", "orders", "audit").threshold == Threshold(None, 1000)
    assert rules.rule_for("orphan", "orders", "audit") is None
    assert rules.rule_for("orphan", "events", "archive").level == "warn"  # the default
    assert rules.rule_for("node-down", None, None).level == "crit"
    assert isr_focus(rules) is None  # the default isr rule covers every topic
    narrowed = RuleSet.parse(["isr=off", "isr:orders=warn", "isr:billing=crit"])
    assert isr_focus(narrowed) == {"orders", "billing"}
    assert isr_focus(RuleSet.parse(["isr=off"])) == frozenset()


def test_findings_on_recorded_polls() -> None:
    views = polls(0, 1)
    assert lines(views, "max-depth:orders/*=400") == [
        "CRITICAL: max-depth orders/audit: depth 459 > 400"
    ]
    # depth rose between the polls: never drains; the channel without client is an orphan
    assert lines(views, "max-time-to-drain:events=60", "orphan=warn") == [
        "CRITICAL: max-time-to-drain events/archive: depth 154 is not falling: "
        "it does not drain at this pace",
        "WARNING: orphan events/archive: depth grew 125 -> 154 with no client connected",
        "WARNING: orphan orders/audit: depth grew 374 -> 459 with no client connected",
    ]
    assert lines(views, "max-requeue-rate=0.1,1", "max-timeout-rate=0") == []
    # falling depth (poll 1 then 0): 154 -> 125 in 2 s, so the 125 left drain in 8.6 s
    assert lines(polls(1, 0), "max-time-to-drain:events=5,60") == [
        "WARNING: max-time-to-drain events/archive: drains in 8.6s > 5s"
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
        history, views, prev = KeyedSeries(), [], None
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
        "WARNING: max-time-to-drain events/archive: drains in 8.6s > 5s "
        "| 'events/archive time_to_drain'=8.621s;5;60;0"
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
    from nsqctl.cli.check import build_rules, rule_texts
    from nsqctl.config import load_config

    path = tmp_path / "config.toml"
    path.write_text('[profiles.p]\nlookupd = ["127.0.0.1:4161"]\ncheck = ["max-depth=5"]\n')
    monkeypatch.setenv("NSQCTL_CONFIG", str(path))
    assert load_config().profile("p").check == ("max-depth=5",)
    flags = rule_texts([], ["orders*"], [], max_depth="10,20")
    assert flags == ["max-depth:orders*/*=10,20"]
    rules = build_rules("p", False, flags)
    assert rules.rule_for("max-depth", "events", "archive").threshold == Threshold(None, 5)
    assert rules.rule_for("max-depth", "orders", "audit").threshold == Threshold(10, 20)
    path.write_text("[profiles.p]\ncheck = [1]\n")
    with pytest.raises(ConfigError, match="check must be a list of rule strings"):
        load_config()
    with pytest.raises(ConfigError, match="scope the --max-"):
        rule_texts([], ["orders*"], [])


def test_collector_series_on_recorded_polls() -> None:
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from nsqctl.health import Latest
    from nsqctl.health.metrics import ClusterCollector

    views = polls(0, 1)
    result = judge(views, RuleSet.parse(["max-depth=400"]))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(lambda: Latest(views[-1], result, 1.0, 0.5, 2)))
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
    assert len(clients) == 2 and all(s.labels["client"] for s in clients)
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
