"""The Consumer's collaborators on their own, without sockets: typed options, the delivery
path (hand-out, FIN/REQ, closing gives back once), flow control (RDY on the right
connection, the closed window), the connection set (with a fake ``dial``) and the leader
watch.

The connections here are :class:`FakeConn`, a recorder of the commands a consumer sends:
these tests check the consumer's own decisions, which a real nsqd cannot show one by one
(tests/integration/test_consumer.py checks the same paths against a real nsqd).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import sys
from typing import Any, cast

import pytest

from nsqctl import protocol as p
from nsqctl.addresses import HostPort, parse_address
from nsqctl.connection import Connection, ConnectionConfig
from nsqctl.consumer import Consumer, ConsumerOptions, ConsumerStats, FailoverEvent
from nsqctl.consumer.connections import ConnectionSet, SkippedStart, Target
from nsqctl.consumer.delivery import END_OF_STREAM, DeliveryPath
from nsqctl.consumer.flow_control import FlowControl
from nsqctl.consumer.leaders import LeaderWatch
from nsqctl.consumer.partition_watch import PartitionWatch
from nsqctl.errors import (
    AlreadyRespondedError,
    ConfigError,
    FailoverTimeoutError,
    NoConnectionError,
    NoConnectionTimeoutError,
    NsqctlTimeoutError,
    ReplyTimeoutError,
)
from nsqctl.flow import BackoffController, RdyController
from nsqctl.lookup.topology import Peer, Topology
from nsqctl.message import Message, finish_all
from nsqctl.protocol.raw_message import RawMessage
from tests.helpers.wait import wait_for

NSQD = "127.0.0.1:4150"


class FakeConn:
    """Records what a consumer sends on a connection (no socket)."""

    def __init__(self, address: str = NSQD) -> None:
        self.address = parse_address(address)
        self.identify = None
        self.max_rdy_count = 2500
        self.is_open = True
        self.remote_address = address
        self.local_address = "127.0.0.1:50000"
        self.fins: list[list[bytes]] = []
        self.reqs: list[tuple[bytes, int]] = []
        self.touches: list[bytes] = []
        self.rdys: list[int] = []
        self.subscribed: tuple[str, str, int | None] | None = None
        self.subscribe_error: BaseException | None = None
        self.on_close: Any = None

    def fin_many(self, ids: list[bytes]) -> None:
        self.fins.append(list(ids))

    def req(self, msg_id: bytes, delay_ms: int) -> None:
        self.reqs.append((msg_id, delay_ms))

    def rdy(self, count: int) -> None:
        self.rdys.append(count)

    def touch(self, msg_id: bytes) -> None:
        self.touches.append(msg_id)

    async def subscribe(
        self, topic: str, channel: str, partition: int | None = None, **_: object
    ) -> None:
        if self.subscribe_error is not None:
            raise self.subscribe_error
        self.subscribed = (topic, channel, partition)

    async def close(self) -> None:
        self.is_open = False

    def breaks(self, reason: str = "reset") -> None:
        """The server side went away."""
        self.is_open = False
        self.on_close(self, ConnectionError(reason))


def raw(n: int, attempts: int = 1, offset: int | None = None) -> RawMessage:
    return RawMessage(
        id=b"%016d" % n,
        timestamp=0,
        attempts=attempts,
        body=b"m%d" % n,
        internal_id=None if offset is None else n,
        offset=offset,
        size=None if offset is None else 10,
    )


def as_conn(fake: FakeConn) -> Connection:
    return cast(Connection, fake)


def make_path(
    handler: Any = None, **option_overrides: Any
) -> tuple[DeliveryPath, FlowControl, LeaderWatch, ConsumerStats]:
    options = dataclasses.replace(ConsumerOptions(max_in_flight=50), **option_overrides)
    stats = ConsumerStats()
    flow = FlowControl(
        RdyController(options.max_in_flight, rng=random.Random(1), fixed_rdy_one=options.ordered),
        BackoffController(backoff_multiplier=0.01),
        None,
    )
    leaders = LeaderWatch(
        "t", options.failover_window, stats, refresh=None, on_failover=None, on_fatal=print
    )
    path = DeliveryPath(
        "t",
        "c",
        options,
        stats,
        flow,
        leaders,
        handler=handler,
        giving_up=lambda msg: None,
    )
    return path, flow, leaders, stats


def connect(path: DeliveryPath, flow: FlowControl, fake: FakeConn) -> Connection:
    conn = as_conn(fake)
    path.add(conn, None)
    flow.add_connection(conn, 0.0)
    return conn


def reqs_by_id(*fakes: FakeConn) -> dict[bytes, int]:
    counts: dict[bytes, int] = {}
    for fake in fakes:
        for msg_id, _delay in fake.reqs:
            counts[msg_id] = counts.get(msg_id, 0) + 1
    return counts


def iterator_with(
    count: int,
) -> tuple[DeliveryPath, FlowControl, ConsumerStats, FakeConn, asyncio.Queue[Message]]:
    """An iterator-form delivery path on one connection that received ``count`` messages
    (in its queue, none taken yet)."""
    path, flow, _, stats = make_path()
    fake = FakeConn()
    path.on_messages(connect(path, flow, fake), [raw(n) for n in range(count)])
    queue = path.queue
    assert queue is not None
    return path, flow, stats, fake, queue


# -- options --------------------------------------------------------------------------------


async def _async_handler(msg: Message) -> None:
    """An async handler, for the settings checked against the handler's kind."""


def test_handler_concurrency_settings_that_fit_their_handler_are_accepted() -> None:
    """The default keeps today's behaviour; each setting is taken where it works."""
    plain = Consumer("t", "c", print, nsqd_tcp=[NSQD])
    assert (plain.options.concurrency, plain.options.threads) == (None, False)
    one = ConsumerOptions(concurrency=1)  # one at a time on the loop
    threads = ConsumerOptions(concurrency=3, threads=True, auto_touch=True)
    Consumer("t", "c", print, nsqd_tcp=[NSQD], options=one)
    Consumer("t", "c", print, nsqd_tcp=[NSQD], options=threads)
    Consumer(
        "t",
        "c",
        _async_handler,
        nsqd_tcp=[NSQD],
        options=dataclasses.replace(threads, threads=False),
    )


