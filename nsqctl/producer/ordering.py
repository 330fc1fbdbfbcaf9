"""Send order per route, for keyed and partition-pinned publishes.

A key's messages must be stored in call order. Pipelining them (several in flight on one
connection) cannot promise that: nsqd answers some errors without closing the
connection (youzan's NOT_WRITABLE while a partition's writes are switched off, a failed
store), and then an earlier batch can fail while a later one, already sent, is stored.
The retry of the earlier batch would land after it, and nothing can take the later one
back.

So every keyed publish holds a ticket (its call order), and a route (a partition on the
redesign, a node on the original family) sends its tickets stop-and-wait: a ticket goes
out only when every earlier ticket of the route is settled (OK, given up, cancelled).
Routes still run side by side, and unkeyed publishes (which promise no order) pipeline
freely. ``failed`` remembers the tickets a failure caught, for the debug log. This is a
small state machine plus an asyncio wait, testable without sockets.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class _Changes:
    """Waiting for a condition on a small state machine: one event, set and replaced on
    every change, that each waiter re-checks its condition after."""

    _changed: asyncio.Event | None = None

    async def _until(self, ready: Callable[[], bool]) -> bool:
        """Wait until ``ready()``; True when it had to wait."""
        waited = False
        while not ready():
            waited = True
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()
        return waited

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None


class RouteOrder(_Changes):
    """The tickets of one route that are not settled, sent one at a time in ticket order."""

    def __init__(self) -> None:
        self._pending: set[int] = set()
        self._highest = -1  # the highest ticket registered
        self._recover_through = -1  # tickets <= this were in flight at the last failure

    @property
    def recovering(self) -> bool:
        """True while a ticket issued before the last failure is still unsettled."""
        return bool(self._pending) and min(self._pending) <= self._recover_through

    @property
    def idle(self) -> bool:
        return not self._pending

    def describe(self) -> str:
        """For debug logs: the oldest unsettled tickets and the recovery bound."""
        head = ",".join(str(t) for t in sorted(self._pending)[:4])
        more = f" (+{len(self._pending) - 4})" if len(self._pending) > 4 else ""
        state = f"recovering through {self._recover_through}" if self.recovering else "healthy"
        return f"pending {head or '-'}{more}, {state}"

    def register(self, ticket: int) -> None:
        self._pending.add(ticket)
        self._highest = max(self._highest, ticket)

    def may_send(self, ticket: int) -> bool:
        """Only the oldest unsettled ticket of the route goes out (stop-and-wait)."""
        return not self._pending or ticket == min(self._pending)

    def failed(self, ticket: int) -> None:
        """A send of ``ticket`` failed: the route recovers until everything registered so far
        is settled (stated in debug logs while later tickets wait)."""
        self._recover_through = max(self._recover_through, self._highest)
        self._wake()

    def settle(self, ticket: int) -> None:
        """``ticket`` got OK, gave up for good, or was cancelled."""
        self._pending.discard(ticket)
        self._wake()

    async def turn(self, ticket: int) -> bool:
        """Wait until ``ticket`` may be sent; True when it had to wait (then the target it
        chose before waiting may be a dead leader: choose again)."""
        return await self._until(lambda: self.may_send(ticket))


class TicketLine(_Changes):
    """Hands out one topic's tickets and lets them register on their routes in that order.

    A keyed publish learns its route (the partition) only after a topology lookup, an
    await. Without this line a later publish that found the topology cached could
    register and send while an earlier one still waited for the lookup, and the two would
    reach the partition out of call order.
    """

    def __init__(self) -> None:
        self._issued = 0
        self._next = 0  # the oldest ticket that has not passed the line
        self._passed: set[int] = set()

    def take(self) -> int:
        ticket = self._issued
        self._issued += 1
        return ticket

    async def turn(self, ticket: int) -> None:
        """Wait until every earlier ticket has passed."""
        await self._until(lambda: self._next >= ticket)

    def passed(self, ticket: int) -> None:
        """``ticket`` registered on its route, or left without one (an error)."""
        if ticket < self._next or ticket in self._passed:
            return
        self._passed.add(ticket)
        while self._next in self._passed:
            self._passed.discard(self._next)
            self._next += 1
        self._wake()
