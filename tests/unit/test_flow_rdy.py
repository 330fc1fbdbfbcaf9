"""RdyController: distribution, rotation, backoff hooks, rate cap, and invariants under fuzzing."""

from __future__ import annotations

import random
from typing import TypedDict, Unpack

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from nsqctl.errors import ConfigError
from nsqctl.flow import BackoffAction, RdyController, RdyMode, RdyUpdate


def as_dict(updates: list[RdyUpdate]) -> dict[object, int]:
    return {u.conn_id: u.count for u in updates}


class RdyOptions(TypedDict, total=False):
    """The controller's settings a test may change."""

    fixed_rdy_one: bool
    idle_turn: float


def primed(
    max_in_flight: int, names: str, *, seed: int = 0, **options: Unpack[RdyOptions]
) -> RdyController:
    """A controller whose connections have each received and answered one message."""
    ctl = RdyController(max_in_flight, rng=random.Random(seed), **options)
    for name in names:
        ctl.add_connection(name, 2500, 0.0)
    for name in names:
        ctl.on_message(name, 0.0)
        ctl.on_message_done(name, 0.0)
    return ctl


def rdys(ctl: RdyController) -> dict[object, int]:
    return {cid: ctl.rdy(cid) for cid in ctl.connection_ids}


# -- bootstrap and even distribution --------------------------------------------------------


def test_new_connection_starts_at_one_and_gets_its_share_on_first_message() -> None:
    ctl = RdyController(10)
    assert ctl.add_connection("a", 2500, 0.0) == [RdyUpdate("a", 1)]
    assert ctl.on_message("a", 0.1) == [RdyUpdate("a", 10)]


def test_share_is_max_in_flight_divided_evenly_rounding_down() -> None:
    ctl = primed(10, "abc")
    assert rdys(ctl) == {"a": 3, "b": 3, "c": 3}
    assert ctl.total_rdy == 9


def test_new_connection_lowers_the_others_first() -> None:
    ctl = primed(10, "ab")
    updates = ctl.add_connection("c", 2500, 1.0)
    assert as_dict(updates) == {"a": 3, "b": 3, "c": 1}
    assert [u.conn_id for u in updates][-1] == "c"  # decreases before the increase
    assert ctl.on_message("c", 1.1) == [RdyUpdate("c", 3)]


def test_shares_are_planned_for_the_connections_still_being_made() -> None:
    """The first of two partitions to subscribe gets half the budget, not all of it: what
    it takes in flight before the second joins would push the total past max_in_flight."""
    ctl = RdyController(200)
    assert ctl.expect_connections(2, 0.0) == []
    ctl.add_connection("a", 2500, 0.0)
    assert ctl.on_message("a", 0.1) == [RdyUpdate("a", 100)]
    ctl.add_connection("b", 2500, 0.2)
    ctl.on_message("b", 0.3)
    assert rdys(ctl) == {"a": 100, "b": 100}


def test_a_connection_that_could_not_be_made_gives_its_share_back() -> None:
    ctl = RdyController(200)
    ctl.expect_connections(2, 0.0)
    ctl.add_connection("a", 2500, 0.0)
    ctl.on_message("a", 0.1)
    assert ctl.expect_connections(1, 0.2) == [RdyUpdate("a", 200)]
    with pytest.raises(ValueError):
        ctl.expect_connections(-1, 0.3)


def test_a_small_budget_still_reaches_the_connection_that_is_up() -> None:
    """Below one RDY per expected connection, the one that is up is not starved waiting
    for the others (the plan only splits a budget that covers them all)."""
    ctl = RdyController(1)
    ctl.expect_connections(3, 0.0)
    assert ctl.add_connection("a", 2500, 0.0) == [RdyUpdate("a", 1)]


def test_removed_connection_share_goes_back_to_the_others() -> None:
    ctl = primed(10, "abc")
    assert as_dict(ctl.remove_connection("c", 1.0)) == {"a": 5, "b": 5}
    assert ctl.remove_connection("c", 1.0) == []