def test_no_cluster_names_the_library_settings() -> None:
    with pytest.raises(ConfigError) as caught:
        Consumer("t", "c")
    assert caught.value.setting == "lookupd_http"
    assert "lookupd_http=" in str(caught.value) and "--" not in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "options", "setting", "says"),
    [
        (
            dict(lookupd_http=["127.0.0.1:4161"], nsqd_tcp=[NSQD]),
            {},
            "nsqd_tcp",
            "both lookupd_http= and nsqd_tcp=",
        ),
        (dict(nsqd_tcp=[NSQD], handler="print"), {}, "handler", "handler must be a function"),
        (dict(nsqd_tcp=[NSQD]), {"partitions": [0]}, "partitions", "partitions= needs lookupd"),
        # handler concurrency: each refused where it could not work with this handler
        (dict(nsqd_tcp=[NSQD]), {"concurrency": 4}, "concurrency", "without one the consumer"),
        (dict(nsqd_tcp=[NSQD]), {"auto_touch": True}, "auto_touch", "without one the consumer"),
        (
            dict(nsqd_tcp=[NSQD], handler=print),
            {"concurrency": 4},
            "concurrency",
            "concurrency=4 needs threads=True",
        ),
        (
            dict(nsqd_tcp=[NSQD], handler=print),
            {"auto_touch": True},
            "auto_touch",
            "the handler holds the loop",
        ),
        (
            dict(nsqd_tcp=[NSQD], handler=_async_handler),
            {"threads": True, "concurrency": 2},
            "threads",
            "this handler is async",
        ),
    ],
)
def test_a_setting_that_would_do_nothing_is_refused_at_construction(
    kwargs: dict[str, Any], options: dict[str, Any], setting: str, says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        Consumer("t", "c", **kwargs, options=ConsumerOptions(**options))
    assert caught.value.setting == setting
    assert says in str(caught.value) and "--" not in str(caught.value)


# -- delivery path --------------------------------------------------------------------------


async def test_an_object_with_an_async_call_is_awaited_as_an_async_handler() -> None:
    """Called in line, such a handler only makes a coroutine: the message would be FINed
    without the handler having run."""
    seen: list[bytes] = []

    class Handler:
        async def __call__(self, msg: Message) -> None:
            await asyncio.sleep(0)
            seen.append(msg.body)

    path, flow, _, stats = make_path(Handler())
    fake = FakeConn()
    path.on_messages(connect(path, flow, fake), [raw(1)])
    await wait_for(lambda: stats.finished == 1, 5.0, "the message finished")
    assert seen == [raw(1).body] and fake.fins == [[raw(1).id]]


async def test_a_read_is_handled_and_fined_in_one_write() -> None:
    seen: list[bytes] = []
    path, flow, _, stats = make_path(lambda msg: seen.append(msg.body))
    fake = FakeConn()
    conn = connect(path, flow, fake)
    path.on_messages(conn, [raw(1), raw(2), raw(3)])
    assert seen == [b"m1", b"m2", b"m3"]
    assert fake.fins == [[raw(1).id, raw(2).id, raw(3).id]]
    assert stats.finished == 3 and path.in_flight == 0 and not fake.reqs


async def test_closing_gives_back_queued_and_late_messages_once() -> None:
    path, flow, stats, fake, queue = iterator_with(5)
    conn = as_conn(fake)
    taken = [queue.get_nowait(), queue.get_nowait()]
    taken[0].finish()

    flow.close_window(0.0)
    assert fake.rdys[-1] == 0  # RDY 0 first
    assert path.close() == 3
    assert path.close() == 0  # a second close gives nothing back again
    path.on_messages(conn, [raw(5), raw(6)])  # sent before nsqd saw RDY 0

    assert reqs_by_id(fake) == {raw(n).id: 1 for n in (2, 3, 4, 5, 6)}
    assert all(delay == 0 for _id, delay in fake.reqs)
    assert queue.get_nowait() is END_OF_STREAM and queue.empty()
    assert stats.requeued == 5 and flow.backoff.level == 0  # given back, not failed
    assert path.in_flight == 1  # the taken, unanswered one: close waits for it
    taken[1].finish()
    assert path.in_flight == 0
    assert await path.wait_idle(0.0) == 0
    assert fake.fins == [[raw(0).id], [raw(1).id]]


async def _iterate_in_a_task(path: Any, queue: Any, count: int, done: bool) -> list[Message]:
    """``count`` messages taken by an iteration run in a task of its own, which has
    ended (``done``) or is still running, awaiting something (a batch's durable write)."""
    taken: list[Message] = []
    hold = asyncio.Event()

    async def loop() -> None:
        path.iteration_started()
        for _ in range(count):
            msg = queue.get_nowait()
            path.take(msg)
            taken.append(msg)
        await hold.wait()

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)
    if done:
        hold.set()
        await task
    return taken


async def test_what_a_running_iteration_took_waits_for_it_when_another_task_closes() -> None:
    """Closed from another task (a signal's), an iteration's task still runs: the code
    after its loop (a batch written, then finished with finish_all) may answer what it
    took, so close keeps those for the stop timeout; abandon then gives back what is
    left, once. Those never handed out go back at the close."""
    path, _, stats, fake, queue = iterator_with(4)
    held = await _iterate_in_a_task(path, queue, 2, done=False)
    path.close()
    waiting = {raw(n).id: 1 for n in (2, 3)}
    assert reqs_by_id(fake) == waiting and path.in_flight == 2  # never handed out: back
    held[0].finish()  # the flush after the loop
    assert path.abandon() == []  # the stop timeout
    assert reqs_by_id(fake) == {**waiting, raw(1).id: 1} and stats.requeued == 3
    assert fake.fins == [[raw(0).id]]


async def test_what_an_iterator_took_is_given_back_at_close_when_nobody_can_answer_it() -> None:
    """The task that iterated has ended, or is the one closing (it waits for the close):
    nothing can answer what it took any more, so close gives it back at once, each once.
    Until close, what it took stays its to answer (a batch finished after the loop)."""
    path, _, stats, fake, queue = iterator_with(4)
    ended = await _iterate_in_a_task(path, queue, 2, done=True)
    ended[0].finish()  # answered after the loop: still the caller's to answer
    path.iteration_started()  # this task iterates too, and is the one closing
    path.take(mine := queue.get_nowait())
    path.close()
    assert reqs_by_id(fake) == {raw(1).id: 1, raw(2).id: 1, raw(3).id: 1}
    assert path.in_flight == 0 and mine.outcome == "REQ"
    assert path.abandon() == [] and stats.requeued == 3  # given back once
    with pytest.raises(AlreadyRespondedError):
        ended[1].finish()  # too late: it was given back, and no FIN leaves
    assert fake.fins == [[raw(0).id]]


