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
import heapq
from collections.abc import Callable


class _Wakeups:
    """The tasks waiting for their ticket's turn, one future per ticket, so a change wakes
    only the tickets it made ready.

    Waking every waiter on every change (one shared event) cost a pass over all waiters
    per settled ticket, each re-checking its condition: quadratic in the waiters per
    change. A route that stalled for a leader move gathered a thousand waiting batches,
    and then draining them took longer than new ones arrived: the publish spun at full CPU
    and never caught up.
    """

    def __init__(self) -> None:
        self._futures: dict[int, asyncio.Future[None]] = {}

    async def until(self, ticket: int, ready: Callable[[], bool]) -> bool:
        """Wait until ``ready()``, re-checked whenever ``ticket`` is woken; True when it
        had to wait."""
        waited = False
        while not ready():
            waited = True
            fut = self._futures.get(ticket)
            if fut is None:
                fut = asyncio.get_running_loop().create_future()
                self._futures[ticket] = fut
            try:
                await fut
            finally:
                if self._futures.get(ticket) is fut:
                    del self._futures[ticket]
        return waited

    def wake(self, ticket: int) -> None:
        fut = self._futures.pop(ticket, None)
        if fut is not None and not fut.done():
            fut.set_result(None)


class RouteOrder:
    """The tickets of one route that are not settled, sent one at a time in ticket order."""

    def __init__(self) -> None:
        self._pending: set[int] = set()
        self._heap: list[int] = []  # the pending tickets, and settled ones not yet popped
        self._highest = -1  # the highest ticket registered
        self._recover_through = -1  # tickets <= this were in flight at the last failure
        self._wakeups = _Wakeups()

    def _head(self) -> int | None:
        """The oldest unsettled ticket (settled ones leave the heap lazily, when on top)."""
        heap = self._heap
        while heap and heap[0] not in self._pending:
            heapq.heappop(heap)
        return heap[0] if heap else None

    @property
    def recovering(self) -> bool:
        """True while a ticket issued before the last failure is still unsettled."""
        head = self._head()
        return head is not None and head <= self._recover_through

    @property
    def idle(self) -> bool:
        return not self._pending

    def describe(self) -> str:
        """For debug logs: the oldest unsettled tickets and the recovery bound."""
        head = ",".join(str(t) for t in heapq.nsmallest(4, self._pending))
        more = f" (+{len(self._pending) - 4})" if len(self._pending) > 4 else ""
        state = f"recovering through {self._recover_through}" if self.recovering else "healthy"
        return f"pending {head or '-'}{more}, {state}"

    def register(self, ticket: int) -> None:
        if ticket in self._pending:
            return
        self._pending.add(ticket)
        heapq.heappush(self._heap, ticket)
        self._highest = max(self._highest, ticket)

    def may_send(self, ticket: int) -> bool:
        """Only the oldest unsettled ticket of the route goes out (stop-and-wait)."""
        head = self._head()
        return head is None or ticket == head

    def failed(self, ticket: int) -> None:
        """A send of ``ticket`` failed: the route recovers until everything registered so far
        is settled (stated in debug logs while later tickets wait). Nobody's turn changes."""
        self._recover_through = max(self._recover_through, self._highest)

    def settle(self, ticket: int) -> None:
        """``ticket`` got OK, gave up for good, or was cancelled: the next oldest ticket,
        and only it, may go."""
        if ticket not in self._pending:
            return
        self._pending.discard(ticket)
        head = self._head()
        if head is not None:
            self._wakeups.wake(head)

    async def turn(self, ticket: int) -> bool:
        """Wait until ``ticket`` may be sent; True when it had to wait (then the target it
        chose before waiting may be a dead leader: choose again)."""
        return await self._wakeups.until(ticket, lambda: self.may_send(ticket))


class TicketLine:
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
        self._wakeups = _Wakeups()

    def take(self) -> int:
        ticket = self._issued
        self._issued += 1
        return ticket

    async def turn(self, ticket: int) -> None:
        """Wait until every earlier ticket has passed."""
        await self._wakeups.until(ticket, lambda: self._next >= ticket)

    def passed(self, ticket: int) -> None:
        """``ticket`` registered on its route, or left without one (an error)."""
        if ticket < self._next or ticket in self._passed:
            return
        self._passed.add(ticket)
        before = self._next
        while self._next in self._passed:
            self._passed.discard(self._next)
            self._next += 1
        # Tickets up to ``before`` never waited; those after it up to the new ``_next``
        # are ready now (all but the last have passed, so only it can still be waiting).
        for ready in range(before + 1, self._next + 1):
            self._wakeups.wake(ready)
