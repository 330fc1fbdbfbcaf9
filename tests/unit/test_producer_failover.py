"""The producer's retry decisions, failover reports and per-route send order, without
sockets."""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.connection import ConnectionConfig
from nsqctl.failover import FailoverEvent
from nsqctl.producer.discovery import TopologyCache
from nsqctl.producer.options import ProducerOptions
from nsqctl.producer.ordering import RouteOrder, TicketLine
from nsqctl.producer.pool import ConnectionPool
from nsqctl.producer.retry import RetryLoop
from nsqctl.producer.retry_clock import FailoverNotes, RetryClock
from nsqctl.producer.routing import Router


def test_clock_before_first_write_gives_up_after_attempts() -> None:
    clock = RetryClock(ProducerOptions(max_attempts=3, backoff=0.1, max_backoff=1.0), 0.0, False)
    assert clock.failed(0.0, leader_lost=True) == pytest.approx(0.1)
    assert clock.failed(0.2, leader_lost=True) == pytest.approx(0.2)
    assert clock.failed(0.5, leader_lost=True) is None
    assert not clock.riding


def test_clock_before_first_write_gives_up_at_timeout() -> None:
    clock = RetryClock(
        ProducerOptions(max_attempts=100, retry_timeout=1.0, backoff=0.5), 0.0, False
    )
    assert clock.failed(0.0, leader_lost=True) == pytest.approx(0.5)
    assert clock.failed(0.6, leader_lost=True) is None  # 0.6 + 1.0 > 1.0


def test_clock_after_a_write_rides_until_the_window_from_first_failure() -> None:
    policy = ProducerOptions(
        max_attempts=2, retry_timeout=1.0, backoff=0.5, max_backoff=2.0, failover_window=10.0
    )
    clock = RetryClock(policy, 100.0, True)
    delays = []
    now = 103.0  # the call started earlier (queued): the window counts from its failure
    while (delay := clock.failed(now, leader_lost=True)) is not None:
        delays.append(delay)
        now += delay
    assert clock.riding and clock.attempts > policy.max_attempts
    assert delays[:4] == [0.5, 1.0, 2.0, 2.0]  # capped backoff, not the attempt budget
    assert 103.0 + 10.0 - 2.0 <= now <= 103.0 + 10.0
    assert clock.waited(now) == pytest.approx(now - 103.0)


def test_clock_window_zero_or_not_leader_loss_does_not_ride() -> None:
    off = RetryClock(ProducerOptions(max_attempts=2, failover_window=0), 0.0, True)
    off.failed(0.0, leader_lost=True)
    assert off.failed(0.1, leader_lost=True) is None and not off.riding
    other = RetryClock(ProducerOptions(max_attempts=2), 0.0, True)
    other.failed(0.0, leader_lost=False)
    assert other.failed(0.1, leader_lost=False) is None and not other.riding


def test_event_lines_name_topic_partition_and_window() -> None:
    waiting = FailoverEvent("waiting", "publish", "ha", 0, 12.4, 180, reason="connection refused")
    assert waiting.describe() == ("waiting for a leader for ha/0 (12s of 180s): connection refused")
    resumed = FailoverEvent("resumed", "publish", "ha", None, 31.25, 180, "127.0.0.1:4150")
    assert resumed.describe() == "ha: publishing again on 127.0.0.1:4150 after 31.2s"


def test_an_original_family_wait_names_an_nsqd_not_a_leader() -> None:
    """The original family has no partition leaders: a publish waits for an nsqd of the
    topic to take it again, and the line says so."""
    notes = FailoverNotes(window=180)
    waiting = notes.waiting("ha", None, 0.2, "connection closed", now=10.0, leaderless=True)
    assert waiting is not None and waiting.describe() == (
        "waiting for an nsqd of ha to take publishes again (0s of 180s): connection closed"
    )
    consume = FailoverEvent("waiting", "consume", "ha", None, 6, 20, leaderless=True)
    assert consume.describe() == "waiting for an nsqd of ha to deliver again (6s of 20s)"


def test_notes_report_waiting_once_per_interval_per_partition() -> None:
    notes = FailoverNotes(window=180, interval=5)
    first = notes.waiting("ha", 0, 0.1, "refused", now=100.0)
    assert first == FailoverEvent("waiting", "publish", "ha", 0, 0.1, 180, reason="refused")
    assert notes.waiting("ha", 0, 2.0, "refused", now=104.9) is None  # many in flight
    assert notes.waiting("ha", 1, 2.0, "refused", now=104.9) is not None  # its own partition
    later = notes.waiting("ha", 0, 5.1, "not leader", now=105.0)
    assert later is not None and later.reason == "not leader"


def test_notes_report_resumed_once_and_only_after_a_reported_wait() -> None:
    notes = FailoverNotes(window=30)
    assert notes.resumed("ha", 0, 1.0, "127.0.0.1:4150") is None  # no wait was reported
    notes.waiting("ha", 0, 0.0, "refused", now=0.0)
    resumed = notes.resumed("ha", 0, 21.5, "127.0.0.1:4151")
    assert resumed == FailoverEvent("resumed", "publish", "ha", 0, 21.5, 30, nsqd="127.0.0.1:4151")
    assert notes.resumed("ha", 0, 21.6, "127.0.0.1:4151") is None  # the next publishes