async def test_abandon_gives_back_a_message_held_by_an_iteration_in_progress() -> None:
    path, _, _, fake, queue = iterator_with(1)
    [msg] = await _iterate_in_a_task(path, queue, 1, done=False)
    path.close()
    assert await path.wait_idle(0.0) == 1  # the stop timeout ran out
    path.abandon()
    assert fake.reqs == [(raw(0).id, 0)] and msg.outcome == "REQ" and path.in_flight == 0


def keeper(kept: list[Message]) -> Any:
    """A plain handler that keeps each message to answer later, as a batching one does."""

    def keep(msg: Message) -> None:
        msg.disable_auto_response()
        kept.append(msg)

    return keep


async def test_a_message_a_handler_kept_is_given_back_once_when_closing_stops_waiting() -> None:
    """A handler that disabled the auto-response and returned still owes its messages:
    close waits for them as for running handlers, and then gives back what is still
    unanswered, once; a late answer raises and sends nothing."""
    kept: list[Message] = []
    path, flow, _, stats = make_path(keeper(kept))
    fake = FakeConn()
    path.on_messages(connect(path, flow, fake), [raw(n) for n in range(3)])
    kept[0].finish()  # answered within the stop timeout: stays FINed
    path.close()
    assert fake.reqs == [] and path.kept_unanswered() == 2  # still the handler's to answer
    assert await path.wait_idle(0.0) == 2  # the stop timeout ran out
    assert path.abandon() == []  # no handler running: nothing to cancel
    assert reqs_by_id(fake) == {raw(1).id: 1, raw(2).id: 1}
    assert all(delay == 0 for _id, delay in fake.reqs) and flow.backoff.level == 0
    assert [m.outcome for m in kept] == ["FIN", "REQ", "REQ"] and path.in_flight == 0
    with pytest.raises(AlreadyRespondedError):
        kept[1].finish()
    with pytest.raises(AlreadyRespondedError):
        kept[2].requeue()
    path.abandon()  # a second stop gives nothing back again
    assert stats.requeued == 2 and len(fake.reqs) == 2 and fake.fins == [[raw(0).id]]


async def test_a_running_handler_that_kept_its_message_has_it_given_back_once() -> None:
    """Held by an overrunning handler and kept by it too: listed twice, given back once."""
    started = asyncio.Event()

    async def keep_and_hang(msg: Message) -> None:
        msg.disable_auto_response()
        started.set()
        await asyncio.Event().wait()

    path, flow, _, stats = make_path(keep_and_hang)
    fake = FakeConn()
    path.on_messages(connect(path, flow, fake), [raw(0)])
    await started.wait()
    path.close()
    assert await path.wait_idle(0.0) == 1
    assert path.kept_unanswered() == 0  # its handler runs: counted as overrunning, not kept
    [task] = path.abandon()
    assert fake.reqs == [(raw(0).id, 0)] and stats.requeued == 1 and path.in_flight == 0
    await asyncio.wait([task])
    assert task.cancelled()


async def test_a_message_kept_by_a_handler_thread_is_given_back_at_close() -> None:
    """The thread tells the loop it keeps the message (the books are the loop's); the
    late answer from a thread raises there."""
    kept: list[Message] = []
    path, flow, _, _ = make_path(keeper(kept), concurrency=1, threads=True)
    fake = FakeConn()
    path.on_messages(connect(path, flow, fake), [raw(0)])
    await wait_for(lambda: kept and path.kept_unanswered() == 1, 10, "the thread to keep it")
    path.close()
    assert await path.wait_idle(0.0) == 1
    path.abandon()
    assert fake.reqs == [(raw(0).id, 0)] and path.in_flight == 0
    with pytest.raises(AlreadyRespondedError):
        await asyncio.to_thread(kept[0].finish)
    path.shutdown()
    assert fake.fins == []


async def test_kept_messages_answered_later_are_not_held_on_to() -> None:
    """A consumer that keeps every message and FINs it later (a batch) runs for long:
    what it answered must not pile up in the close bookkeeping."""
    batch: list[Message] = []
    path, flow, _, stats = make_path(keeper(batch))
    conn = connect(path, flow, FakeConn())
    path.on_messages(conn, [raw(0)])
    first = batch.pop()
    first.finish()
    for read in range(1, 101):
        path.on_messages(conn, [raw(read * 100 + n) for n in range(100)])
        finish_all(batch)
        batch.clear()
    assert stats.finished == 10_001 and path.in_flight == 0
    assert sys.getrefcount(first) == 2  # only ``first`` (and the call's argument) hold it


async def test_closing_hands_out_nothing_to_a_handler() -> None:
    handled: list[Message] = []
    path, flow, _, stats = make_path(handled.append)
    fake = FakeConn()
    conn = connect(path, flow, fake)
    path.close()
    path.on_messages(conn, [raw(1), raw(2)])
    assert handled == [] and reqs_by_id(fake) == {raw(1).id: 1, raw(2).id: 1}
    assert stats.requeued == 2 and path.in_flight == 0


async def test_failing_handler_requeues_with_backoff() -> None:
    def fail(msg: Message) -> None:
        raise RuntimeError("no")

    path, flow, _, stats = make_path(fail, default_requeue_delay=2.0)
    fake = FakeConn()
    conn = connect(path, flow, fake)
    path.on_messages(conn, [raw(1, attempts=3)])
    assert fake.reqs == [(raw(1).id, 6000)]  # attempts x the default delay
    assert stats.requeued == 1 and flow.backoff.level == 1


async def test_a_handler_failure_is_logged_with_its_type_and_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def fail(msg: Message) -> None:
        raise KeyError("customer-17")

    path, flow, _, _stats = make_path(fail)
    conn = connect(path, flow, FakeConn())
    with caplog.at_level("WARNING", logger="nsqctl.consumer"):
        path.on_messages(conn, [raw(1)])
    [record] = [r for r in caplog.records if "handler failed" in r.getMessage()]
    assert "KeyError: 'customer-17'" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert "in fail" in caplog.text  # the traceback, down to the handler's frame


