"""Views of a degraded cluster, from built records: a partition the topic's meta counts
but no answering nsqd holds, an original topic no answering nsqd holds, check rules that
match nothing or cannot be judged with no nsqlookupd answering, and the dashboard's words
for each server family.

The same states on real servers are in tests/integration/test_degraded_views.py; these
pin the model's rules without a cluster.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from nsqctl.errors import ConfigError
from nsqctl.health.check import judge
from nsqctl.health.evaluate import evaluate
from nsqctl.health.spec import RuleSet
from nsqctl.lookup.topology import Peer, TopicMeta, Topology, counted_partitions
from nsqctl.stats.model import ClusterSnapshot, LookupdStatus, NodeStats, UnseenTopic
from nsqctl.stats.view import ClusterView, build_view
from nsqctl.tui import hotrows, rows
from tests.helpers.stats import (
    RECORDED_A,
    RECORDED_B,
    channel_stats,
    recorded_original,
    topic_stats,
)

META = TopicMeta(partition_num=3, replica=1)


def _view(meta: dict[str, TopicMeta]) -> ClusterView:
    """Partitions 0 and 2 of ``t`` on one nsqd; partition 1's only nsqd is gone."""
    parts = tuple(
        topic_stats(RECORDED_A, "t", channel_stats("c"), partition=p, leader=True) for p in (0, 2)
    )
    node = NodeStats(RECORDED_A, 1.0, "up", is_redesign=True, topics=parts)
    return build_view(ClusterSnapshot(1.0, (node,), topic_meta=meta))


def test_the_meta_counts_partitions_no_lookupd_or_nsqd_lists() -> None:
    assert counted_partitions(3, [0, 2]) == [0, 1, 2]
    assert counted_partitions(2, [0, 1, 4]) == [0, 1, 4]  # one added since the count
    leader = Peer("127.0.0.1", 4150, 4151)
    topo = Topology("t", partitions={0: leader, 2: leader}, meta=META, is_redesign=True)
    assert [(s.partition, s.leader) for s in topo.partition_slots] == [
        (0, leader),
        (1, None),
        (2, leader),
    ]
    assert topo.leaderless_partitions == (1,)
    topic = _view({"t": META}).topic("t")
    assert topic is not None
    assert [(p.partition, p.leader, p.live) for p in topic.partitions] == [
        (0, RECORDED_A, True),
        (1, None, False),
        (2, RECORDED_A, True),
    ]
    assert (topic.leaderless, topic.unseen, topic.severity) == (1, 1, "crit")
    assert topic.replicas_configured == 1
    # without the meta the view cannot know partition 1 exists
    blind = _view({}).topic("t")
    assert blind is not None and [p.partition for p in blind.partitions] == [0, 2]


def test_a_topic_whose_every_copy_is_down_is_still_listed_from_its_meta() -> None:
    gone = _view({"t": META, "gone": TopicMeta(partition_num=2, replica=1)}).topic("gone")
    assert gone is not None and gone.is_redesign
    assert [(p.partition, p.live) for p in gone.partitions] == [(0, False), (1, False)]


def _problems(view: ClusterView, *rules: str) -> list[str]:
    found = evaluate([view], RuleSet.parse(rules, defaults=False))
    return [f.line() for f in found if f.status != "ok"]


def test_no_leader_names_the_missing_copy_and_a_rule_matching_nothing_warns() -> None:
    view = _view({"t": META})
    assert _problems(view, "no-leader") == [
        "CRITICAL: no-leader t#1: no leader and no live copy: every nsqd holding it is down "
        "or not answering"
    ]
    assert _problems(view, "max-depth:t/c=100", "isr:t", "no-leader:t") == [
        "CRITICAL: no-leader t#1: no leader and no live copy: every nsqd holding it is down "
        "or not answering"
    ]
    warned = _problems(view, "max-depth:tt*/c=100", "isr:nope=warn", "orphan:t/nope")
    assert warned == [
        "WARNING: max-depth tt*/c: rule max-depth:tt*/c=100 matches no channel the cluster "
        "shows: check the name, or the topic is gone (deleted, or on nsqds that are down)",
        "WARNING: isr nope: rule isr:nope=warn matches no redesign topic the cluster shows: "
        "check the name, or the topic is gone (deleted, or on nsqds that are down)",
        "WARNING: orphan t/nope: rule orphan:t/nope=crit matches no channel the cluster "
        "shows: check the name, or the topic is gone (deleted, or on nsqds that are down)",
    ]
    # rules for everything, and rules turned off, cover an empty cluster without a word
    empty = build_view(ClusterSnapshot(1.0, ()))
    assert _problems(empty, "max-depth=100", "no-leader", "orphan:tmp-*=off") == []


