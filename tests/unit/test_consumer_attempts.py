"""The transitions between a target's subscriptions (sans-IO): what follows a refusal
and a gap found after reading an empty partition from its end."""

from __future__ import annotations

import pytest

from nsqctl.consumer.attempts import Attempt, Verdict, after_gap, after_refusal
from nsqctl.protocol import SubscribeRefusal

A, R = Attempt, SubscribeRefusal


@pytest.mark.parametrize(
    ("attempt", "following"),
    [
        (A.ASKED, A.FROM_END),
        (A.FROM_END, Verdict.RETRY_LATER),
        (A.ASKED_AGAIN, A.FROM_END_AGAIN),
        (A.FROM_END_AGAIN, Verdict.RETRY_LATER),
    ],
)
def test_an_empty_partition_is_read_from_its_end_once_per_start(
    attempt: Attempt, following: Attempt | Verdict
) -> None:
    assert after_refusal(attempt, R.PARTITION_EMPTY) is following


@pytest.mark.parametrize("attempt", list(Attempt))
@pytest.mark.parametrize("refusal", [r for r in SubscribeRefusal if r is not R.PARTITION_EMPTY])
def test_any_other_refusal_ends_the_connecting(attempt: Attempt, refusal: SubscribeRefusal) -> None:
    expected = Verdict.FATAL if refusal.fatal else Verdict.RETRY_LATER
    assert after_refusal(attempt, refusal) is expected


def test_only_the_first_read_from_the_end_checks_the_gap() -> None:
    assert [a for a in Attempt if a.checks_gap] == [A.FROM_END]
    assert [a for a in Attempt if a.at_end] == [A.FROM_END, A.FROM_END_AGAIN]
    assert after_gap(A.FROM_END) is A.ASKED_AGAIN
    for attempt in (A.ASKED, A.ASKED_AGAIN, A.FROM_END_AGAIN):
        with pytest.raises(ValueError, match="no gap check"):
            after_gap(attempt)


def test_no_target_is_subscribed_round_and_round() -> None:
    """However the partition answers (empty every time, a message in every gap), the
    attempts end within four subscriptions."""
    attempt: Attempt | Verdict = A.ASKED
    seen = []
    while isinstance(attempt, Attempt):
        seen.append(attempt)
        attempt = after_refusal(attempt, R.PARTITION_EMPTY)
        if isinstance(attempt, Attempt) and attempt.checks_gap:
            seen.append(attempt)
            attempt = after_gap(attempt)
    assert seen == [A.ASKED, A.FROM_END, A.ASKED_AGAIN, A.FROM_END_AGAIN]
    assert attempt is Verdict.RETRY_LATER