async def test_ordered_second_copy_of_a_message_in_hand_is_dropped() -> None:
    kept: list[Message] = []

    def keep(msg: Message) -> None:
        msg.disable_auto_response()
        kept.append(msg)

    path, flow, _, stats = make_path(keep, ordered=True, max_in_flight=1)
    fake = FakeConn()
    conn = connect(path, flow, fake)
    path.on_messages(conn, [raw(1, offset=0)])
    path.on_messages(conn, [raw(1, offset=0)])  # the server reset the reader
    assert len(kept) == 1 and stats.redelivered == 1
    kept[0].finish()
    path.on_messages(conn, [raw(1, offset=0)])  # after the FIN: FINed again, not handled
    assert len(kept) == 1 and stats.redelivered == 2
    assert fake.fins == [[raw(1).id], [raw(1).id]]


async def test_an_ordered_requeue_held_on_a_lost_connection_is_held_again_when_resent() -> None:
    # youzan ignores an ordered REQ's delay, so the consumer holds the requeue itself. The
    # connection closes meanwhile (failover, nsqd restart): nsqd sends the message again
    # on the next connection. That copy is held for the rest of the delay, given back
    # there, and handled when it comes back; the partition then moves on.
    handled: list[int] = []

    def handle(msg: Message) -> None:
        handled.append(msg.attempts)
        if msg.attempts == 1:
            msg.requeue(delay=0.3, backoff=False)

    path, flow, _, stats = make_path(handle, ordered=True)
    first, second = FakeConn("127.0.0.1:4150"), FakeConn("127.0.0.1:4151")
    lost = connect(path, flow, first)
    path.on_messages(lost, [raw(1, offset=100)])
    assert first.reqs == [] and path.lane_mark(None) is None  # held, the partition waits
    first.is_open = False
    flow.remove_connection(lost, 0.0)
    path.remove(lost)
    conn = connect(path, flow, second)
    path.on_messages(conn, [raw(1, attempts=2, offset=100)])  # the resend: still owed
    assert handled == [1] and second.reqs == [] and stats.redelivered == 1
    await wait_for(lambda: second.reqs == [(raw(1).id, 0)], 5, "the REQ 0 on the new connection")
    path.on_messages(conn, [raw(1, attempts=3, offset=100)])
    assert handled == [1, 3] and second.fins == [[raw(1).id]]
    assert first.reqs == [] and path.lane_mark(None) == (100, 1)
    path.on_messages(conn, [raw(2, attempts=2, offset=101)])  # the partition continues
    assert handled == [1, 3, 2] and second.fins[-1] == [raw(2).id]


async def test_a_held_requeue_is_first_touched_half_a_timeout_from_its_arrival() -> None:
    # nsqd's timeout runs from when it sent the message: a handler that had it past half
    # of it (31 s of nsqd's default 60 s here) has the held requeue TOUCHed at once, not
    # half a timeout after the requeue, by when nsqd would have timed it out.
    def handle(msg: Message) -> None:
        msg.received_at -= 31.0
        msg.requeue(delay=300.0, backoff=False)

    path, flow, _, stats = make_path(handle, ordered=True)
    fake = FakeConn()
    path.on_messages(connect(path, flow, fake), [raw(1, offset=100)])
    await wait_for(lambda: fake.touches == [raw(1).id], 5, "a TOUCH of the held message")
    assert fake.reqs == [] and stats.touched == 1
    path.close()
    assert fake.reqs == [(raw(1).id, 0)]  # closing gives it back


# -- flow control ---------------------------------------------------------------------------


async def test_a_connection_beyond_the_budget_wakes_the_flow_loop() -> None:
    """It gets no RDY, but it starts rotation: the loop must take the new deadline now,
    not when its previous wait (up to a second) ends."""
    flow = FlowControl(RdyController(1, rng=random.Random(1)), BackoffController(), None)
    a, b = FakeConn("127.0.0.1:1"), FakeConn("127.0.0.1:2")
    flow.add_connection(as_conn(a), 0.0)
    flow.wake.clear()
    flow.add_connection(as_conn(b), 0.0)
    assert b.rdys == [] and flow.rdy.next_deadline() is not None
    assert flow.wake.is_set()


async def test_flow_sends_rdy_on_its_connection_and_close_window_ends_the_loop() -> None:
    flow = FlowControl(RdyController(10, rng=random.Random(1)), BackoffController(), None)
    a, b = FakeConn("127.0.0.1:1"), FakeConn("127.0.0.1:2")
    flow.add_connection(as_conn(a), 0.0)
    flow.add_connection(as_conn(b), 0.0)
    assert a.rdys == [1] and b.rdys == [1]
    b.is_open = False
    updates = flow.rdy.on_messages(id(b), 1, 0.0)  # b's share grows, but b is closing
    assert [u.conn_id for u in updates] == [id(b)]
    flow.apply(updates)
    assert b.rdys == [1]
    ticks: list[float] = []
    loop = asyncio.create_task(flow.run(ticks.append))
    await asyncio.sleep(0)
    flow.close_window(1.0)
    await asyncio.wait_for(loop, 2.0)
    assert a.rdys[-1] == 0 and flow.rdy.total_rdy == 0


# -- connection set -------------------------------------------------------------------------


class Dialer:
    def __init__(self) -> None:
        self.opened: list[FakeConn] = []
        self.fail_next = 0
        self.subscribe_error: BaseException | None = None
        self.dial_error: BaseException | None = None  # what every dial raises, if set
        self.errors_of: dict[str, BaseException] = {}  # what a dial of one address raises
        self.dials = 0

    async def __call__(self, address: HostPort, on_error: Any, on_close: Any) -> Connection:
        self.dials += 1
        if self.dial_error is not None:
            raise self.dial_error
        if str(address) in self.errors_of:
            await asyncio.sleep(0.05)  # the refusing nsqd answers after the other subscribed
            raise self.errors_of[str(address)]
        if self.fail_next:
            self.fail_next -= 1
            raise OSError("refused")
        fake = FakeConn(str(address))
        fake.on_close = on_close
        fake.subscribe_error = self.subscribe_error
        self.opened.append(fake)
        return as_conn(fake)


