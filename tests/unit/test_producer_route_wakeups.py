"""A settled ticket wakes only the ticket whose turn it makes, not every waiter.

The soak's keyed ``pub`` stopped publishing after a leader move: each settle woke every
batch waiting on the route, and each re-checked its turn over all pending tickets, so a
route with a thousand waiting batches drained slower than new ones came. Counting the
turn checks catches that without timing anything.
"""

from __future__ import annotations

import asyncio

from nsqctl.producer.ordering import RouteOrder, TicketLine

WAITERS = 300


class CountingOrder(RouteOrder):
    """A route that counts how often a ticket's turn is checked."""

    checks = 0

    def may_send(self, ticket: int) -> bool:
        self.checks += 1
        return super().may_send(ticket)


def test_draining_a_route_checks_each_waiting_ticket_a_bounded_number_of_times() -> None:
    async def run() -> tuple[list[int], int]:
        order = CountingOrder()
        for t in range(WAITERS):
            order.register(t)
        order.failed(0)
        sent: list[int] = []

        async def sender(t: int) -> None:
            await order.turn(t)
            sent.append(t)
            await asyncio.sleep(0)  # the OK comes later, as on a socket
            order.settle(t)

        await asyncio.gather(*(sender(t) for t in reversed(range(WAITERS))))
        return sent, order.checks

    sent, checks = asyncio.run(run())
    assert sent == list(range(WAITERS))
    assert checks <= 3 * WAITERS, checks  # waking all waiters per settle: ~WAITERS**2 / 2


def test_a_ticket_left_out_of_turn_order_still_wakes_the_next() -> None:
    """A batch cancelled while it waits (pub abandoning its window) gives up its place:
    the ticket after it goes when the one before settles."""

    async def run() -> list[int]:
        order = RouteOrder()
        for t in range(3):
            order.register(t)
        sent: list[int] = []

        async def sender(t: int) -> None:
            await order.turn(t)
            sent.append(t)
            order.settle(t)

        middle = asyncio.create_task(sender(1))
        last = asyncio.create_task(sender(2))
        await asyncio.sleep(0)
        middle.cancel()
        await asyncio.gather(middle, return_exceptions=True)
        order.settle(1)  # what RetryLoop.end does for a cancelled call
        assert not last.done()
        order.settle(0)
        await last
        return sent

    assert asyncio.run(run()) == [2]


def test_ticket_line_wakes_each_waiting_ticket_once_its_predecessors_passed() -> None:
    async def run() -> list[int]:
        line = TicketLine()
        tickets = [line.take() for _ in range(WAITERS)]
        passed: list[int] = []

        async def register(t: int) -> None:
            await line.turn(t)
            passed.append(t)
            line.passed(t)

        waiting = [asyncio.create_task(register(t)) for t in reversed(tickets[1:])]
        await asyncio.sleep(0)
        assert passed == []
        await register(tickets[0])
        await asyncio.gather(*waiting)
        return passed

    assert asyncio.run(run()) == list(range(WAITERS))