def test_route_sends_one_ticket_at_a_time_in_ticket_order() -> None:
    """Keyed publishes are stop-and-wait per route even while healthy: nsqd can refuse an
    earlier batch without closing the connection and store a later, pipelined one."""
    order = RouteOrder()
    for t in (0, 1, 2):
        order.register(t)
    assert [order.may_send(t) for t in (0, 1, 2)] == [True, False, False]
    order.settle(0)
    assert [order.may_send(t) for t in (1, 2)] == [True, False]


def test_route_after_failure_is_stop_and_wait_in_ticket_order() -> None:
    order = RouteOrder()
    for t in (0, 1, 2):
        order.register(t)
    order.settle(0)  # got OK before the connection died
    order.failed(2)  # the later one fails first
    assert order.recovering
    assert [order.may_send(t) for t in (1, 2)] == [True, False]
    order.register(3)  # a new publish waits behind the retries
    assert not order.may_send(3)
    order.settle(1)
    assert order.may_send(2) and not order.may_send(3)
    order.settle(2)
    assert not order.recovering  # every ticket from before the failure settled
    order.register(4)
    assert order.may_send(3) and not order.may_send(4)


def test_route_turn_waits_and_wakes_in_order() -> None:
    async def run() -> list[int]:
        order = RouteOrder()
        for t in range(4):
            order.register(t)
        order.failed(0)
        sent: list[int] = []

        async def sender(t: int) -> None:
            await order.turn(t)
            sent.append(t)
            await asyncio.sleep(0)
            order.settle(t)

        await asyncio.gather(*(sender(t) for t in (3, 1, 2, 0)))
        return sent

    assert asyncio.run(run()) == [0, 1, 2, 3]


def test_ticket_line_lets_tickets_pass_in_call_order() -> None:
    async def run() -> list[int]:
        line = TicketLine()
        registered: list[int] = []
        lookup_done = asyncio.Event()

        async def publish(slow_lookup: bool) -> None:
            ticket = line.take()
            try:
                if slow_lookup:
                    await lookup_done.wait()  # the first call refreshes the topology
                await line.turn(ticket)
                registered.append(ticket)
                line.passed(ticket)
            finally:
                line.passed(ticket)

        first = asyncio.create_task(publish(True))
        await asyncio.sleep(0)
        later = [asyncio.create_task(publish(False)) for _ in range(3)]
        await asyncio.sleep(0.01)
        assert registered == []  # the cached topology must not let them overtake
        lookup_done.set()
        await asyncio.gather(first, *later)
        return registered

    assert asyncio.run(run()) == [0, 1, 2, 3]


def test_ticket_line_skips_a_ticket_that_left_without_registering() -> None:
    async def run() -> list[int]:
        line = TicketLine()
        registered: list[int] = []

        async def publish(fail: bool) -> None:
            ticket = line.take()
            try:
                await asyncio.sleep(0.01 if fail else 0)
                if fail:
                    raise RuntimeError("lookup failed")
                await line.turn(ticket)
                registered.append(ticket)
            finally:
                line.passed(ticket)

        results = await asyncio.gather(publish(True), publish(False), return_exceptions=True)
        assert isinstance(results[0], RuntimeError)
        return registered

    assert asyncio.run(run()) == [1]


def test_route_turn_says_whether_the_ticket_waited() -> None:
    async def run() -> tuple[bool, bool]:
        order = RouteOrder()
        for t in (0, 1):
            order.register(t)
        order.failed(0)  # recovering: 1 waits behind 0
        later = asyncio.create_task(order.turn(1))
        first = await order.turn(0)
        await asyncio.sleep(0)
        assert not later.done()
        order.settle(0)
        return first, await later

    assert asyncio.run(run()) == (False, True)  # only a ticket that waited chooses again


def test_calls_take_tickets_when_begun_and_a_call_never_run_gives_its_place_up() -> None:
    """publish_many begins every batch's call before any await; a batch task cancelled
    before it ran must not hold later keyed calls of its topic forever."""
    loop = RetryLoop(
        TopologyCache(None, "127.0.0.1:1", 60.0),
        Router(),
        ConnectionPool(ConnectionConfig()),
        ProducerOptions(),
    )

    async def run() -> None:
        first = loop.begin("t", None, "k")
        second = loop.begin("t", 0, None)
        unkeyed = loop.begin("t", None, None)
        assert (first.ticket, second.ticket, unkeyed.line) == (0, 1, None)
        assert first.line is second.line is not None
        waiting = asyncio.create_task(second.line.turn(second.ticket))
        await asyncio.sleep(0)
        assert not waiting.done()  # the first call has not passed yet
        loop.end(first)  # cancelled before it ever ran
        loop.end(first)  # idempotent (run's own end, then the done callback)
        await asyncio.wait_for(waiting, 1)

    asyncio.run(run())
