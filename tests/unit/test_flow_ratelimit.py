"""RateLimiter unit tests, plus a deterministic consumer/server simulation of all three machines.

The simulation lives here, not in the library: it models nsqd the way both server families
behave (push while ``in_flight < RDY``, see IsReadyForMessages in nsqd) with a fixed one-way
latency, and drives RdyController, BackoffController and RateLimiter exactly as the asyncio
consumer is meant to: RDY updates are written before the FIN that caused them, timers fire at
``next_deadline()``.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

import pytest

from nsqctl.errors import ConfigError
from nsqctl.flow import BackoffController, RateLimiter, RdyController, RdyUpdate

# -- RateLimiter ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "burst", "quantum"),
    [(1, 1, 1), (10, 1, 1), (100, 4, 2), (2000, 80, 40), (100_000, 4000, 2000)],
)
def test_burst_and_quantum_scale_with_the_rate(rate: float, burst: int, quantum: int) -> None:
    limiter = RateLimiter(rate, 0.0)
    assert (limiter.burst, limiter.quantum) == (burst, quantum)
    assert limiter.allowance(0.0) == burst


def test_messages_spend_tokens_and_time_refills_them() -> None:
    limiter = RateLimiter(100, 0.0)
    for _ in range(4):
        limiter.on_message(0.0)
    assert limiter.allowance(0.0) == 0
    assert limiter.allowance(0.015) == 1
    assert limiter.allowance(10.0) == 4  # never more than the burst


def test_low_rate_deadline_is_when_the_next_token_is_due() -> None:
    limiter = RateLimiter(2, 0.0)
    assert limiter.next_deadline() is None  # full bucket: nothing to wait for
    limiter.on_message(0.0)
    assert limiter.next_deadline() == pytest.approx(0.5)
    assert limiter.allowance(0.5) == 1


def test_high_rate_deadlines_come_every_refill_interval() -> None:
    limiter = RateLimiter(100_000, 0.0, refill_interval=0.02)
    for _ in range(4000):
        limiter.on_message(0.0)
    deadline = limiter.next_deadline()
    assert deadline is not None and deadline == pytest.approx(0.02)
    assert limiter.allowance(deadline) == 2000


def test_messages_beyond_the_allowance_become_debt() -> None:
    limiter = RateLimiter(1, 0.0)
    limiter.on_message(0.0)
    limiter.on_message(0.0)  # arrived anyway (was on the wire)
    assert limiter.allowance(1.5) == 0
    assert limiter.allowance(2.0) == 1


def test_max_burst_bounds_the_bucket() -> None:
    limiter = RateLimiter(100_000, 0.0, max_burst=500)
    assert limiter.burst == 500 and limiter.quantum == 500
    assert limiter.allowance(5.0) == 500


def test_set_rate_keeps_tokens_within_the_new_burst() -> None:
    limiter = RateLimiter(100_000, 0.0)
    limiter.set_rate(10, 1.0)
    assert limiter.max_rate == 10
    assert limiter.allowance(1.0) == 1
    with pytest.raises(ConfigError):
        limiter.set_rate(0, 2.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_rate": 0},
        {"max_rate": -5},
        {"max_rate": math.inf},
        {"max_rate": math.nan},
        {"max_rate": 1, "refill_interval": 0},
        {"max_rate": 1, "max_burst": 0},
    ],
)
def test_bad_configuration_is_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        RateLimiter(now=0.0, **kwargs)  # type: ignore[arg-type]


# -- simulation -----------------------------------------------------------------------------


@dataclass
class ServerConn:
    queue: float
    rdy: int = 0
    in_flight: int = 0


class FlowSim:
    """A consumer with the three machines against fake nsqds, on a simulated clock."""

    def __init__(
        self,
        queues: dict[str, float],
        *,
        max_in_flight: int,
        rate: float | None = None,
        latency: float = 0.001,
        work: float = 0.0,
        seed: int = 0,
        fails: Iterable[int] = (),
        batched: bool = False,
        **rdy_options: float,
    ) -> None:
        """``batched``: report each delivery and each set of answers in one call, as the
        consumer does per read, instead of one call per message."""
        self.batched = batched
        self.now = 0.0
        self.max_in_flight = max_in_flight
        self.latency, self.work = latency, work
        self.server = {cid: ServerConn(queue) for cid, queue in queues.items()}
        self.rdy = RdyController(max_in_flight, rng=random.Random(seed), **rdy_options)  # type: ignore[arg-type]
        self.backoff = BackoffController()
        self.limiter = RateLimiter(rate, 0.0, max_burst=max_in_flight) if rate else None
        self.fails = set(fails)
        self.received: Counter[str] = Counter()
        self.per_second: Counter[int] = Counter()
        self.arrival_times: list[float] = []
        self.commands: list[tuple[float, RdyUpdate]] = []
        self.max_server_total = 0
        self._sent: dict[Hashable, int] = dict.fromkeys(queues, 0)
        self._events: list[tuple[float, int, str, tuple[object, ...]]] = []
        self._seq = itertools.count()
        self._arrivals = 0
        if self.limiter is not None:  # the cap goes in before the first connection
            self._send(self.rdy.set_rate_cap(self.limiter.allowance(0.0), 0.0))
        for cid in queues:
            self._send(self.rdy.add_connection(cid, 2500, 0.0))

    def run(self, until: float, stop: Callable[[], bool] = lambda: False) -> None:
        for _ in range(10_000_000):
            timers = [(d, fn) for d, fn in self._timers() if d is not None]
            t_timer = min((d for d, _ in timers), default=math.inf)
            t_event = self._events[0][0] if self._events else math.inf
            if stop():
                return
            if min(t_timer, t_event) > until:
                self.now = until
                return
            self.now = max(self.now, min(t_timer, t_event))
            if t_timer <= t_event:
                for deadline, fire in timers:
                    if deadline <= self.now:
                        fire()
            else:
                _, _, kind, args = heapq.heappop(self._events)
                getattr(self, f"_on_{kind}")(*args)
        raise AssertionError("simulation did not make progress")

    # timers the consumer's IO loop would arm
    def _timers(self) -> list[tuple[float | None, Callable[[], None]]]:
        timers: list[tuple[float | None, Callable[[], None]]] = [
            (self.rdy.next_deadline(), lambda: self._send(self.rdy.tick(self.now))),
            (self.backoff.next_deadline(), self._backoff_tick),
        ]
        if self.limiter is not None:
            timers.append((self.limiter.next_deadline(), self._refill))
        return timers

    def _backoff_tick(self) -> None:
        self._send(self.rdy.apply_backoff(self.backoff.tick(self.now), self.now))

    def _refill(self) -> None:
        assert self.limiter is not None
        self._send(self.rdy.set_rate_cap(self.limiter.allowance(self.now), self.now))

    def _push(self, delay: float, kind: str, *args: object) -> None:
        heapq.heappush(self._events, (self.now + delay, next(self._seq), kind, args))

    def _send(self, updates: list[RdyUpdate]) -> None:
        """Write RDY commands, keeping the last per connection (decreases first)."""
        assert self.rdy.total_rdy <= self.max_in_flight
        final = {u.conn_id: u.count for u in updates}
        for cid in sorted(final, key=lambda c: final[c] - self._sent[c]):
            self._sent[cid] = final[cid]
            self.commands.append((self.now, RdyUpdate(cid, final[cid])))
            self._push(self.latency, "rdy", cid, final[cid])

    # server side
    def _on_rdy(self, cid: str, count: int) -> None:
        self.server[cid].rdy = count
        self.max_server_total = max(self.max_server_total, sum(s.rdy for s in self.server.values()))
        self._pump(cid)

    def _on_fin(self, cid: str, count: int) -> None:
        self.server[cid].in_flight -= count
        self._pump(cid)

    def _pump(self, cid: str) -> None:
        conn = self.server[cid]
        count = int(min(conn.queue, conn.rdy - conn.in_flight))
        if count > 0:
            conn.queue -= count
            conn.in_flight += count
            self._push(self.latency, "msg", cid, count)

    # client side
    def _on_msg(self, cid: str, count: int) -> None:
        updates, tags = [], []
        if self.batched:
            if self.limiter is not None:
                self.limiter.on_messages(count, self.now)
            updates += self.rdy.on_messages(cid, count, self.now)
        for _ in range(count):
            if not self.batched:
                if self.limiter is not None:
                    self.limiter.on_message(self.now)
                updates += self.rdy.on_message(cid, self.now)
            tags.append((self.backoff.epoch, self._arrivals in self.fails))
            self._arrivals += 1
        self.received[cid] += count
        self.per_second[int(self.now)] += count
        self.arrival_times.append(self.now)
        self._send(updates)
        self._push(self.work, "done", cid, tags)

    def _on_done(self, cid: str, tags: list[tuple[int, bool]]) -> None:
        updates = []
        if self.batched:
            updates += self.rdy.on_messages_done(cid, len(tags), self.now)
        for epoch, failed in tags:
            if not self.batched:
                updates += self.rdy.on_message_done(cid, self.now)
            outcome = self.backoff.on_failure if failed else self.backoff.on_success
            updates += self.rdy.apply_backoff(outcome(self.now, epoch), self.now)
        self._send(updates)  # RDY goes out before the FIN
        self._push(self.latency, "fin", cid, len(tags))


ENDLESS = math.inf


@pytest.fixture(params=[False, True], ids=["per-message", "batched"])
def batched(request: pytest.FixtureRequest) -> bool:
    """Every simulation runs with the per-message calls and with the consumer's batches."""
    return bool(request.param)