def test_max_rdy_count_is_respected_per_connection() -> None:
    ctl = RdyController(5000)
    ctl.add_connection("small", 100, 0.0)
    ctl.add_connection("big", 2500, 0.0)
    ctl.on_message("small", 0.0)
    ctl.on_message("big", 0.0)
    assert rdys(ctl) == {"small": 100, "big": 2500}


def test_unchanged_window_is_never_resent() -> None:
    ctl = primed(8, "ab")
    for step in range(40):
        assert ctl.on_message("a", step) == []
        assert ctl.on_message_done("a", step) == []
    assert rdys(ctl) == {"a": 4, "b": 4}


# -- fewer RDY than connections: rotation ---------------------------------------------------


#: Quick turns off, so a test sees go-nsq's periodic redistribution alone.
NO_QUICK_TURNS = 1e9


def test_connections_beyond_the_budget_start_at_zero() -> None:
    ctl = RdyController(2, rng=random.Random(1), idle_turn=NO_QUICK_TURNS)
    for name in "abcd":
        ctl.add_connection(name, 2500, 0.0)
    assert rdys(ctl) == {"a": 1, "b": 1, "c": 0, "d": 0}
    assert ctl.next_deadline() == 5.0


def test_idle_holder_gives_way_after_low_rdy_idle_timeout() -> None:
    ctl = RdyController(1, rng=random.Random(1), idle_turn=NO_QUICK_TURNS)
    ctl.add_connection("a", 2500, 0.0)
    ctl.add_connection("b", 2500, 0.0)
    assert ctl.tick(5.0) == []
    assert ctl.tick(10.0) == []  # idle exactly 10 s: not longer than the timeout
    assert ctl.tick(15.0) == [RdyUpdate("a", 0), RdyUpdate("b", 1)]


def test_busy_holder_gives_way_after_low_rdy_timeout() -> None:
    ctl = RdyController(1, rng=random.Random(1))
    ctl.add_connection("a", 2500, 0.0)
    ctl.add_connection("b", 2500, 0.0)
    moved_at = None
    for second in range(1, 60):
        ctl.on_message("a", second)
        ctl.on_message_done("a", second)
        if ctl.tick(float(second)):
            moved_at = second
            break
    assert moved_at == 35  # first tick after holding for 30 s
    assert rdys(ctl) == {"a": 0, "b": 1}


def test_rotation_eventually_reaches_every_connection() -> None:
    ctl = RdyController(2, rng=random.Random(7))
    names = [f"c{i}" for i in range(12)]
    for name in names:
        ctl.add_connection(name, 2500, 0.0)
    served = {cid for cid, count in rdys(ctl).items() if count}
    now = 0.0
    while (deadline := ctl.next_deadline()) is not None and now < 2000:
        now = deadline
        for update in ctl.tick(now):
            if update.count:
                served.add(update.conn_id)
        assert ctl.total_rdy == 2
    assert served == set(names)


def test_no_deadline_while_budget_covers_every_connection() -> None:
    ctl = primed(10, "ab", idle_turn=NO_QUICK_TURNS)
    assert ctl.next_deadline() is None
    ctl.set_max_in_flight(1, 1000.0)
    assert ctl.next_deadline() == 1005.0  # the timer starts when rotation does
    assert ctl.tick(1004.0) == []  # early ticks do nothing
    ctl.set_max_in_flight(10, 1006.0)
    assert ctl.next_deadline() is None


def test_a_quiet_holder_passes_its_turn_to_the_next_connection_in_order() -> None:
    ctl = RdyController(1, rng=random.Random(1), idle_turn=0.25)
    for name in "abc":
        ctl.add_connection(name, 2500, 0.0)
    assert rdys(ctl) == {"a": 1, "b": 0, "c": 0}
    assert ctl.next_deadline() == 0.25  # the quiet holder's turn ends, not the 5 s tick
    assert ctl.tick(0.2) == []
    assert ctl.tick(0.25) == [RdyUpdate("a", 0), RdyUpdate("b", 1)]
    assert ctl.next_deadline() == 0.5
    assert ctl.tick(0.5) == [RdyUpdate("b", 0), RdyUpdate("c", 1)]
    assert ctl.tick(0.75) == [RdyUpdate("c", 0), RdyUpdate("a", 1)]