def test_the_dashboard_speaks_each_familys_words() -> None:
    """An original nsqd holds whole topics: no partitions, no leaders in its columns."""
    original = build_view(recorded_original(0, 1.0))
    redesign = _view({"t": META})
    assert "partitions" not in rows.node_columns(original)
    assert "leaders" not in rows.node_columns(original)
    assert rows.topic_columns(original)[1] == "nsqds"
    assert "partitions" not in hotrows.node_summary_columns(original)
    assert hotrows.node_summary_title(original) == "nsqd nodes (totals of the topics each holds)"
    orders = original.topic("orders")
    assert orders is not None and rows.copies_text(orders) == "on 2 nsqd(s)"
    assert rows.partition_columns(orders)[1] == "nsqd"
    assert "partition" not in rows.summary_line(original).plain
    assert {"partitions", "leaders"} <= set(rows.node_columns(redesign))
    assert "partitions" in hotrows.node_summary_columns(redesign)
    assert rows.topic_columns(redesign)[1] == "parts"


def _original(*lookupds: LookupdStatus) -> ClusterView:
    """Topic ``t`` on the nsqd that answered; ``gone`` only on the one that did not."""
    up = NodeStats(RECORDED_A, 1.0, "up", topics=(topic_stats(RECORDED_A, "t"),))
    down = NodeStats(RECORDED_B, 1.0, "down", error="connection refused")
    unseen = {"gone": UnseenTopic((RECORDED_B,), ("c",))}
    return build_view(ClusterSnapshot(1.0, (up, down), lookupds, unseen_topics=unseen))


def test_an_original_topic_no_answering_nsqd_holds_is_not_seen() -> None:
    gone = (
        f"not-seen gone: no nsqd that answered holds it (nsqd {RECORDED_B} down): nobody can "
        f"read it, or publish to it where it lives, until one answers again; fix: bring "
        f"nsqd {RECORDED_B} back"
    )
    view = _original()
    assert _problems(view, "not-seen") == [f"CRITICAL: {gone}"]
    assert _problems(view, "not-seen", "not-seen:gone=warn") == [f"WARNING: {gone}"]
    assert _problems(view, "not-seen", "not-seen:g*=off") == []
    judged = evaluate([view], RuleSet.parse(["not-seen"], defaults=False))
    assert [(f.status, f.topic, f.message) for f in judged if f.topic == "t"] == [
        ("ok", "t", "on 1 answering nsqd(s)")
    ]
    assert _problems(view, "not-seen:nope") == [
        "WARNING: not-seen nope: rule not-seen:nope=crit matches no original topic the cluster "
        "shows: check the name, or the topic is gone (deleted, or on nsqds that are down)"
    ]
    # a redesign topic's lost copies are no-leader's: not-seen judges no partition
    assert _problems(_view({"t": META}), "not-seen") == []
    with pytest.raises(ConfigError, match="not-seen is about topics, it takes no CHANNEL"):
        RuleSet.parse(["not-seen:t/c"])