@pytest.mark.parametrize(("rate", "seconds"), [(1, 30), (100, 10), (2000, 5), (100_000, 2)])
def test_rate_limit_holds_every_simulated_second(rate: int, seconds: int, batched: bool) -> None:
    sim = FlowSim(
        {f"n{i}": ENDLESS for i in range(4)}, max_in_flight=2500, rate=rate, batched=batched
    )
    sim.run(float(seconds))
    counts = [sim.per_second[s] for s in range(seconds)]
    assert max(counts) <= rate * 1.1, counts
    assert sum(counts) / seconds >= rate * 0.8, counts
    assert sim.max_server_total <= 2500
    assert all(sim.received[cid] > 0 for cid in sim.server)


def test_without_a_rate_limit_flow_is_bound_by_max_in_flight_only(batched: bool) -> None:
    sim = FlowSim({"a": ENDLESS, "b": ENDLESS}, max_in_flight=10, work=0.01, batched=batched)
    sim.run(1.0)
    # two windows of 5, each turning over every 12 ms (work + FIN + push latency)
    assert 700 <= sum(sim.received.values()) <= 1000
    assert sim.max_server_total == 10


def test_every_connection_is_served_when_max_in_flight_is_below_connections(batched: bool) -> None:
    sim = FlowSim(
        {f"n{i}": ENDLESS for i in range(4)}, max_in_flight=2, work=0.01, seed=1, batched=batched
    )
    sim.run(120.0)
    assert set(sim.received) == set(sim.server)
    assert sim.max_server_total <= 2