def test_a_holder_with_a_message_in_flight_keeps_its_turn() -> None:
    """An ordered partition: one message at a time, the next only after its FIN."""
    ctl = RdyController(1, rng=random.Random(1), fixed_rdy_one=True, idle_turn=0.25)
    for name in "abc":
        ctl.add_connection(name, 2500, 0.0)
    ctl.on_message("a", 0.1)
    assert ctl.tick(3.0) == []  # a slow handler: still "a"'s turn
    assert ctl.next_deadline() == 5.0
    ctl.on_message_done("a", 3.0)  # FIN; nsqd sends the next message after it
    assert ctl.next_deadline() == 3.25
    assert ctl.tick(3.2) == []
    assert as_dict(ctl.tick(3.25)) == {"a": 0, "b": 1}


def test_quick_turns_reach_every_connection_within_one_round() -> None:
    ctl = RdyController(2, rng=random.Random(7), idle_turn=0.25)
    names = [f"c{i}" for i in range(12)]
    for name in names:
        ctl.add_connection(name, 2500, 0.0)
    served = {cid for cid, count in rdys(ctl).items() if count}
    now = 0.0
    while served != set(names):
        now = ctl.next_deadline() or 0.0
        assert now <= 6 * 0.25, "a connection waited longer than one round"
        for update in ctl.tick(now):
            if update.count:
                served.add(update.conn_id)
        assert ctl.total_rdy == 2


# -- starvation, max_in_flight at run time --------------------------------------------------


def test_is_starved_when_in_flight_reaches_85_percent_of_rdy() -> None:
    ctl = primed(10, "a")
    assert not ctl.is_starved()
    for step in range(8):
        ctl.on_message("a", step)
    assert not ctl.is_starved()  # 8 < 8.5
    ctl.on_message("a", 9.0)
    assert ctl.is_starved()


def test_max_in_flight_zero_pauses_and_restoring_resumes() -> None:
    ctl = primed(9, "abc")
    assert as_dict(ctl.set_max_in_flight(0, 1.0)) == {"a": 0, "b": 0, "c": 0}
    assert ctl.next_deadline() is None
    assert as_dict(ctl.set_max_in_flight(30, 2.0)) == {"a": 10, "b": 10, "c": 10}
    with pytest.raises(ConfigError):
        ctl.set_max_in_flight(-1, 3.0)


def test_over_budget_the_longest_held_shares_give_way_first() -> None:
    ctl = primed(9, "abc")
    ctl.remove_connection("a", 1.0)
    ctl.add_connection("a", 2500, 2.0)  # "a" got its share last
    updates = ctl.set_max_in_flight(2, 3.0)
    assert rdys(ctl) == {"b": 0, "c": 1, "a": 1}
    assert updates[0] == RdyUpdate("b", 0)


# -- backoff hooks --------------------------------------------------------------------------


def test_backoff_zeroes_everything_then_tests_one_connection_then_restores() -> None:
    ctl = primed(9, "abc")
    assert as_dict(ctl.enter_backoff(1.0)) == {"a": 0, "b": 0, "c": 0}
    assert ctl.mode is RdyMode.BACKOFF
    test = ctl.backoff_test(2.0)
    assert len(test) == 1 and test[0].count == 1
    assert ctl.total_rdy == 1
    ctl.on_message(test[0].conn_id, 2.1)
    assert ctl.total_rdy == 1  # the test connection is not raised while testing
    assert as_dict(ctl.exit_backoff(3.0)) == {name: 3 for name in "abc"}


