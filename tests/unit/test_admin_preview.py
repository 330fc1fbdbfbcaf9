"""What an admin command says before it acts, as pure functions (no servers): the plan in
words (``--dry-run`` and the prompt) and the one confirmation rule every front end uses."""

from __future__ import annotations

import pytest

from nsqctl import admin
from nsqctl.admin import Loss
from nsqctl.errors import ConfigError
from tests.unit.test_admin_plan import ORIGINAL, REDESIGN


def test_channel_plans_name_every_partition_and_node_in_words() -> None:
    empty = admin.describe_plan(admin.plan_channel_action("empty", REDESIGN, "c"))
    assert empty == [
        "drop every queued message of channel t/c on nsqds 10.0.0.1:4151 (partition 0), "
        "10.0.0.2:4151 (partition 1)"
    ]
    (one,) = admin.describe_plan(
        admin.plan_channel_action("setoffset", REDESIGN, "c", offset="timestamp:1700000000")
    )
    assert one.startswith(
        "move channel t/c's position to the first message published at/after Unix time "
        "1700000000 on nsqds 10.0.0.1:4151 (partition 0)"
    )
    assert "POST" not in one and "?" not in one


def test_stages_are_numbered_in_the_order_they_are_sent() -> None:
    lines = admin.describe_plan(admin.plan_topic_delete(ORIGINAL))
    assert lines == [
        "1. unregister topic t on lookupds 127.0.0.1:4161, 127.0.0.1:4261",
        "2. delete topic t with its queued messages on nsqds 127.0.0.1:4151, 127.0.0.1:4251",
    ]
    (whole,) = admin.describe_plan(admin.plan_topic_delete(REDESIGN, "10.0.0.9:4161"))
    assert whole.startswith("delete topic t on every partition, with all its channels")


def _blast(messages: int, complete: bool = True) -> admin.BlastRadius:
    loss = Loss("10.0.0.1:4151", 0, "c", messages, None)
    unreachable = () if complete else (("10.0.0.2:4151", "timed out"),)
    return admin.BlastRadius("empty", "t", "c", "redesign", (loss,), unreachable)


@pytest.mark.parametrize(
    ("blast", "answer"),
    [
        (None, "yes"),
        (_blast(1000), "yes"),
        (_blast(1001), "name"),
        (_blast(0, complete=False), "name"),  # an nsqd could not say how many
    ],
)
def test_the_confirmation_rule(blast: admin.BlastRadius | None, answer: str) -> None:
    ask = admin.confirmation(blast, 1000)
    assert ask.answer == answer
    if answer == "name":
        assert ask.accepts(" t ") and not ask.accepts("y")
    else:
        assert ask.accepts("y") and not ask.accepts("t") and not ask.accepts("")


def test_an_action_the_family_lacks_is_bad_input() -> None:
    with pytest.raises(admin.FamilyUnsupportedError) as err:
        admin.plan_topic_action("pause", REDESIGN)
    assert isinstance(err.value, ConfigError)  # the CLI exits 2 for it
    with pytest.raises(admin.FamilyUnsupportedError):
        admin.plan_channel_action("skip", ORIGINAL, "c")
    assert issubclass(admin.NotRedesignError, ConfigError)
