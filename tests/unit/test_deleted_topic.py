"""A redesign topic nsqlookupd has no meta for while an nsqd holds a copy of it (data a
deleted topic left behind on an nsqd down during the delete): the views, the check and
the exporter call it that, a warning saying what removes it, never a partition with no
leader paging the operator. Built snapshots (what the poller makes of nsqlookupd
answering the topic as not found): the real servers' case is in the integration tests."""

from __future__ import annotations

import json

import pytest

from nsqctl.cli.commands.check import report
from nsqctl.errors import ConfigError
from nsqctl.health.check import judge
from nsqctl.health.spec import RuleSet
from nsqctl.stats.model import ClusterSnapshot, NodeStats, TopicPartitionStats
from nsqctl.stats.view import ClusterView, build_view, deleted_words
from nsqctl.tui import rows
from tests.helpers.degraded import scrape
from tests.helpers.stats import RECORDED_A, RECORDED_B, topic_stats

WORDS = (
    f"topic gone was deleted (nsqlookupd has no meta for it) but {RECORDED_B} still holds "
    "partition 1"
)


def _node(address: str, *topics: TopicPartitionStats) -> NodeStats:
    return NodeStats(address, 100.0, "up", is_redesign=True, topics=topics)


def _snapshot(deleted: frozenset[str]) -> ClusterSnapshot:
    """``live`` led on A; partition 1 of ``gone`` on B, leading nothing (nsqlookupd
    enables no leader for a topic it does not know)."""
    a = _node(RECORDED_A, topic_stats(RECORDED_A, "live", partition=0))
    b = _node(RECORDED_B, topic_stats(RECORDED_B, "gone", partition=1, leader=False))
    return ClusterSnapshot(100.0, (a, b), deleted_topics=deleted)


def _view(deleted: frozenset[str] = frozenset({"gone"})) -> ClusterView:
    return build_view(_snapshot(deleted))


def test_a_deleted_topics_copy_is_one_leftover_warning_not_a_no_leader_page() -> None:
    view = _view()
    gone = view.topic("gone")
    assert gone is not None and gone.deleted and gone.severity == "warn"
    assert [(p.partition, p.leader, p.replicas) for p in gone.partitions] == [
        (1, None, (RECORDED_B,))
    ]
    live = view.topic("live")
    assert live is not None and not live.deleted and live.severity == "ok"
    result = judge([view], RuleSet.parse([]))
    assert (result.status, result.exit_code) == ("warn", 1)  # Nagios: warning
    assert result.lines() == [f"WARNING: leftover gone: {WORDS}: `topic_delete(gone)` removes it"]
    assert not [f for f in result.findings if f.rule == "no-leader" and f.topic == "gone"]
    # its level is the operator's, like every flag rule's
    assert judge([view], RuleSet.parse(["leftover:gone=crit"])).status == "crit"
    silenced = judge([view], RuleSet.parse(["leftover=off"]))
    assert silenced.status == "ok" and not [f for f in silenced.findings if f.topic == "gone"]
    with pytest.raises(ConfigError, match="leftover is about topics, it takes no CHANNEL"):
        RuleSet.parse(["leftover:gone/c=warn"])


def test_without_nsqlookupds_not_found_answer_it_stays_a_partition_with_no_leader() -> None:
    """Nothing but that answer tells a deleted topic: without it (every nsqlookupd down,
    say) the same copy is a partition with no leader, as before."""
    view = _view(frozenset())
    gone = view.topic("gone")
    assert gone is not None and not gone.deleted and gone.severity == "crit"
    result = judge([view], RuleSet.parse([]))
    assert result.status == "crit"
    assert [f.line() for f in result.problems] == [
        f"CRITICAL: no-leader gone#1: no writable leader (copies on {RECORDED_B})"
    ]


def test_the_check_spells_the_remedy_as_the_cli_command(capsys: pytest.CaptureFixture[str]) -> None:
    result = judge([_view()], RuleSet.parse([]))
    report(result, as_json=False)
    assert capsys.readouterr().out.splitlines() == [
        f"WARNING: leftover gone: {WORDS}: `nsqctl topic delete gone` removes it"
    ]
    report(result, as_json=True)
    [finding] = json.loads(capsys.readouterr().out)["findings"]
    assert (finding["rule"], finding["status"], finding["topic"]) == ("leftover", "warn", "gone")
    assert finding["message"] == f"{WORDS}: `nsqctl topic delete gone` removes it"


def test_the_exporter_serves_the_leftover_verdict_and_the_partition_as_it_is() -> None:
    scraped = scrape(_view())
    leftover = frozenset(
        {("rule", "leftover"), ("topic", "gone"), ("partition", ""), ("channel", ""), ("node", "")}
    )
    assert scraped[("nsqctl_check_status", leftover)] == 1.0
    assert not [
        labels
        for name, labels in scraped
        if name == "nsqctl_check_status"
        and ("rule", "no-leader") in labels
        and ("topic", "gone") in labels
    ]
    part = frozenset({("topic", "gone"), ("partition", "1")})
    assert scraped[("nsq_partition_writable", part)] == 0.0  # its copy takes no writes
    assert scraped[("nsq_partition_copies", part)] == 1.0


def test_the_dashboard_says_deleted_where_it_said_no_leader() -> None:
    view = _view()
    gone = view.topic("gone")
    assert gone is not None
    assert rows.topic_flags(gone) == "DELETED"
    summary = rows.summary_line(view).plain
    assert "1 deleted topics still held by an nsqd" in summary
    assert "without leader" not in summary
    assert rows.deleted_note(gone) == f"{WORDS}: `nsqctl topic delete gone` removes it"
    [(_, cells)] = rows.partition_rows(gone)
    assert str(cells[1]) == "none (topic deleted)"


def test_the_words_name_every_nsqd_and_its_partitions() -> None:
    a = _node(
        RECORDED_A,
        topic_stats(RECORDED_A, "gone", partition=0, leader=False),
        topic_stats(RECORDED_A, "gone", partition=2, leader=False),
    )
    b = _node(RECORDED_B, topic_stats(RECORDED_B, "gone", partition=1, leader=False))
    view = build_view(ClusterSnapshot(100.0, (a, b), deleted_topics=frozenset({"gone"})))
    gone = view.topic("gone")
    assert gone is not None
    assert deleted_words(gone) == (
        f"topic gone was deleted (nsqlookupd has no meta for it) but {RECORDED_A} still holds "
        f"partitions 0, 2 and {RECORDED_B} still holds partition 1: `topic_delete(gone)` "
        "removes it"
    )


def test_a_copy_still_leading_is_a_delete_under_way_not_data_left_behind() -> None:
    """nsqlookupd removes the meta first and tells the nsqds after: a poll between the two
    sees a copy that still leads, shown as it is (not flagged, not a warning)."""
    a = _node(RECORDED_A, topic_stats(RECORDED_A, "going", partition=0))
    view = build_view(ClusterSnapshot(100.0, (a,), deleted_topics=frozenset({"going"})))
    going = view.topic("going")
    assert going is not None and not going.deleted and going.severity == "ok"
    assert judge([view], RuleSet.parse([])).status == "ok"