def connection_set(
    dialer: Dialer,
    events: list[tuple[str, Target, bool]] | None = None,
    *,
    lookup: bool = False,
    skipped_start: SkippedStart | None = None,
    **option_overrides: Any,
) -> ConnectionSet:
    """A ConnectionSet on ``dialer`` recording its reports in ``events``; ``lookup``: its
    targets follow a lookup (a refresh callback), as with lookupd addresses."""
    seen = events if events is not None else []
    options = {"reconnect_initial": 0.01, "reconnect_max": 0.02, **option_overrides}
    return ConnectionSet(
        "t",
        "c",
        ConsumerOptions(**options),
        ConsumerStats(),
        dial=dialer,
        on_connected=lambda target, conn: seen.append(("connected", target, False)),
        on_dropped=lambda target, conn, lost: seen.append(("dropped", target, lost)),
        rng=random.Random(1),
        refresh=(lambda: None) if lookup else None,
        skipped_start=skipped_start,
    )


async def test_connection_set_connects_reconnects_and_closes() -> None:
    dialer = Dialer()
    dialer.fail_next = 1
    events: list[tuple[str, Target, bool]] = []
    conns = connection_set(dialer, events)
    topo = Topology.from_nsqd_addresses([parse_address(NSQD)], topic="t")
    target = (parse_address(NSQD), None)
    await conns.sync(topo)  # the first dial fails: retried after the reconnect delay
    await wait_for(lambda: conns.connections, 2.0, "a connection")
    assert events == [("connected", target, False)]
    assert dialer.opened[0].subscribed == ("t", "c", None)

    dialer.opened[0].breaks()
    assert events[-1] == ("dropped", target, True) and conns.stats.reconnects == 1
    await wait_for(lambda: len(dialer.opened) == 2 and conns.connections, 2.0, "a reconnect")

    await conns.close_all()
    assert not conns.connections and not dialer.opened[1].is_open
    assert conns.stats.connections == 0 and conns.fatal is None


async def test_a_reconnect_waiting_when_the_lookup_moves_its_partition_is_dropped() -> None:
    """A lost leader's reconnect waits out its delay; if the lookup lists the partition on
    another nsqd meanwhile, the old address is not dialled when the delay ends."""
    old, new = parse_address("127.0.0.1:4150"), parse_address("127.0.0.1:4250")
    dialer = Dialer()
    conns = connection_set(dialer, lookup=True, reconnect_initial=0.05, reconnect_max=0.05)
    await conns.sync(Topology("t", partitions={0: Peer.from_address(old)}))
    dialer.opened[0].breaks()
    waiting = conns._connecting[(old, 0)]  # the reconnect, sleeping out its delay
    await conns.sync(Topology("t", partitions={0: Peer.from_address(new)}))
    await waiting
    assert [f.address for f in dialer.opened] == [old, new]
    assert set(conns.connections) == {(new, 0)} and conns.unconnected() == set()
    await conns.close_all()