def test_backoff_test_picks_connections_at_random() -> None:
    chosen = set()
    for seed in range(20):
        ctl = primed(9, "abcd", seed=seed)
        ctl.enter_backoff(1.0)
        chosen.add(ctl.backoff_test(2.0)[0].conn_id)
    assert len(chosen) > 1


def test_test_rdy_moves_away_from_an_idle_connection() -> None:
    ctl = primed(9, "abc", seed=3)
    ctl.enter_backoff(1.0)
    holder = ctl.backoff_test(2.0)[0].conn_id
    moved = [u for t in (5.0, 10.0, 15.0) for u in ctl.tick(t)]
    assert RdyUpdate(holder, 0) in moved
    assert ctl.total_rdy == 1 and ctl.rdy(holder) == 0


def test_test_without_connections_starts_with_the_next_one() -> None:
    ctl = RdyController(9)
    ctl.enter_backoff(0.0)
    assert ctl.backoff_test(1.0) == []
    assert ctl.add_connection("a", 2500, 2.0) == [RdyUpdate("a", 1)]
    ctl.on_message("a", 2.1)
    assert ctl.rdy("a") == 1


def test_apply_backoff_dispatches_actions() -> None:
    ctl = primed(4, "ab")
    assert ctl.apply_backoff(None, 0.0) == []
    ctl.apply_backoff(BackoffAction.ENTER, 1.0)
    assert ctl.total_rdy == 0
    ctl.apply_backoff(BackoffAction.TEST, 2.0)
    assert ctl.total_rdy == 1
    ctl.apply_backoff(BackoffAction.EXIT, 3.0)
    assert rdys(ctl) == {"a": 2, "b": 2}


# -- ordered mode ---------------------------------------------------------------------------


def test_fixed_rdy_one_never_grants_more_than_one() -> None:
    ctl = primed(100, "abc", fixed_rdy_one=True)
    assert rdys(ctl) == {"a": 1, "b": 1, "c": 1}
    ctl.remove_connection("c", 1.0)
    assert rdys(ctl) == {"a": 1, "b": 1}
    ctl.set_max_in_flight(1, 2.0)
    assert ctl.total_rdy == 1


# -- rate cap -------------------------------------------------------------------------------


def test_rate_cap_bounds_the_open_window_and_fin_does_not_reopen_it() -> None:
    ctl = primed(100, "ab")
    assert as_dict(ctl.set_rate_cap(10, 1.0)) == {"a": 5, "b": 5}
    assert ctl.on_message("a", 1.1) == []  # window shrinks by itself
    assert ctl.rate_credit == 9
    assert ctl.on_message_done("a", 1.2) == [RdyUpdate("a", 4)]
    assert as_dict(ctl.set_rate_cap(None, 2.0)) == {"a": 50, "b": 50}


def test_the_connection_whose_fin_reopened_the_window_is_the_one_lowered() -> None:
    ctl = primed(100, "ab")
    assert as_dict(ctl.set_rate_cap(12, 1.0)) == {"a": 6, "b": 6}
    for _ in range(5):
        assert ctl.on_message("a", 1.1) == []
    # a: 5 in flight, 1 open; b: 6 open; credit 7. A FIN on "a" must not steal from "b".
    assert ctl.on_message_done("a", 1.2) == [RdyUpdate("a", 5)]
    assert ctl.rdy("b") == 6


def test_scarce_credit_goes_to_one_connection_and_moves_on_when_quiet() -> None:
    """A credit of 1 over four connections opens one window. One that stays quiet for its
    turn (nsqd pushes into an open window at once, so it has nothing to send) hands the
    credit to a connection that has not had it lately: each is tried in turn, and never
    more than the credit is open."""
    ctl = primed(100, "abcd", seed=2)
    updates = ctl.set_rate_cap(1, 1.0)
    holders = [cid for cid in ctl.connection_ids if ctl.rdy(cid) == 1]
    assert len(holders) == 1 and ctl.total_rdy == 1
    assert all(u.count in (0, 1) for u in updates)
    now = 1.0
    for _ in range(3):
        deadline = ctl.next_deadline()
        assert deadline is not None and deadline <= now + 0.25  # a turn, not the 10 s idle
        now = max(now, deadline)
        ctl.tick(now)
        [holder] = [cid for cid in ctl.connection_ids if ctl.rdy(cid) == 1]
        assert ctl.total_rdy == 1 and holder not in holders
        holders.append(holder)
    assert sorted(map(str, holders)) == list("abcd")


