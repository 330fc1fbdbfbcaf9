"""``nsqctl tail``'s plan, built from its options before anything connects: the format,
the history bounds and the filter, each checked (and refused) on its own."""

from __future__ import annotations

import pytest

from nsqctl.cli.commands.tail import (
    MessageFilter,
    TailPlan,
    TailSource,
    TailStop,
    ephemeral_channel,
    parse_filter,
    parse_format,
    parse_history,
    summary_words,
)
from nsqctl.consumer import ConsumerStats
from nsqctl.errors import ConfigError
from nsqctl.protocol.names import is_ephemeral, validate_channel


def test_parse_format_compiles_templates_and_refuses_unknown_names() -> None:
    for name in ("raw", "json", "pretty"):
        assert parse_format(name, print_topic=True) is None
    template = parse_format("%t %s\\n", print_topic=False)
    assert template is not None and template.source == "%t %s\\n"
    with pytest.raises(ConfigError, match="bad --format template"):
        parse_format("%s %", print_topic=True)  # the broken template is what is reported
    with pytest.raises(ConfigError, match="use %t"):
        parse_format("%s\\n", print_topic=True)
    with pytest.raises(ConfigError, match="unknown --format 'xml'"):
        parse_format("xml", print_topic=False)


def test_parse_history_reads_start_and_end_on_a_temporary_channel_only() -> None:
    assert parse_history(None, False, None, None, None) == (None, None)
    start, until_ns = parse_history(None, False, None, 64, "1700000000")
    assert start == "virtual_queue:64" and until_ns == 1_700_000_000 * 10**9
    assert parse_history("mine#ephemeral", True, None, None, None) == ("msgcount:0", None)
    assert parse_history("durable", False, None, None, None) == (None, None)
    with pytest.raises(ConfigError, match="never on 'durable'"):
        parse_history("durable", False, None, None, "1700000000")
    with pytest.raises(ConfigError, match="only one of --from-start, --from-offset"):
        parse_history(None, True, None, 1, None)


def test_parse_filter_refuses_a_durable_channel_unless_discarding_is_asked_for() -> None:
    assert parse_filter(None, None, "durable", False) == MessageFilter()
    keep = parse_filter("a+", ["user.id=42"], None, False)
    assert keep.active and keep.fields == (("user.id", "42"),)
    assert parse_filter("a", None, "mine#ephemeral", False).active
    assert parse_filter("a", None, "durable", True).active
    with pytest.raises(ConfigError, match="add --discard-unmatched"):
        parse_filter(None, ["k=v"], "durable", False)


def test_plan_reads_history_when_a_start_or_end_is_given_and_acks_by_channel() -> None:
    channel = ephemeral_channel()
    assert validate_channel(channel) == channel and is_ephemeral(channel)
    plan = TailPlan(TailSource(topic="t", channel=channel))
    assert not plan.time_travel and not plan.ack_when_read
    assert not plan.stop.reads_stats and plan.stop.limit == 0
    assert plan.printing.fmt == "raw" and not plan.printing.keep.active
    assert TailPlan(TailSource(topic="t", channel=channel, start="msgcount:0")).time_travel
    until = TailPlan(TailSource(topic="t", channel=channel), TailStop(until_ns=1))
    assert until.time_travel and until.stop.reads_stats
    assert TailStop(until_empty=True).reads_stats
    assert TailPlan(TailSource(topic="t", channel="durable")).ack_when_read


def test_summary_speaks_of_ordered_partitions_only_for_an_ordered_tail() -> None:
    stats = ConsumerStats(reconnects=1, duplicates=2)
    unordered = summary_words(stats, ordered=False)
    assert unordered == (
        "nsqctl tail: 1 reconnect(s); 2 message(s) printed again after a reconnect (at-least-once)"
    )
    stats.order_redeliveries = 1
    ordered = summary_words(stats, ordered=True)
    assert ordered is not None and ordered.endswith(
        ", 1 of them resent by a new leader on an ordered partition"
    )
    assert summary_words(ConsumerStats(), ordered=True) is None  # nothing came twice