class EmptyPartitionDialer(Dialer):
    """Connections to a partition whose log is empty for the first ``refusals`` history
    starts: each is refused as youzan refuses it ("commit log end of file"); a
    subscription from the end is accepted. Records every start asked for."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals = refusals
        self.starts: list[str | None] = []

    async def __call__(self, address: HostPort, on_error: Any, on_close: Any) -> Connection:
        conn = await super().__call__(address, on_error, on_close)
        fake, accept = self.opened[-1], self.opened[-1].subscribe

        async def subscribe(
            topic: str, channel: str, partition: int | None = None, **kw: Any
        ) -> None:
            self.starts.append(kw.get("start"))
            if kw.get("start") != END and self.refusals:
                self.refusals -= 1
                raise p.EmptyPartitionError("E_INVALID", "commit log end of file")
            await accept(topic, channel, partition)

        fake.subscribe = subscribe  # type: ignore[method-assign]
        return conn


START, END = p.start_msgcount(0), p.start_end()


def gap_checked_set(dialer: Dialer, answers: list[bool | None]) -> ConnectionSet:
    """A lookup's ConnectionSet reading partition 0 from START whose gap check gives
    ``answers`` in turn (the last one again once they run out)."""

    async def skipped_start(partition: int | None, nsqd_http: HostPort | None) -> bool | None:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    return connection_set(dialer, lookup=True, skipped_start=skipped_start, start=START)


ONE_PARTITION = Topology("t", partitions={0: Peer.from_address(parse_address(NSQD))})


@pytest.mark.parametrize(
    ("refusals", "answers", "starts"),
    [
        (1, [False], [START, END]),  # nothing came in between: read from the end
        (1, [None], [START, END]),  # cannot tell: as before, read from the end
        (1, [True], [START, END, START]),  # something came: the start again, answered now
        (9, [True], [START, END, START, END]),  # refused again: the end, never round again
    ],
)
async def test_an_empty_partition_read_from_its_end_is_read_from_its_start_if_one_came_between(
    refusals: int, answers: list[bool | None], starts: list[str]
) -> None:
    dialer = EmptyPartitionDialer(refusals)
    conns = gap_checked_set(dialer, answers)
    await conns.sync(ONE_PARTITION)
    assert dialer.starts == starts
    assert [f.is_open for f in dialer.opened] == [False] * (len(starts) - 1) + [True]
    assert set(conns.connections) == {(parse_address(NSQD), 0)}
    await conns.close_all()


async def test_a_connection_lost_during_the_gap_check_is_reconnected() -> None:
    dialer = EmptyPartitionDialer(refusals=1)
    broken: list[bool | None] = []

    async def breaks_then_answers(partition: int | None, nsqd_http: HostPort | None) -> bool:
        if not broken:
            broken.append(True)
            dialer.opened[-1].breaks()  # nsqd went away while /stats was read
        return False

    conns = connection_set(dialer, lookup=True, skipped_start=breaks_then_answers, start=START)
    await conns.sync(ONE_PARTITION)
    assert not conns.connections  # the broken one was not kept as if it read the partition
    await wait_for(lambda: conns.connections, 2.0, "the reconnect")
    assert dialer.starts == [START, END, START]  # the log answers a start by now
    await conns.close_all()


async def test_connection_set_refused_subscription_is_fatal() -> None:
    dialer = Dialer()
    dialer.subscribe_error = p.SubOrderIsMustError("E_SUB_ORDER_IS_MUST")
    events: list[tuple[str, Target, bool]] = []
    conns = connection_set(dialer, events, ordered=True)
    await conns.sync(Topology.from_nsqd_addresses([parse_address(NSQD)], topic="t"))
    assert isinstance(conns.fatal, p.SubOrderIsMustError) and events == []
    assert not dialer.opened[0].is_open


@pytest.mark.parametrize(
    ("frame", "fatal"),
    [
        (b"E_BAD_TOPIC SUB topic name 'a b' is not valid", True),
        (b"E_BAD_CHANNEL SUB channel name 'a b' is not valid", True),
        (b"E_SUB_EXTEND_NEED this topic is extended", True),
        (b"E_INVALID cannot SUB, TLS required", True),
        (b"E_FAILED_ON_NOT_LEADER", False),
        (b"E_TOPIC_NOT_EXIST", False),
        (b"E_UNAUTHORIZED SUB Insufficient Permissions", False),
        (b"E_INVALID cannot SUB in current state", False),
    ],
)
async def test_a_refused_subscription_stops_the_set_or_is_retried(
    frame: bytes, fatal: bool
) -> None:
    dialer = Dialer()
    dialer.subscribe_error = p.error_from_frame(frame, context="sub")
    conns = connection_set(dialer)
    await conns.sync(Topology.from_nsqd_addresses([parse_address(NSQD)], topic="t"))
    assert not dialer.opened[0].is_open and not conns.connections
    if fatal:
        assert conns.fatal is dialer.subscribe_error
    else:
        await wait_for(lambda: len(dialer.opened) >= 2, 2.0, "a second subscription")
        assert conns.fatal is None
    await conns.close_all()


class DialerConsumer(Consumer):
    """A consumer whose connections are :class:`FakeConn` (through a :class:`Dialer`)."""

    def __init__(self, dialer: Dialer, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dialer = dialer

    async def _dial(self, address: HostPort, on_error: Any, on_close: Any) -> Connection:
        return await self.dialer(address, on_error, on_close)


async def test_unconnected_names_what_is_cut_off_until_it_is_read_again() -> None:
    a, b, c = (parse_address(f"127.0.0.1:{port}") for port in (4150, 4250, 4350))
    slow = ConsumerOptions(reconnect_initial=30.0, reconnect_max=30.0)  # no reconnect here
    # the original family, nsqds given: a lost nsqd stays a source, being reconnected
    direct = DialerConsumer(
        Dialer(), "t", "c", lambda m: None, nsqd_tcp=[str(a), str(b)], options=slow
    )
    await direct._connections.sync(Topology.from_nsqd_addresses([a, b], topic="t"))
    assert direct.unconnected == []
    next(f for f in direct.dialer.opened if f.address == a).breaks()
    assert direct.unconnected == [(a, None)]
    await direct._connections.close_all()

    # the redesign through a lookupd: a partition that lost its leader
    leaders = DialerConsumer(
        Dialer(), "t", "c", lambda m: None, lookupd_http=["127.0.0.1:4161"], options=slow
    )
    lookup = leaders._connections
    await lookup.sync(Topology("t", partitions={0: Peer.from_address(a), 1: Peer.from_address(b)}))
    assert leaders.unconnected == []
    next(f for f in leaders.dialer.opened if f.address == b).breaks()
    assert leaders.unconnected == [(b, 1)]  # still listed there: reconnected there
    await lookup.sync(Topology("t", partitions={0: Peer.from_address(a)}))
    assert leaders.unconnected == [(None, 1)]  # listed nowhere: waiting for a new leader
    await lookup.sync(Topology("t", partitions={0: Peer.from_address(a), 1: Peer.from_address(c)}))
    assert leaders.unconnected == []  # read again, from its new leader
    await lookup.close_all()


def quick_start_consumer(dialer: Dialer) -> DialerConsumer:
    """A consumer of one nsqd on ``dialer`` whose start gives up after 0.3 s, retrying
    every 0.05 s meanwhile."""
    options = ConsumerOptions(connect_timeout=0.3, reconnect_initial=0.05, reconnect_max=0.05)
    return DialerConsumer(dialer, "t", "c", lambda m: None, nsqd_tcp=NSQD, options=options)


@pytest.mark.parametrize(
    "frame",
    [
        b"E_UNAUTHORIZED SUB Insufficient Permissions",
        b"E_AUTH_FIRST AUTH required before SUB",
        b"E_SUB_CHANNEL_NOT_REGISTERED channel is not registered",
        b"E_FAILED_ON_NOT_LEADER",
        b"E_TOPIC_NOT_EXIST",
    ],
)
async def test_a_start_whose_every_subscription_is_refused_is_not_a_timeout(frame: bytes) -> None:
    """Every nsqd answers the connect and refuses the SUB with a refusal a retry may get
    past: start fails as unable to connect, saying the subscription was refused, and not
    as a timeout (nothing stayed silent). The start-up check is made once the first
    subscription was refused (sync returns after it), so no deadline passing early on a
    slow machine can make that refusal look like silence."""
    dialer = Dialer()
    dialer.subscribe_error = p.error_from_frame(frame, context="sub")
    conns = connection_set(dialer, reconnect_initial=0.05, reconnect_max=0.05)
    await conns.sync(Topology.from_nsqd_addresses([parse_address(NSQD)], topic="t"))
    await conns.await_first(0.0)  # the deadline has passed: the check judges at once
    assert isinstance(conns.fatal, NoConnectionError), conns.fatal
    assert not isinstance(conns.fatal, NsqctlTimeoutError)
    assert "refused the subscription" in str(conns.fatal), str(conns.fatal)
    await conns.close_all()
    assert dialer.opened and not any(f.is_open for f in dialer.opened)


async def test_a_subscription_that_succeeds_clears_its_nsqds_earlier_refusal() -> None:
    """nsqd refused a subscription and then accepted one: that refusal is past, so a later
    judgement of the nsqd (an archive's lost source, a start-up check) does not quote it,
    and an attempt under way since counts as silence, not as refused."""
    address = parse_address(NSQD)
    dialer = Dialer()
    dialer.subscribe_error = p.error_from_frame(b"E_TOPIC_NOT_EXIST", context="sub")
    conns = connection_set(dialer)
    await conns.sync(Topology.from_nsqd_addresses([address], topic="t"))
    assert conns.unreached_error([address]) is NoConnectionError  # refused: on record
    dialer.subscribe_error = None
    await wait_for(lambda: conns.connections, 2.0, "the resubscription")
    assert conns.unreached_error([address]) is NoConnectionTimeoutError
    await conns.close_all()


class HangingDialer(Dialer):
    """Dials to ``silent`` never end, as to an nsqd that accepts and never answers."""

    def __init__(self, silent: HostPort) -> None:
        super().__init__()
        self.silent = silent
        self.hanging = False

    async def __call__(self, address: HostPort, on_error: Any, on_close: Any) -> Connection:
        if address == self.silent:
            self.hanging = True
            await asyncio.Event().wait()
        return await super().__call__(address, on_error, on_close)


async def test_the_start_up_error_quotes_only_the_nsqds_still_targeted() -> None:
    """An nsqd that refused the subscription and that the lookup then stopped listing is
    not why start failed: the error names the silent nsqd still targeted, as a timeout."""
    refused, silent = parse_address("127.0.0.1:4150"), parse_address("127.0.0.1:4250")
    dialer = HangingDialer(silent)
    dialer.subscribe_error = p.error_from_frame(b"E_TOPIC_NOT_EXIST", context="sub")
    conns = connection_set(dialer, lookup=True, reconnect_initial=30.0, reconnect_max=30.0)
    await conns.sync(Topology("t", partitions={0: Peer.from_address(refused)}))
    following = asyncio.create_task(
        conns.sync(Topology("t", partitions={0: Peer.from_address(silent)}))
    )
    await wait_for(lambda: dialer.hanging, 2.0, "the dial to the silent nsqd")
    await conns.await_first(0.0)
    assert isinstance(conns.fatal, NoConnectionTimeoutError), conns.fatal
    assert str(refused) not in str(conns.fatal) and str(silent) in str(conns.fatal)
    await conns.close_all()
    with pytest.raises(asyncio.CancelledError):
        await following


async def test_a_start_whose_every_subscription_timed_out_is_a_timeout() -> None:
    """The other side of the same line: SUBs that each got no answer in time (the
    connection closed as silent) make start fail as a timeout."""
    dialer = Dialer()
    dialer.subscribe_error = ReplyTimeoutError(NSQD, "no reply to SUB within 0.1s")
    consumer = quick_start_consumer(dialer)
    with pytest.raises(NoConnectionTimeoutError) as info:
        await consumer.start()
    assert "did not answer the subscription" in str(info.value), str(info.value)


#: Handshake refusals no reconnect cures: TLS or a secret missing.
LASTING_REFUSALS = [
    pytest.param(
        lambda: p.error_from_frame(
            b"E_INVALID cannot AUTH in current state (TLS required)", context="auth"
        ),
        id="tls-required",
    ),
    pytest.param(lambda: p.AuthRequiredError(NSQD), id="auth-required"),
]
HANDSHAKE_REFUSALS = [
    *LASTING_REFUSALS,
    pytest.param(
        lambda: p.error_from_frame(b"E_AUTH_FAILED AUTH failed", context="auth"), id="auth-failed"
    ),
]


@pytest.mark.parametrize("refusal", HANDSHAKE_REFUSALS)
async def test_a_handshake_refusal_no_retry_can_fix_fails_start_with_it(refusal: Any) -> None:
    """nsqd refuses the handshake for want of TLS (its TLS policy, applied at AUTH) or of
    a secret: start fails with that refusal after one dial, not with NoConnectionError
    after retrying until the connect timeout (no reconnect brings TLS or a secret)."""
    dialer = Dialer()
    dialer.dial_error = refusal()
    consumer = quick_start_consumer(dialer)
    with pytest.raises(p.ServerError) as info:
        await consumer.start()
    assert info.value is dialer.dial_error and dialer.dials == 1


@pytest.mark.parametrize("refusal", LASTING_REFUSALS)
async def test_a_handshake_refusal_on_a_reconnect_is_retried_loudly_not_fatal(
    refusal: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The same refusal when a lost connection is dialled again (that nsqd restarted with
    TLS or AUTH required) once the set has subscribed: these settings were accepted by the
    cluster, so it is that nsqd's change. Ending the consumer would stop every other nsqd's
    reading too; the nsqd is retried, each refusal an ERROR, until it is put right."""
    dialer = Dialer()
    conns = connection_set(dialer)
    await conns.sync(Topology.from_nsqd_addresses([parse_address(NSQD)], topic="t"))
    conns.start_ended()  # what the consumer's start() does once it returns
    dialer.dial_error = refusal()
    with caplog.at_level(logging.ERROR, logger="nsqctl"):
        dialer.opened[0].breaks()
        await wait_for(lambda: dialer.dials >= 3, 2.0, "two refused reconnects")
    assert conns.fatal is None
    refused = [r for r in caplog.records if "refused the handshake" in r.getMessage()]
    assert refused and all(r.levelno == logging.ERROR for r in refused), caplog.text
    dialer.dial_error = None  # the nsqd is put right
    await wait_for(lambda: conns.connections, 2.0, "the reconnect")
    assert conns.fatal is None and len(dialer.opened) == 2
    await conns.close_all()


@pytest.mark.parametrize("refusal", LASTING_REFUSALS)
async def test_a_refusal_in_the_first_connects_is_fatal_whichever_nsqd_answers_first(
    refusal: Any,
) -> None:
    """Two nsqds, the second refusing these settings after the first has subscribed:
    within the start's first connects that is still the settings' fault, not one nsqd's
    change, so the set fails with it; whether start fails must not hang on which nsqd
    answered first."""
    dialer = Dialer()
    other = "127.0.0.1:4250"
    dialer.errors_of[other] = refusal()
    conns = connection_set(dialer)
    topology = Topology.from_nsqd_addresses([parse_address(NSQD), parse_address(other)], topic="t")
    await conns.sync(topology)
    assert conns.connections  # the first nsqd subscribed before the refusal came
    await wait_for(lambda: conns.fatal is not None, 2.0, "the set to fail")
    assert conns.fatal is dialer.errors_of[other]
    await conns.close_all()


@pytest.mark.parametrize("refusal", LASTING_REFUSALS)
async def test_a_refusal_in_the_first_round_after_an_empty_start_is_fatal(refusal: Any) -> None:
    """A consumer started before its topic existed (start returned, nothing subscribed):
    the first round of connects once the topic appears is where its settings are first
    tried, so a refusal there ends it even when another nsqd of that round subscribed
    first."""
    dialer = Dialer()
    other = "127.0.0.1:4250"
    dialer.errors_of[other] = refusal()
    conns = connection_set(dialer)
    conns.start_ended()  # start() returned with nothing to connect to yet
    topology = Topology.from_nsqd_addresses([parse_address(NSQD), parse_address(other)], topic="t")
    await conns.sync(topology)
    await wait_for(lambda: conns.fatal is not None, 2.0, "the set to fail")
    assert conns.fatal is dialer.errors_of[other]
    await conns.close_all()


async def test_a_secret_refused_on_a_reconnect_is_retried() -> None:
    """E_AUTH_FAILED once the set has read: nsqd answers it for an auth server it could
    not reach as for a wrong secret, so an outage of that server (during an nsqd restart)
    is reconnected through, not taken for a secret no reconnect can fix."""
    dialer = Dialer()
    conns = connection_set(dialer)
    await conns.sync(Topology.from_nsqd_addresses([parse_address(NSQD)], topic="t"))
    conns.start_ended()
    dialer.dial_error = p.error_from_frame(b"E_AUTH_FAILED AUTH failed", context="auth")
    dialer.opened[0].breaks()
    await wait_for(lambda: dialer.dials >= 3, 2.0, "two refused reconnects")
    assert conns.fatal is None
    dialer.dial_error = None  # the auth server answers again
    await wait_for(lambda: conns.connections, 2.0, "the reconnect")
    assert conns.fatal is None and len(dialer.opened) == 2
    await conns.close_all()


# -- closing a consumer whose background task hangs -------------------------------------------


class StuckDialConsumer(Consumer):
    """A consumer whose connect never ends and whose cleanup after a cancel never ends
    either: what a peer that accepts and then never answers can do to a connect and to
    the CLS that closes it. A real nsqd cannot be made to hang a client's cleanup on cue,
    so the hang is injected through the consumer's dial."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dial_began = asyncio.Event()
        self.cleanup_began = asyncio.Event()
        self.cleanup_cut = False

    async def _dial(self, address: HostPort, on_error: Any, on_close: Any) -> Connection:
        self.dial_began.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cleanup_began.set()
            try:
                await asyncio.Event().wait()  # a cleanup that never ends on its own
            except asyncio.CancelledError:
                self.cleanup_cut = True
                raise
        raise AssertionError("unreachable")


async def test_close_abandons_a_background_task_stuck_after_its_cancel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """start() gives up on the silent nsqd and closes: close() must return although the
    connecting task ignores its cancel, with one warning naming the task it abandoned."""
    consumer = StuckDialConsumer(
        "t",
        "c",
        lambda msg: None,
        nsqd_tcp=NSQD,
        config=ConnectionConfig(connect_timeout=0.2),
        options=ConsumerOptions(connect_timeout=0.1),
    )
    caplog.set_level("WARNING", logger="nsqctl.consumer")
    async with asyncio.timeout(20):  # a hang guard: without the bound close() never returns
        with pytest.raises(NoConnectionError):
            await consumer.start()
    assert consumer.cleanup_began.is_set()
    await wait_for(lambda: consumer.cleanup_cut, 5.0, "the stuck cleanup to be cancelled")
    warnings = [r.getMessage() for r in caplog.records if "abandoned" in r.getMessage()]
    assert len(warnings) == 1 and "nsq-connect" in warnings[0], warnings
    assert "nsq-flow" not in warnings[0]  # a task that stopped on its cancel is not named


async def test_cancelling_start_without_a_connect_timeout_cancels_its_connect() -> None:
    """A service cancelling its own start (its startup timed out) stops the connect under
    way, with no connect timeout as with one: nothing keeps connecting behind it."""
    consumer = StuckDialConsumer(
        "t", "c", lambda msg: None, nsqd_tcp=NSQD, options=ConsumerOptions(connect_timeout=None)
    )
    start = asyncio.create_task(consumer.start())
    async with asyncio.timeout(20):  # a hang guard for close(), which abandons the cleanup
        try:
            await consumer.dial_began.wait()
            start.cancel()
            with pytest.raises(asyncio.CancelledError):
                await start
            await wait_for(consumer.cleanup_began.is_set, 5.0, "the connect to be cancelled")
        finally:
            await consumer.close()


# -- leader watch ---------------------------------------------------------------------------


def test_leader_watch_reports_consume_failover_events_and_times_out() -> None:
    events: list[FailoverEvent] = []
    fatal: list[BaseException] = []
    refreshes: list[None] = []
    watch = LeaderWatch(
        "t",
        20.0,
        ConsumerStats(),
        refresh=lambda: refreshes.append(None),
        on_failover=events.append,
        on_fatal=fatal.append,
    )
    watch.joined(1, "127.0.0.1:4150", 0.0)
    assert not watch.rides(None) and watch.rides(1)
    watch.lost(1, 10.0)
    assert watch.waiting_for_leader(1) and refreshes
    watch.tick(16.0)
    assert [(e.kind, e.role, e.partition) for e in events] == [("waiting", "consume", 1)]
    watch.joined(1, "127.0.0.1:4250", 17.0)
    assert events[-1].kind == "resumed" and events[-1].nsqd == "127.0.0.1:4250"
    assert watch.rejoined == {1}

    watch.lost(1, 100.0)
    watch.tick(121.0)
    [error] = fatal
    assert isinstance(error, FailoverTimeoutError) and error.setting == "failover_window"
    assert error.partition == 1 and "--" not in str(error)
    watch.tick(200.0)
    assert len(fatal) == 1  # reported once


def test_partition_watch_events_are_the_shared_failover_event() -> None:
    watch = PartitionWatch("t", window=5.0)
    watch.lost(None, 0.0)
    event = watch.resumed(None, NSQD, 2.0)
    assert isinstance(event, FailoverEvent) and event.role == "consume"
    assert event.describe() == f"t: consuming again on {NSQD} after 2.0s"


def test_a_failover_window_of_zero_gives_up_at_once_as_a_publish_does() -> None:
    """0 means the same for every command and both clients: no wait for a new leader."""
    watch = PartitionWatch("t", window=0)
    watch.lost(1, now=100.0)
    _, error = watch.tick(100.001)
    assert isinstance(error, FailoverTimeoutError) and error.setting == "failover_window"
    patient = PartitionWatch("t", window=5)
    patient.lost(1, now=100.0)
    assert patient.tick(104.0)[1] is None and patient.tick(105.1)[1] is not None