def test_a_hundred_partitions_with_max_in_flight_three_all_drain(batched: bool) -> None:
    queues = {f"p{i}": 5.0 for i in range(100)}
    sim = FlowSim(queues, max_in_flight=3, work=0.01, seed=4, batched=batched)
    sim.run(20_000.0, stop=lambda: sum(sim.received.values()) == 500)
    assert all(sim.received[cid] == 5 for cid in queues)
    assert sim.now < 20_000.0
    assert sim.max_server_total <= 3


def test_backoff_is_rdy_zero_everywhere_then_rdy_one_on_one_connection(batched: bool) -> None:
    sim = FlowSim(
        {c: ENDLESS for c in "abc"}, max_in_flight=30, work=0.01, fails={40}, batched=batched
    )
    sim.run(5.0)
    by_time: dict[float, dict[object, int]] = {}
    for at, update in sim.commands:
        by_time.setdefault(at, {})[update.conn_id] = update.count
    times = sorted(by_time)
    stop = next(t for t in times if by_time[t] == {"a": 0, "b": 0, "c": 0})
    after = [t for t in times if t > stop]
    test_at = after[0]
    assert test_at == pytest.approx(stop + 1.0)  # one backoff window at level 1
    assert list(by_time[test_at].values()) == [1]
    resumed = by_time[after[1]]
    assert resumed == {"a": 10, "b": 10, "c": 10}
    quiet = [t for t in sim.arrival_times if stop + 0.01 < t < test_at]
    assert quiet == []  # nothing flows during the window
    assert sim.max_server_total <= 30