def test_rate_cap_and_max_in_flight_combine_as_minimum() -> None:
    ctl = primed(10, "ab")
    ctl.set_rate_cap(1000, 1.0)
    assert ctl.total_rdy == 10
    ctl.set_rate_cap(3, 2.0)
    assert ctl.total_rdy == 3


def test_spare_credit_is_taken_when_a_connection_leaves_probation() -> None:
    ctl = RdyController(10, rng=random.Random(0))
    ctl.add_connection("a", 2500, 0.0)
    ctl.set_rate_cap(8, 0.0)
    assert ctl.rdy("a") == 1  # on probation: 1 until the first message
    assert ctl.on_message("a", 0.1) == [RdyUpdate("a", 8)]  # 1 in flight + 7 credit left


# -- input handling -------------------------------------------------------------------------


def test_events_for_unknown_connections_are_ignored() -> None:
    ctl = primed(4, "a")
    assert ctl.on_message("zz", 1.0) == []
    assert ctl.on_message_done("zz", 1.0) == []
    assert ctl.on_message_done("a", 1.0) == []  # nothing in flight: stays at 0
    assert ctl.in_flight("a") == 0


def test_bad_configuration_is_rejected() -> None:
    with pytest.raises(ConfigError):
        RdyController(-1)
    with pytest.raises(ConfigError):
        RdyController(1, redistribute_interval=0)
    with pytest.raises(ConfigError):
        RdyController(1, low_rdy_idle_timeout=-1)
    with pytest.raises(ConfigError):
        RdyController(1, idle_turn=0)
    ctl = RdyController(1)
    with pytest.raises(ConfigError):
        ctl.add_connection("a", 0, 0.0)
    with pytest.raises(ConfigError):
        ctl.set_rate_cap(-1, 0.0)
    ctl.add_connection("a", 10, 0.0)
    with pytest.raises(ValueError):
        ctl.add_connection("a", 10, 0.0)


# -- property test --------------------------------------------------------------------------


