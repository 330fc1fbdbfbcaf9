"""``topic move``'s refusals, checked on the topic's state before anything is sent."""

from __future__ import annotations

import pytest

from nsqctl.admin.partitions.plans import check_move
from nsqctl.admin.partitions.state import PartitionState, TopicState
from nsqctl.errors import ConfigError
from nsqctl.lookup.topology import TopicMeta

A, B, C, D = "a:4151", "b:4151", "c:4151", "d:4151"
P0 = PartitionState(0, A, isr=(A, B))
P1 = PartitionState(1, C, isr=(C,), catchup=(D,))


def state(ordered: bool) -> TopicState:
    return TopicState("t", TopicMeta(partition_num=2, ordered=ordered), {0: P0, 1: P1})


def test_moves_that_keep_the_placement_pass() -> None:
    check_move(state(False), P0, A, B, B)  # the leader onto its in-sync follower
    # an ordered topic's nsqds may hold copies of several partitions
    check_move(state(True), P0, B, C, C)
    check_move(state(True), P0, A, D, D)


@pytest.mark.parametrize(
    ("ordered", "source", "target", "refusal"),
    [
        (False, A, A, "where the copy already is"),
        (False, D, B, "holds no in-sync copy"),
        (True, B, A, "already holds a copy of t partition 0: to make it the leader"),
        (False, A, D, "holds partition 1 of t; an unordered topic"),
        (False, B, C, "holds partition 1 of t; an unordered topic"),
    ],
)
def test_moves_that_do_nothing_or_break_the_placement_are_refused(
    ordered: bool, source: str, target: str, refusal: str
) -> None:
    with pytest.raises(ConfigError, match=refusal):
        check_move(state(ordered), P0, source, target, target)