def test_rate_limit_and_rotation_together_stay_within_budget_and_rate(batched: bool) -> None:
    queues = {f"p{i}": ENDLESS for i in range(10)}
    sim = FlowSim(queues, max_in_flight=3, rate=50, work=0.005, seed=9, batched=batched)
    sim.run(300.0)
    counts = [sim.per_second[s] for s in range(300)]
    assert max(counts) <= 55
    assert sum(counts) / 300 >= 40
    assert sim.max_server_total <= 3
    assert len(sim.received) == 10  # rotation reached every partition


@pytest.mark.parametrize("empty", [1, 2])
def test_a_rate_cap_does_not_sit_on_empty_partitions(empty: int, batched: bool) -> None:
    """A low rate over three partitions, some of them empty: the little credit there is
    moves off a window nothing arrives on (nsqd pushes at once into an open window, so a
    quiet one is empty) within a turn, and the rate is reached from the partitions that
    have messages. It sat on an empty partition until the idle timeout (10 s), so a tail
    at 20/s printed about one message every few seconds."""
    queues = {f"p{i}": (0.0 if i < empty else ENDLESS) for i in range(3)}
    sim = FlowSim(queues, max_in_flight=200, rate=20, work=0.001, seed=3, batched=batched)
    sim.run(20.0)
    counts = [sim.per_second[s] for s in range(20)]
    assert max(counts) <= 22, counts
    assert sum(counts) / 20 >= 16, counts
    # moving the credit is no storm of RDYs: about what a capped flow sends anyway (a
    # lowering as each message spends the credit, a raise as the refill comes)
    received = sum(sim.received.values())
    assert len(sim.commands) <= 2 * received + 20, (len(sim.commands), received)


@pytest.mark.parametrize("partitions", [2, 8])
def test_a_rate_capped_consumer_of_an_idle_topic_sends_no_stream_of_rdy(
    partitions: int, batched: bool
) -> None:
    """Nothing to read anywhere: once every partition gave the credit up for want of
    messages, it stays put until one may be tried again (the idle timeout), so an idle
    `tail --rate` sends a few RDY per idle timeout, not one every turn; and no timer
    comes due again at the instant it fired (a loop that would not yield)."""
    sim = FlowSim(
        {f"p{i}": 0.0 for i in range(partitions)}, max_in_flight=200, rate=20, batched=batched
    )
    fired: Counter[float] = Counter()
    tick = sim.rdy.tick

    def counted(now: float) -> list[RdyUpdate]:
        fired[now] += 1
        return tick(now)

    sim.rdy.tick = counted  # type: ignore[method-assign]
    sim.run(60.0)
    assert len(sim.commands) <= 4 * partitions * 60 / 10, len(sim.commands)
    assert max(fired.values()) <= 2, fired.most_common(3)