class RdyMachine(RuleBasedStateMachine):
    """Random event sequences; the invariants hold after every step."""

    ctl: RdyController

    @initialize(
        max_in_flight=st.integers(0, 5000),
        fixed=st.booleans(),
        seed=st.integers(0, 2**16),
    )
    def setup(self, max_in_flight: int, fixed: bool, seed: int) -> None:
        self.ctl = RdyController(max_in_flight, rng=random.Random(seed), fixed_rdy_one=fixed)
        self.fixed = fixed
        self.now = 0.0
        self.mirror: dict[int, int] = {}
        self.caps: dict[int, int] = {}
        self.primed: set[int] = set()
        self.next_id = 0

    def apply(self, updates: list[RdyUpdate]) -> None:
        running = before = sum(self.mirror.values())
        for update in updates:
            assert isinstance(update.conn_id, int)  # this machine numbers its connections
            old = self.mirror.get(update.conn_id, 0)
            assert update.count != old, "an update must change the count"
            running += update.count - old
            assert running <= max(before, self.ctl.max_in_flight), "ordering broke the budget"
            self.mirror[update.conn_id] = update.count

    def pick(self, index: int) -> int:
        ids = sorted(self.mirror)
        return ids[index % len(ids)]

    @rule(count=st.integers(1, 60), cap=st.integers(1, 3000))
    def add(self, count: int, cap: int) -> None:
        for _ in range(count):
            if len(self.mirror) >= 200:
                return
            cid = self.next_id
            self.next_id += 1
            self.mirror[cid] = 0
            self.caps[cid] = cap
            self.apply(self.ctl.add_connection(cid, cap, self.now))

    @precondition(lambda self: self.mirror)
    @rule(index=st.integers(0, 10**6))
    def remove(self, index: int) -> None:
        cid = self.pick(index)
        del self.mirror[cid]
        self.primed.discard(cid)
        self.apply(self.ctl.remove_connection(cid, self.now))

    @precondition(lambda self: self.mirror)
    @rule(index=st.integers(0, 10**6), count=st.integers(1, 8))
    def messages(self, index: int, count: int) -> None:
        cid = self.pick(index)
        self.primed.add(cid)
        for _ in range(count):
            self.apply(self.ctl.on_message(cid, self.now))

    @precondition(lambda self: self.mirror)
    @rule(index=st.integers(0, 10**6), count=st.integers(1, 8))
    def done(self, index: int, count: int) -> None:
        cid = self.pick(index)
        for _ in range(min(count, self.ctl.in_flight(cid))):
            self.apply(self.ctl.on_message_done(cid, self.now))

    @precondition(lambda self: self.mirror)
    @rule(index=st.integers(0, 10**6), count=st.integers(1, 3000))
    def read_of_messages(self, index: int, count: int) -> None:
        """One read bringing ``count`` messages (how the consumer reports them)."""
        cid = self.pick(index)
        self.primed.add(cid)
        self.apply(self.ctl.on_messages(cid, count, self.now))

    @precondition(lambda self: self.mirror)
    @rule(index=st.integers(0, 10**6), count=st.integers(1, 3000))
    def answers_in_one_write(self, index: int, count: int) -> None:
        cid = self.pick(index)
        count = min(count, self.ctl.in_flight(cid))
        if count:
            self.apply(self.ctl.on_messages_done(cid, count, self.now))

    @rule(seconds=st.floats(0, 40))
    def wait_and_tick(self, seconds: float) -> None:
        self.now += seconds
        self.apply(self.ctl.tick(self.now))

    @rule(max_in_flight=st.integers(0, 5000))
    def set_max_in_flight(self, max_in_flight: int) -> None:
        self.apply(self.ctl.set_max_in_flight(max_in_flight, self.now))

    @rule(total=st.none() | st.integers(0, 6000))
    def set_rate_cap(self, total: int | None) -> None:
        self.apply(self.ctl.set_rate_cap(total, self.now))

    @rule(action=st.sampled_from(BackoffAction))
    def backoff(self, action: BackoffAction) -> None:
        self.apply(self.ctl.apply_backoff(action, self.now))

    @invariant()
    def budget_and_caps_hold(self) -> None:
        if not hasattr(self, "ctl"):
            return
        ctl = self.ctl
        assert self.mirror == {cid: ctl.rdy(cid) for cid in ctl.connection_ids}
        assert ctl.total_rdy <= ctl.budget <= ctl.max_in_flight
        for cid, count in self.mirror.items():
            assert 0 <= count <= (1 if self.fixed else self.caps[cid])
        rotating = 0 < ctl.budget < len(self.mirror) or ctl.rate_credit is not None
        assert (ctl.next_deadline() is not None) == (bool(self.mirror) and rotating)
        if ctl.rate_credit is not None:
            opened = sum(max(0, ctl.rdy(c) - ctl.in_flight(c)) for c in ctl.connection_ids)
            assert opened <= ctl.rate_credit

    @invariant()
    def no_budget_is_left_idle(self) -> None:
        if not hasattr(self, "ctl") or not self.mirror or self.ctl.rate_credit is not None:
            return
        ctl, n = self.ctl, len(self.mirror)
        if ctl.budget < n:
            assert ctl.total_rdy == ctl.budget
            return
        per = ctl.budget // n
        for cid, count in self.mirror.items():
            share = min(per, 1 if self.fixed else self.caps[cid])
            assert count == (share if cid in self.primed else min(share, 1))


TestRdyMachine = RdyMachine.TestCase
TestRdyMachine.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
