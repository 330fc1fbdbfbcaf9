"""RDY going out: :class:`FlowControl` owns the sans-IO flow machines of
:mod:`nsqctl.flow` (RDY distribution, backoff, rate limit), feeds them the consumer's
events, sends the RDY updates they return on the right connection, and runs their timers
in one loop. It is the one place RDY is sent from, so nothing else can reopen a window
the machines closed (a stopping consumer relies on that).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from nsqctl.flow import BackoffController, ConnId, RateLimiter, RdyController, RdyUpdate

if TYPE_CHECKING:
    from nsqctl.connection import Connection
    from nsqctl.flow import BackoffAction

_monotonic = time.monotonic


class FlowControl:
    """RDY, backoff and rate limit of one consumer, and the connections RDY goes to.

    Connections are known by ``id(conn)``, the id the flow machines use. The delivery path
    feeds reads and answers to :attr:`rdy` itself (its hot path, without a wrapper call)
    and hands the updates back to :meth:`apply`: RDY leaves only from here.
    """

    def __init__(
        self, rdy: RdyController, backoff: BackoffController, limiter: RateLimiter | None
    ) -> None:
        self.rdy = rdy
        self.backoff = backoff
        self.limiter = limiter
        self._conns: dict[ConnId, Connection] = {}
        self.wake = asyncio.Event()  # a change that moves the loop's next deadline
        self._running = True

    # -- connections ----------------------------------------------------------------------

    def add_connection(self, conn: Connection, now: float) -> None:
        self._conns[id(conn)] = conn
        self.apply(self.rdy.add_connection(id(conn), conn.max_rdy_count, now))
        # even without an RDY change (a connection beyond the budget starts at 0), the
        # count of connections can start RDY rotation and move the loop's next deadline
        self.wake.set()

    def expect_connections(self, count: int) -> None:
        """How many connections are held or being made (see
        :meth:`RdyController.expect_connections`)."""
        self.apply(self.rdy.expect_connections(count, _monotonic()))

    def remove_connection(self, conn: Connection, now: float) -> None:
        self._conns.pop(id(conn), None)
        with contextlib.suppress(KeyError):  # never added (closed while subscribing)
            self.apply(self.rdy.remove_connection(id(conn), now))
        self.wake.set()

    def rdy_of(self, conn: Connection) -> int:
        return self.rdy.rdy(id(conn))

    def apply(self, updates: Sequence[RdyUpdate]) -> None:
        """Send each update on its connection (one that is gone or closing is skipped)."""
        if not updates:
            return
        conns = self._conns
        for update in updates:
            conn = conns.get(update.conn_id)
            if conn is not None and conn.is_open:
                conn.rdy(update.count)
        self.wake.set()

    # -- answers of the delivery path (reads and answers go to ``rdy`` directly) ----------

    def succeeded(self, epochs: Sequence[int]) -> None:
        """Messages handled well (only called while backing off: at level 0 a success
        changes nothing)."""
        backoff = self.backoff
        for epoch in epochs:
            now = _monotonic()
            self._backoff_action(backoff.on_success(now, epoch), now)

    def failed(self, epoch: int, *, backoff: bool) -> None:
        """A message given back: a failure counts toward backoff, a neutral REQ does not."""
        now = _monotonic()
        if backoff:
            self._backoff_action(self.backoff.on_failure(now, epoch), now)
        else:
            self._backoff_action(self.backoff.on_neutral(now, epoch), now)

    def _backoff_action(self, action: BackoffAction | None, now: float) -> None:
        if action is not None:
            self.apply(self.rdy.apply_backoff(action, now))
            self.wake.set()

    # -- settings -------------------------------------------------------------------------

    def set_max_in_flight(self, value: int, now: float) -> None:
        self.apply(self.rdy.set_max_in_flight(value, now))

    def close_window(self, now: float) -> None:
        """RDY 0 on every connection, through the controller so that no timer (rate
        refills, rotation) opens it again, and the loop ends."""
        self.set_max_in_flight(0, now)
        for conn in self._conns.values():
            if conn.is_open:  # also those the controller had at 0 already: cheap, certain
                conn.rdy(0)
        self._running = False
        self.wake.set()

    def start(self, now: float) -> None:
        if self.limiter is not None:
            self.apply(self.rdy.set_rate_cap(self.limiter.allowance(now), now))

    # -- timers ---------------------------------------------------------------------------

    async def run(self, tick: Callable[[float], None]) -> None:
        """Timers of the flow machines (RDY rotation, backoff windows, rate refills), and
        ``tick`` (the failover watch) at least once a second, until :meth:`close_window`."""
        rdy, backoff, limiter, wake = self.rdy, self.backoff, self.limiter, self.wake
        while self._running:
            now = _monotonic()
            deadlines = [
                d
                for d in (
                    rdy.next_deadline(),
                    backoff.next_deadline(),
                    limiter.next_deadline() if limiter else None,
                )
                if d is not None
            ]
            delay = min(deadlines) - now if deadlines else 1.0
            wake.clear()
            if delay > 0:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
                # lands just after the event is set (CPython gh-86296), hanging stop().
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(delay, 1.0)):
                        await wake.wait()
            if not self._running:
                return
            now = _monotonic()
            tick(now)
            self._backoff_action(backoff.tick(now), now)
            if limiter is not None:
                self.apply(rdy.set_rate_cap(limiter.allowance(now), now))
            self.apply(rdy.tick(now))