def test_a_topic_nsqlookupd_lists_with_no_producer_is_a_warning_naming_both_guesses() -> None:
    """It may be on the nsqd down (nsqlookupd dropped a killed nsqd's producers) or a
    registration nsqlookupd kept after its last producer left: the finding says both, a
    warning (not an outage); one the nsqd down listed, or that nsqlookupd names as its
    producer, stays critical."""
    up = NodeStats(RECORDED_A, 1.0, "up", topics=(topic_stats(RECORDED_A, "t"),))
    down = NodeStats(RECORDED_B, 1.0, "down", error="connection refused")
    unseen = {
        "left": UnseenTopic((RECORDED_B,), guessed=True, unregistered=True),
        "gone": UnseenTopic((RECORDED_B,), ("c",)),
    }
    view = build_view(ClusterSnapshot(1.0, (up, down), unseen_topics=unseen))
    left = (
        f"not-seen left: nsqlookupd lists it with no producer: may be on nsqd {RECORDED_B} "
        "(down), or a registration nsqlookupd kept after its last producer left; fix: bring "
        f"nsqd {RECORDED_B} back, or, if nothing holds it, delete the registration: nsqctl "
        "topic delete left, given only the nsqlookupds and the nsqds in service (it refuses "
        "while an nsqd it is given is down)"
    )
    gone = (
        f"not-seen gone: no nsqd that answered holds it (nsqd {RECORDED_B} down): nobody can "
        f"read it, or publish to it where it lives, until one answers again; fix: bring "
        f"nsqd {RECORDED_B} back"
    )
    assert sorted(_problems(view, "not-seen")) == [f"CRITICAL: {gone}", f"WARNING: {left}"]
    alone = RuleSet.parse(["not-seen", "not-seen:gone=off"], defaults=False)
    assert judge([view], alone).exit_code == 1
    assert _problems(view, "not-seen:left=off", "not-seen:gone=off") == []
    marked = (
        f"NOT SEEN (nsqlookupd lists it with no producer: on nsqd {RECORDED_B} (down), or "
        "left behind)"
    )
    assert rows.topic_flags(view.topic("left")) == marked  # type: ignore[arg-type]
    assert "1 topics not seen (their nsqds are down)" in rows.summary_line(view).plain
    assert (
        "1 topics not seen (nsqlookupd lists it with no producer" in rows.summary_line(view).plain
    )


def test_with_no_lookupd_answering_its_rules_are_unknown_never_ok() -> None:
    """What only nsqlookupd tells (a redesign topic's partition count and replicas, the
    original topics of nsqds that are down) is missing: those rules say so, and the
    verdict is UNKNOWN (exit 3) unless something worse was found."""
    dead = LookupdStatus("127.0.0.1:4161", ok=False, error="no answer to /ping")
    why = "not judged: no nsqlookupd answered (127.0.0.1:4161: no answer to /ping): "
    blind_redesign = replace(_view({}), lookupds=(dead,))
    result = judge([blind_redesign], RuleSet.parse(["orphan=off", "node-down=off"]))
    assert (result.status, result.exit_code) == ("unknown", 3)
    lines = result.lines()
    assert [line.split(": ")[:2] for line in lines] == [
        ["UNKNOWN", "isr cluster"],
        ["UNKNOWN", "no-leader cluster"],
    ]
    assert all(why in line and line.endswith("check against one that answers") for line in lines)
    # a rule turned off is not reported as unjudged; a worse finding sets the verdict
    assert _problems(blind_redesign, "no-leader=off", "isr") == [lines[0]]
    assert judge([blind_redesign], RuleSet.parse([])).status == "crit"  # node-down: the lookupd
    blind_original = _original(dead)
    [unknown] = [
        f.line()
        for f in evaluate([blind_original], RuleSet.parse([]))
        if f.topic is None and f.node is None
    ]
    assert unknown.startswith(f"UNKNOWN: not-seen cluster: {why}a topic whose every nsqd"), unknown
    # one nsqlookupd answering is enough: nothing is unjudged
    both = (dead, LookupdStatus("127.0.0.1:4171", ok=True))
    assert _problems(replace(_view({"t": META}), lookupds=both), "no-leader", "isr") == [
        "CRITICAL: no-leader t#1: no leader and no live copy: every nsqd holding it is down "
        "or not answering"
    ]
    assert _problems(_original(*both), "not-seen:t") == []
