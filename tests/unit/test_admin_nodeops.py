"""``--node``/``--partition`` planning and the blast radius's arithmetic, as pure
functions (the servers' side is in tests/integration/test_cli_nodeops.py)."""

from __future__ import annotations

import pytest

from nsqctl import admin
from nsqctl.admin import BlastRadius, Loss, Node, Placement
from nsqctl.errors import ConfigError

ORIGINAL = Placement(
    "t",
    "original",
    (Node("127.0.0.1:4151", "nsqd"), Node("127.0.0.1:4251", "nsqd")),
    ("127.0.0.1:4161",),
    aliases=(
        ("127.0.0.1:4150", "127.0.0.1:4151"),
        ("127.0.0.1:4250", "127.0.0.1:4251"),
        ("box", "127.0.0.1:4151"),
        ("box", "127.0.0.1:4251"),
    ),
)
REDESIGN = Placement(
    "t",
    "redesign",
    (Node("10.0.0.1:4151", "nsqd", 0), Node("10.0.0.2:4151", "nsqd", 1)),
    ("10.0.0.9:4161",),
)


def test_node_by_http_or_tcp_address_plans_that_nsqd_only() -> None:
    for name in ("127.0.0.1:4251", "127.0.0.1:4250"):
        stages = admin.plan_channel_action("pause", ORIGINAL, "c", node=name)
        assert [[r.url for r in s] for s in stages] == [
            ["http://127.0.0.1:4251/channel/pause?topic=t&channel=c"]
        ]
    (stage,) = admin.plan_topic_action("empty", ORIGINAL, node="127.0.0.1:4151")
    assert [r.url for r in stage] == ["http://127.0.0.1:4151/topic/empty?topic=t"]


def test_unknown_or_ambiguous_node_is_a_config_error_naming_the_holders() -> None:
    with pytest.raises(ConfigError, match=r"127\.0\.0\.1:4151, 127\.0\.0\.1:4251") as err:
        admin.select_nodes(ORIGINAL, node="10.9.9.9:4151")
    assert err.value.setting == "node"
    with pytest.raises(ConfigError, match="names several nsqds"):
        admin.select_nodes(ORIGINAL, node="box")


def test_node_and_partition_must_agree_on_the_redesign() -> None:
    assert admin.select_nodes(REDESIGN, partition=1, node="10.0.0.2:4151") == (
        Node("10.0.0.2:4151", "nsqd", 1),
    )
    with pytest.raises(ConfigError, match="partition 1"):
        admin.select_nodes(REDESIGN, partition=1, node="10.0.0.1:4151")


def test_channel_create_and_delete_are_not_per_node() -> None:
    for action in ("create", "delete"):
        with pytest.raises(ConfigError, match="cannot be limited to one nsqd"):
            admin.plan_channel_action(action, ORIGINAL, "c", node="127.0.0.1:4151")


def test_blast_radius_totals() -> None:
    original = BlastRadius(
        "channel empty",
        "t",
        "c",
        "original",
        (
            Loss("a", None, "c", 5, None, depth=3, in_flight=1, deferred=1),
            Loss("b", None, "c", 2, None, depth=2),
        ),
    )
    assert (original.messages, original.bytes) == (7, None)
    assert original.exceeds(6) and not original.exceeds(7)
    assert "  a  channel c: 5 messages (3 queued, 1 in flight, 1 deferred), bytes unknown" in (
        original.lines()
    )
    # a deleted redesign partition: the channel's bytes are within the stored bytes
    redesign = BlastRadius(
        "topic delete",
        "t",
        None,
        "redesign",
        (
            Loss("a", 0, None, None, 300),
            Loss("a", 0, "c", 4, 120, depth=4, within_stored=True),
        ),
    )
    assert (redesign.messages, redesign.bytes) == (4, 300)
    unanswered = BlastRadius("topic empty", "t", None, "original", (), (("b", "refused"),))
    assert unanswered.exceeds(10**9) and not unanswered.complete
