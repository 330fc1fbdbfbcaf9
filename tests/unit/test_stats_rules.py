"""The shared operator rules that check, top, drain and the dashboard all read."""

from __future__ import annotations

import pytest

from nsqctl.stats.rules import drain_rate, is_orphan, is_poison, time_to_drain


def test_an_orphan_is_a_growing_channel_without_clients() -> None:
    assert is_orphan(0, True)
    assert not is_orphan(1, True)
    assert not is_orphan(0, False)


@pytest.mark.parametrize(
    ("depth", "requeues", "poison"),
    [(3, 7, True), (3, 6, False), (0, 100, False), (1000, 10**6, False), (3, None, False)],
)
def test_poison_is_a_few_messages_requeued_over_and_over(
    depth: int, requeues: int | None, poison: bool
) -> None:
    assert is_poison(depth, requeues) is poison


def test_drain_rate_and_time_to_drain() -> None:
    assert drain_rate([100, 80, 60], 1.0) == 20.0
    assert drain_rate([1, 2], 1.0) is None
    assert drain_rate([5], 1.0) is None
    assert time_to_drain(0, None) == 0.0
    assert time_to_drain(100, 20.0) == 5.0
    assert time_to_drain(10, None) is None
