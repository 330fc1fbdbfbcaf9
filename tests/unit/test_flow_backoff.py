"""BackoffController: exponential windows, one counted outcome per window, epochs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqctl.errors import ConfigError
from nsqctl.flow import BackoffAction, BackoffController, BackoffPhase, BackoffState

ENTER, TEST, EXIT = BackoffAction.ENTER, BackoffAction.TEST, BackoffAction.EXIT


def test_failure_enters_backoff_for_the_multiplier() -> None:
    ctl = BackoffController()
    assert ctl.state == BackoffState(BackoffPhase.NORMAL, 0)
    assert ctl.on_failure(10.0) is ENTER
    assert ctl.state == BackoffState(BackoffPhase.BACKOFF, 1, 11.0)
    assert ctl.next_deadline() == 11.0


def test_window_end_allows_one_test_and_success_exits() -> None:
    ctl = BackoffController()
    ctl.on_failure(0.0)
    assert ctl.tick(0.5) is None
    assert ctl.tick(1.0) is TEST
    assert ctl.state.phase is BackoffPhase.TESTING
    assert ctl.next_deadline() is None
    assert ctl.on_success(1.2) is EXIT
    assert ctl.state == BackoffState(BackoffPhase.NORMAL, 0)


def test_durations_double_per_consecutive_failure_up_to_the_cap() -> None:
    ctl = BackoffController(backoff_multiplier=1.0, max_backoff_duration=128.0)
    now, windows = 0.0, []
    for _ in range(12):
        assert ctl.on_failure(now) is ENTER
        until = ctl.state.until
        assert until is not None
        windows.append(until - now)
        now = until
        assert ctl.tick(now) is TEST
    assert windows == [1, 2, 4, 8, 16, 32, 64, 128, 128, 128, 128, 128]
    assert ctl.level == 8  # stops growing at the cap, so recovery takes 8 successes


def test_success_at_a_higher_level_backs_off_again_for_less() -> None:
    ctl = BackoffController(backoff_multiplier=0.5)
    ctl.on_failure(0.0)
    ctl.tick(0.5)
    ctl.on_failure(0.6)  # level 2: 1 s
    assert ctl.state.until == pytest.approx(1.6)
    ctl.tick(1.6)
    assert ctl.on_success(1.7) is ENTER  # level 1 again: another 0.5 s window
    assert (ctl.state.phase, ctl.state.level) == (BackoffPhase.BACKOFF, 1)
    assert ctl.state.until == pytest.approx(2.2)
    ctl.tick(2.2)
    assert ctl.on_success(2.3) is EXIT


def test_outcomes_while_waiting_out_a_window_are_ignored() -> None:
    ctl = BackoffController()
    ctl.on_failure(0.0)
    assert ctl.on_failure(0.2) is None
    assert ctl.on_success(0.3) is None
    assert ctl.state == BackoffState(BackoffPhase.BACKOFF, 1, 1.0)


def test_messages_from_before_the_window_do_not_count() -> None:
    ctl = BackoffController()
    old = ctl.epoch
    assert ctl.on_failure(0.0, old) is ENTER
    ctl.tick(1.0)
    assert ctl.on_success(1.1, old) is None  # in flight before the window: stale news
    assert ctl.on_failure(1.1, old) is None
    assert ctl.state.phase is BackoffPhase.TESTING
    assert ctl.on_success(1.2, ctl.epoch) is EXIT


def test_concurrent_failures_count_once() -> None:
    ctl = BackoffController()
    tags = [ctl.epoch] * 5
    actions = [ctl.on_failure(0.0, tag) for tag in tags]
    assert actions == [ENTER, None, None, None, None]
    assert ctl.level == 1


def test_only_one_outcome_per_test_counts() -> None:
    ctl = BackoffController()
    ctl.on_failure(0.0)
    ctl.tick(1.0)
    tag = ctl.epoch
    assert ctl.on_failure(1.1, tag) is ENTER
    assert ctl.on_failure(1.2, tag) is None
    assert ctl.level == 2


def test_neutral_test_outcome_waits_again_at_the_same_level() -> None:
    ctl = BackoffController()
    assert ctl.on_neutral(0.0) is None  # nothing to do in normal flow
    ctl.on_failure(0.0)
    ctl.tick(1.0)
    assert ctl.on_neutral(1.5) is ENTER
    assert ctl.state == BackoffState(BackoffPhase.BACKOFF, 1, 2.5)


def test_success_in_normal_flow_changes_nothing() -> None:
    ctl = BackoffController()
    epoch = ctl.epoch
    assert ctl.on_success(0.0) is None
    assert ctl.epoch == epoch


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ConfigError):
        BackoffController(backoff_multiplier=0)
    with pytest.raises(ConfigError):
        BackoffController(max_backoff_duration=-1)


events = st.lists(
    st.tuples(st.sampled_from(["ok", "fail", "neutral", "tick"]), st.floats(0, 200)),
    max_size=60,
)


@settings(deadline=None, max_examples=200)
@given(events=events)
def test_state_stays_consistent_under_any_sequence(events: list[tuple[str, float]]) -> None:
    ctl = BackoffController()
    now = 0.0
    for kind, wait in events:
        now += wait
        before = ctl.state
        action = {
            "ok": ctl.on_success,
            "fail": ctl.on_failure,
            "neutral": ctl.on_neutral,
            "tick": ctl.tick,
        }[kind](now)
        state = ctl.state
        assert (state.phase is BackoffPhase.NORMAL) == (state.level == 0)
        assert 0 <= state.level <= 8
        assert (state.until is not None) == (state.phase is BackoffPhase.BACKOFF)
        if action is ENTER:
            assert state.until is not None and 0 < state.until - now <= 128
        if before.phase is BackoffPhase.BACKOFF and kind != "tick":
            assert action is None and state == before
        expected = {
            ENTER: BackoffPhase.BACKOFF,
            TEST: BackoffPhase.TESTING,
            EXIT: BackoffPhase.NORMAL,
            None: before.phase,
        }
        assert state.phase is expected[action]
