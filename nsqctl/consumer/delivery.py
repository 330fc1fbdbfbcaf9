"""Messages in, answers out: each read's messages go to the handler (or the iterator's
queue), an ordered partition's second copies are dropped, and FIN/REQ leave with their
in-flight, RDY and backoff bookkeeping. :class:`DeliveryPath` is the Responder of
:mod:`nsqctl.message`.

This is the consumer's hot path, kept in one piece: the work is done once per read (counts,
RDY, rate) and once per batch of answers (one FIN write), never per message where a read's
worth can be done at once. The collaborators it reports to are reached through bound
methods stored at construction, so a message costs no extra lookups.

Closing gives back once: :meth:`DeliveryPath.close` requeues (delay 0, no backoff) the
messages still waiting in the iterator's queue and those taken from an iterator that was
left, and every message that arrives after it (sent by nsqd before it saw RDY 0) is
requeued as it arrives, never handed out. What is still in hand when the consumer stops
waiting (a handler overrunning the stop timeout, a message an iteration in progress did
not answer, a message a handler kept with ``disable_auto_response()`` and did not answer)
is given back by :meth:`DeliveryPath.abandon`, which also cancels the overrunning
handlers. A kept message is known because the message registers itself when its handler
disables the auto-response (:meth:`DeliveryPath.take`, as an iterator's messages are):
a handler that lets the consumer answer pays nothing for it. A message given back is
answered, so nothing requeues it a second time, and a late ``finish()`` raises instead of
sending a FIN nsqd would refuse.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from nsqctl.consumer.handlers import (
    Handler,
    HandlerRunner,
    cancelled_from_outside,
    is_async_handler,
)
from nsqctl.consumer.order import OrderViolation
from nsqctl.consumer.touch import TouchTimer, touch_schedule
from nsqctl.message import Delivery, Message

if TYPE_CHECKING:
    from nsqctl.connection import Connection
    from nsqctl.consumer.options import ConsumerOptions
    from nsqctl.consumer.order import OrderChecker
    from nsqctl.consumer.partition_watch import FinWindow
    from nsqctl.consumer.position import ConfirmedPositions
    from nsqctl.consumer.stats import ConsumerStats
    from nsqctl.flow import BackoffController, RateLimiter, RdyController, RdyUpdate
    from nsqctl.protocol.raw_message import RawMessage
    from nsqctl.tracelog import TraceLog

log = logging.getLogger("nsqctl.consumer")

#: The consumer whose handler (or giving-up hook) the running code is part of; None
#: outside any. Set in each handler task's own context, which the tasks it starts copy.
_HANDLING: contextvars.ContextVar[DeliveryPath | None] = contextvars.ContextVar(
    "nsqctl_consumer_handling", default=None
)
_monotonic = time.monotonic

GiveUpHook = Callable[[Message], Awaitable[Any] | Any]
OrderEventHook = Callable[[OrderViolation], Any]


def _current_task() -> asyncio.Task[Any] | None:
    """The running task; None outside one (the path driven by hand, as its tests do)."""
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class FlowEvents(Protocol):
    """What the delivery path tells the flow machines (:class:`.rdy.FlowControl`): reads
    and answers go straight to the sans-IO machines (bound once, no wrapper call per
    message), and the RDY updates they return to :meth:`apply`, which sends them."""

    @property
    def rdy(self) -> RdyController: ...

    @property
    def backoff(self) -> BackoffController: ...

    @property
    def limiter(self) -> RateLimiter | None: ...

    @property
    def wake(self) -> asyncio.Event: ...

    def apply(self, updates: Sequence[RdyUpdate]) -> None: ...

    def succeeded(self, epochs: Sequence[int]) -> None: ...

    def failed(self, epoch: int, *, backoff: bool) -> None: ...


class FailoverBooks(Protocol):
    """The failover bookkeeping the delivery path feeds (:class:`.leaders.LeaderWatch`)."""

    @property
    def rejoined(self) -> set[int | None]: ...

    @property
    def fins(self) -> FinWindow: ...

    @property
    def order(self) -> OrderChecker: ...

    def count_duplicates(
        self, partition: int | None, raws: list[RawMessage], nsqd: str | None = None
    ) -> None: ...


class _EndOfStream:
    """Put in the iterator's queue once the consumer closes."""


#: Ends the iterator (the last item of :attr:`DeliveryPath.queue`).
END_OF_STREAM: Any = _EndOfStream()


class _HeldRequeue:
    """An ordered requeue the consumer holds for its delay (see
    :meth:`DeliveryPath.requeue_message`): released at ``release_at`` (the loop's clock)
    by ``timer``, and TOUCHed by ``touch`` until then (half its message timeout, from its
    arrival), so nsqd neither times it out nor sends it again.

    ``conn`` is None while the connection it was held on is gone: nsqd sends the message
    again on the next connection, and that copy is held for what is left of the delay."""

    __slots__ = ("conn", "key", "partition", "release_at", "timer", "touch")

    def __init__(
        self,
        conn: Connection | None,
        partition: int | None,
        key: tuple[int | None, int | None],
        release_at: float,
    ) -> None:
        self.conn = conn
        self.partition = partition
        self.key = key  # the message's (offset, internal id)
        self.release_at = release_at
        self.timer: asyncio.TimerHandle | None = None
        self.touch: TouchTimer | None = None

    def stop(self) -> None:
        """Cancel its release and its touches."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.touch is not None:
            self.touch.cancel()
            self.touch = None


class DeliveryPath:
    """Hands messages out and carries their answers back, for one consumer.

    Owns: the handler (or the iterator's queue), the in-flight count, the handler tasks,
    the per-connection :class:`~nsqctl.message.Delivery` records and the ordered
    partitions' pending/last-FINed marks.
    """

    def __init__(
        self,
        topic: str,
        channel: str,
        options: ConsumerOptions,
        stats: ConsumerStats,
        flow: FlowEvents,
        books: FailoverBooks,
        *,
        handler: Handler | None,
        giving_up: GiveUpHook,
        on_order_violation: OrderEventHook | None = None,
        trace_log: TraceLog | None = None,
        positions: ConfirmedPositions | None = None,
    ) -> None:
        self.topic = topic
        self.channel = channel
        self.stats = stats
        self.giving_up = giving_up
        self._ordered = options.ordered
        self._max_attempts = options.max_attempts
        self._default_requeue_delay = options.default_requeue_delay
        self._max_requeue_delay = options.max_requeue_delay
        self._handler = handler
        self._handler_is_async = handler is not None and is_async_handler(handler)
        # Handlers as tasks: async ones, and plain functions sent to threads. A plain
        # function without threads runs right in on_messages, on the loop.
        self._tasked = handler is not None and (self._handler_is_async or options.threads)
        # How a task runs its message: as before (one task per message, nothing more), or
        # through the runner that bounds concurrency, uses threads and touches.
        self._runner: HandlerRunner | None = None
        self._run: Callable[[Message], Coroutine[Any, Any, None]] = self._run_async
        if handler is not None and (
            options.concurrency is not None or options.threads or options.auto_touch
        ):
            self._runner = HandlerRunner(
                handler,
                concurrency=options.concurrency,
                threads=options.threads,
                auto_touch=options.auto_touch,
                stats=stats,
                on_failure=self._handler_failed,
            )
            self._run = self._runner.run
        self._queue: asyncio.Queue[Message] | None = None if handler else asyncio.Queue()
        self._on_order = on_order_violation
        self._trace = trace_log
        # Collaborators' methods, bound once: the hot path calls them without lookups.
        self._backoff = flow.backoff
        self._limiter = flow.limiter
        self._wake_timers = flow.wake.set
        self._rdy_received = flow.rdy.on_messages
        self._rdy_answered = flow.rdy.on_messages_done
        self._apply = flow.apply
        self._succeeded = flow.succeeded
        self._failed = flow.failed
        self._rejoined = books.rejoined
        self._count_duplicates = books.count_duplicates
        self._fins_add = books.fins.add_many
        self._books_order = books.order
        self._order_check = books.order.check
        # A partition's confirmed position (redesign partitions that ride a failover):
        # what was handed out and what was handled, by queue offset.
        self._positions_received = positions.received if positions is not None else None
        self._positions_handled = positions.handled if positions is not None else None
        self._deliveries: dict[int, Delivery] = {}  # by id(connection)
        # Running handler (and giving-up hook) tasks, with the message each holds.
        self._handler_tasks: dict[asyncio.Task[None], Message] = {}
        # Messages handed out to be answered later (answered ones pruned as it grows):
        # taken by the iterators, or (a consumer with a handler) kept by handlers that
        # disabled the auto-response, each registered by the message itself. And the tasks
        # that iterated (done ones pruned as another starts): while one of them runs, other
        # than the one closing, it may still answer what it took (see close).
        self._taken: list[Message] = []
        self._iterators: set[asyncio.Task[Any] | None] = set()
        # What a handler's message calls when the handler keeps it (see Delivery.keep):
        # an iterator's messages are taken as they are handed out already.
        self._keep = self.take if handler is not None else None
        self._in_flight = 0
        # Resolved when _in_flight drops to 0 while close waits for it (created there, so
        # the per-message path does not toggle an Event twice per message).
        self._idle: asyncio.Future[None] | None = None
        self._closing = False
        # Ordered (one message in flight per partition): partition -> (offset, internal id)
        # of the message handed out and not yet answered, and of the last one FINed.
        self._ordered_pending: dict[int | None, tuple[int | None, int | None]] = {}
        self._fin_marks: dict[int | None, tuple[int | None, int | None]] = {}
        # Ordered requeues with a delay, held here for their delay (see requeue_message):
        # message id -> its connection, partition, (offset, internal id) and timer.
        self._held: dict[bytes, _HeldRequeue] = {}

    # -- connections ----------------------------------------------------------------------

    def add(self, conn: Connection, partition: int | None) -> None:
        # with handler threads, a message's answers are carried to this (the running) loop
        loop = asyncio.get_running_loop() if self._runner and self._runner.threads else None
        self._deliveries[id(conn)] = Delivery(
            conn, self, self.topic, self.channel, partition, loop, self._keep
        )

    def remove(self, conn: Connection) -> None:
        self._deliveries.pop(id(conn), None)
        for held in self._held.values():
            if held.conn is conn:
                # nsqd gives back what a closed connection held and sends it again (same
                # id, offset and internal id) on the next one; the delay still owed holds
                # that copy (see _ordered_arrivals). Kept until the delay is over (its
                # release timer runs on): a copy arriving after it is handled as a fresh
                # message.
                held.conn = None
                if held.touch is not None:
                    held.touch.cancel()
                    held.touch = None

    @property
    def in_flight(self) -> int:
        """Messages received and not answered yet (queued, in a handler, or taken)."""
        return self._in_flight

    @property
    def is_iterator(self) -> bool:
        return self._queue is not None

    # -- messages in ----------------------------------------------------------------------

    def on_messages(self, conn: Connection, raws: list[RawMessage]) -> None:
        # The hot path: called once per read with every message it brought. Counts, RDY
        # and rate bookkeeping happen once per read, and a synchronous handler's FINs
        # leave together, after the whole read was handled.
        now = _monotonic()
        count = len(raws)
        self.stats.received += count
        self._in_flight += count
        cid = id(conn)
        updates = self._rdy_received(cid, count, now)
        if updates:
            self._apply(updates)
        if self._limiter is not None:
            self._limiter.on_messages(count, now)
            # The spent tokens give the limiter a refill deadline it had not (a full bucket
            # has none): the timer loop must look again, or it sleeps until the next FIN or
            # its one-second tick, and a reader holding messages in flight gets one per FIN.
            self._wake_timers()
        via = self._deliveries.get(cid)
        if via is None:  # a read that arrived as the connection was being dropped
            via = Delivery(conn, self, self.topic, self.channel, None, keep=self._keep)
        # The subscription, not the frame layout: SUB_ADVANCED (a start position) frames
        # carry offsets too, but a plain channel has many in flight and requeues.
        if self._ordered:
            raws = self._ordered_arrivals(conn, via, raws, now)
            if not raws:
                return
        track = self._positions_received
        if track is not None and via.partition is not None:
            track(via.partition, raws)
        if self._closing:  # sent before nsqd saw RDY 0: straight back, never handed out
            epoch = self._backoff.epoch
            self._give_back(conn, [Message(raw, via, now, epoch) for raw in raws])
            return
        rejoined = self._rejoined
        if rejoined and via.partition in rejoined:
            self._count_duplicates(via.partition, raws, via.nsqd_address)
        epoch = self._backoff.epoch
        max_attempts = self._max_attempts
        handler = self._handler
        if handler is None or self._tasked:
            queue = self._queue
            run = self._run
            for raw in raws:
                msg = Message(raw, via, now, epoch)
                if max_attempts and raw.attempts > max_attempts:
                    self._spawn(self._give_up(msg), msg)
                elif queue is not None:
                    queue.put_nowait(msg)
                else:
                    self._spawn(run(msg), msg)
            return
        done: list[Message] = []
        for raw in raws:
            msg = Message(raw, via, now, epoch)
            if max_attempts and raw.attempts > max_attempts:
                self._spawn(self._give_up(msg), msg)
                continue
            try:
                handler(msg)
            except (Exception, asyncio.CancelledError) as err:  # a plain function's own
                self._handler_failed(msg, err)
                continue
            if msg.outcome is None and msg.auto_response:
                msg.outcome = "FIN"  # msg.finish(), for the whole read below
                done.append(msg)
        if done:
            self.finish_messages(conn, done)

    def _ordered_arrivals(
        self, conn: Connection, via: Delivery, raws: list[RawMessage], now: float
    ) -> list[RawMessage]:
        """Check order and drop second copies of one message.

        youzan resets an ordered channel's reader (first ordered SUB on a channel, leader
        change) and sends the unconfirmed message again, with the same id. A copy of the
        message still being handled is dropped: the FIN that handling sends acknowledges
        the new copy too (FIN goes by id). A copy of the message FINed last is FINed again,
        since that FIN may have reached nsqd between the reset and the resend and failed.
        Either way the handler sees each message once.
        """
        fresh = []
        partition = via.partition
        pending = self._ordered_pending
        for raw in raws:
            key = (raw.offset, raw.internal_id)
            if key == pending.get(partition):
                self.stats.redelivered += 1
                self._settle(conn, 1)
                held = self._held.get(raw.id)
                if held is not None and held.conn is None and held.key == key:
                    # the resend of a requeue held on a connection since closed: held
                    # here for the rest of its delay, then given back on this connection
                    held.conn = conn
                    held.stop()
                    self._hold(raw.id, held, conn, touch_schedule(conn, now))
                continue
            if key == self._fin_marks.get(partition):
                msg = Message(raw, via, now, self._backoff.epoch)
                msg.outcome = "FIN"
                self.stats.redelivered += 1
                self.finish_messages(conn, [msg])
                continue
            violation = self._order_check(via.nsqd_address, partition, raw)
            if violation is not None:
                self._report_order(violation)
            pending[partition] = key
            fresh.append(raw)
        return fresh

    # -- an ordered partition read on a thread (see .lanes) ---------------------------------

    def lane_mark(self, partition: int | None) -> tuple[int | None, int | None] | None:
        """The (offset, internal id) of the partition's last FINed message, for a reader
        thread about to take the partition over; None when it cannot now (not ordered,
        closing, or a message of the partition handed out and not answered yet)."""
        if not self._ordered or self._closing or partition in self._ordered_pending:
            return None
        return self._fin_marks.get(partition, (None, None))

    @property
    def order_checker(self) -> OrderChecker:
        """The consumer's one order check: a reader thread checks its partition with it."""
        return self._books_order

    def lane_settled(
        self,
        partition: int | None,
        nsqd: str,
        raws: list[RawMessage],
        redelivered: int,
        violations: list[OrderViolation],
    ) -> None:
        """A reader thread's batch of one partition: ``raws`` received, written and FINed,
        in order; ``redelivered`` second copies it FINed again. The books as
        :meth:`on_messages` and :meth:`finish_messages` keep them, once per batch."""
        stats = self.stats
        stats.redelivered += redelivered
        for violation in violations:
            self._report_order(violation)
        if not raws:
            return
        count = len(raws)
        stats.received += count
        stats.finished += count
        if self._rejoined and partition in self._rejoined:
            self._count_duplicates(partition, raws, nsqd)
        self._fins_add(partition, [raw.id for raw in raws], nsqd)
        if self._positions_received is not None and partition is not None:
            self._positions_received(partition, raws)
            assert self._positions_handled is not None
            self._positions_handled(partition, raws)
        last = raws[-1]
        self._fin_marks[partition] = (last.offset, last.internal_id)

    def _spawn(self, coro: Coroutine[Any, Any, None], msg: Message) -> None:
        # The task runs in a context naming this consumer's handling: a task the handler
        # starts (wait_for, gather, create_task) copies it, so in_handler() holds there too.
        context = contextvars.copy_context()
        context.run(_HANDLING.set, self)
        task = asyncio.get_running_loop().create_task(coro, context=context)
        tasks = self._handler_tasks
        tasks[task] = msg
        task.add_done_callback(tasks.pop)

    async def _run_async(self, msg: Message) -> None:
        try:
            await self._handler(msg)  # type: ignore[misc]
        except asyncio.CancelledError as err:
            if cancelled_from_outside():
                raise
            self._handler_failed(msg, err)
            return
        except Exception as err:
            self._handler_failed(msg, err)
            return
        if msg.auto_response and msg.outcome is None:
            msg.finish()

    def _handler_failed(self, msg: Message, err: BaseException) -> None:
        log.warning(
            "handler failed on message %s (attempt %d): %s: %s",
            msg.id_text,
            msg.attempts,
            type(err).__name__,
            err,
            exc_info=err,
        )
        if msg.auto_response and msg.outcome is None:
            msg.requeue(backoff=True)

    async def _give_up(self, msg: Message) -> None:
        try:
            result = self.giving_up(msg)
            if inspect.isawaitable(result):
                await result
        except asyncio.CancelledError as err:
            if cancelled_from_outside():
                raise
            self._giving_up_failed(msg, err)  # the hook's own, as for a handler
            return
        except Exception as err:
            self._giving_up_failed(msg, err)
            return
        self.stats.given_up += 1
        msg._respond("giving-up")
        self.finish_messages(msg.delivery.conn, [msg])

    def _giving_up_failed(self, msg: Message, err: BaseException) -> None:
        log.error(
            "giving-up hook failed on %s (%s: %s): requeueing it",
            msg.id_text,
            type(err).__name__,
            err,
            exc_info=err,
        )
        msg.requeue(backoff=False)

    def _report_order(self, violation: OrderViolation) -> None:
        if violation.kind == "regression":
            self.stats.order_regressions += 1
        else:
            self.stats.order_gaps += 1
        log.warning(
            "order %s on %s partition %s: offset %d (id %d) after offset %d (id %d)",
            violation.kind,
            violation.topic,
            violation.partition,
            violation.offset,
            violation.internal_id,
            violation.previous_offset,
            violation.previous_internal_id,
        )
        if self._on_order is not None:
            self._on_order(violation)

    @property
    def queue(self) -> asyncio.Queue[Message] | None:
        """The iterator's messages, in arrival order, then :data:`END_OF_STREAM`; None
        with a handler."""
        return self._queue

    # -- answers out: the Responder side of nsqctl.message ---------------------------------

    def finish_messages(self, conn: Connection, msgs: list[Message]) -> None:
        """FIN ``msgs`` of ``conn`` (each already marked answered), in one write."""
        count = len(msgs)
        self._settle(conn, count)
        if self._trace is not None:
            for msg in msgs:
                self._trace_outcome(msg, conn, msg.outcome or "FIN")
        last = msgs[-1].raw
        ids = [last.id] if count == 1 else [msg.raw.id for msg in msgs]
        if conn.is_open:
            conn.fin_many(ids)
        via = msgs[0].delivery  # one connection: one partition of one nsqd
        partition = via.partition
        # ids are unique per partition on the redesign, per nsqd on the original family
        self._fins_add(partition, ids, via.nsqd_address)
        handled = self._positions_handled
        if handled is not None and partition is not None:
            handled(partition, [msg.raw for msg in msgs])
        if self._ordered:
            key = (last.offset, last.internal_id)
            self._fin_marks[partition] = key
            if self._ordered_pending.get(partition) == key:
                del self._ordered_pending[partition]
        self.stats.finished += count
        if self._backoff.level:  # a success changes nothing at level 0
            self._succeeded([msg._epoch for msg in msgs])

    def requeue_message(
        self, msg: Message, conn: Connection, delay: float | None, backoff: bool
    ) -> None:
        """REQ one message of ``conn`` (already marked answered).

        On an ordered subscription youzan's nsqd ignores a REQ with a delay (a delay
        would block the partition, it says) and leaves the message in flight until its
        timeout, whatever the delay asked. So the consumer holds such a requeue for the
        delay itself (TOUCHing it at half its timeout, so nsqd does not send it again
        meanwhile) and then sends REQ 0; the partition waits, as ordering requires, and
        the message stays pending, so a resend of it (a reset reader) is taken for the
        copy it is. Closing sends what is held at once.
        """
        if delay is None:
            delay = self._default_requeue_delay * msg.attempts
        cap = self._max_requeue_delay
        if conn.identify and conn.identify.max_msg_timeout:
            cap = min(cap, conn.identify.max_msg_timeout / 1000.0)
        delay_ms = int(max(0.0, min(delay, cap)) * 1000)
        self._settle(conn, 1)
        if self._trace is not None:
            self._trace_outcome(msg, conn, "REQ")
        partition = msg.delivery.partition
        if self._ordered and delay_ms and conn.is_open and not self._closing:
            raw = msg.raw
            release_at = asyncio.get_running_loop().time() + delay_ms / 1000.0
            key = (raw.offset, raw.internal_id)
            held = _HeldRequeue(conn, partition, key, release_at)
            self._held[raw.id] = held
            # the first TOUCH counts from the arrival: the handler's time is nsqd's too
            self._hold(raw.id, held, conn, touch_schedule(conn, msg.received_at))
        else:
            if self._ordered:
                self._ordered_pending.pop(partition, None)
            if conn.is_open:
                conn.req(msg.id, delay_ms)
        self.stats.requeued += 1
        self._failed(msg._epoch, backoff=backoff)

    def _hold(
        self, msg_id: bytes, held: _HeldRequeue, conn: Connection, schedule: tuple[float, float]
    ) -> None:
        """Release the held message at its release time, and TOUCH it on ``conn`` on
        ``schedule`` until then (a delay longer than its timeout would otherwise have nsqd
        time it out and send it again and again, each time one more attempt)."""
        loop = asyncio.get_running_loop()
        if held.release_at <= loop.time():
            self._release_requeue(msg_id)
            return
        held.timer = loop.call_at(held.release_at, self._release_requeue, msg_id)
        held.touch = TouchTimer(conn, msg_id, schedule, self.stats, until=held.release_at)

    def _release_requeue(self, msg_id: bytes) -> None:
        """An ordered requeue held for its delay goes out now, as REQ 0 (see
        :meth:`requeue_message`)."""
        held = self._held.pop(msg_id, None)
        if held is None:
            return
        held.stop()
        if self._ordered_pending.get(held.partition) == held.key:
            del self._ordered_pending[held.partition]
        if held.conn is not None and held.conn.is_open:
            held.conn.req(msg_id, 0)

    def _settle(self, conn: Connection, count: int) -> None:
        """``count`` messages of ``conn`` are being answered: in-flight and RDY bookkeeping,
        before their FIN/REQ is queued, so RDY changes go out first."""
        in_flight = self._in_flight - count
        if in_flight <= 0:
            in_flight = 0
            if self._idle is not None and not self._idle.done():
                self._idle.set_result(None)
        self._in_flight = in_flight
        updates = self._rdy_answered(id(conn), count, _monotonic())
        if updates:
            self._apply(updates)
        self.stats.backoff_level = self._backoff.level

    def _trace_outcome(self, msg: Message, conn: Connection, outcome: str) -> None:
        assert self._trace is not None
        record = msg.describe()
        record.update(
            kind="consume",
            nsqd=conn.remote_address or str(conn.address),
            local_address=conn.local_address,
            outcome=outcome,
            handler_ms=round((_monotonic() - msg.received_at) * 1000, 3),
        )
        self._trace.write(record)

    # -- closing --------------------------------------------------------------------------

    def close(self) -> int:
        """Hand out nothing more: give back the messages waiting in the iterator's queue
        (each once: they are marked answered), end the iterator, and from now on give
        back every arrival. Returns how many were given back here."""
        if self._closing:
            return 0
        self._closing = True
        for msg_id in list(self._held):  # requeues held for their delay: given back now
            self._release_requeue(msg_id)
        queue = self._queue
        if queue is None:  # handlers: those waiting for a free one are not started
            return self.give_back(self._runner.waiting()) if self._runner is not None else 0
        waiting: list[Message] = []
        while not queue.empty():
            msg = queue.get_nowait()
            if msg is not END_OF_STREAM:
                waiting.append(msg)
        queue.put_nowait(END_OF_STREAM)
        if self._nobody_to_answer():
            waiting += self._taken
        return self.give_back(waiting)

    def _nobody_to_answer(self) -> bool:
        """Whether no task can answer what the iterators took any more: each task that
        iterated is the one closing (it waits for the close) or has ended. Then what was
        taken goes back at once. Otherwise it is kept for the close's ``stop_timeout``
        (:meth:`abandon` then gives back what is left): a loop ended by the close, or left
        with ``break`` on a flag a close from another task set, is followed by the code
        that writes its batch and finishes it, and giving the batch back under it would
        have it handled twice. Whether the loop was left by ``break`` cannot say which:
        Python closes a left async generator only later, from a task of its own."""
        closing = _current_task()
        return all(
            task is closing or (task is not None and task.done()) for task in self._iterators
        )

    def give_back(self, msgs: Iterable[Message]) -> int:
        """Give back (REQ, no delay, no backoff) those of ``msgs`` still unanswered, one
        write per connection, each once even when listed twice (a running handler's
        message it also kept); returns how many."""
        by_conn: dict[int, list[Message]] = {}  # by id(Delivery): one connection each
        for msg in msgs:
            if msg.outcome is None:
                msg.outcome = "REQ"  # answered from here on: a second listing is skipped
                by_conn.setdefault(id(msg.delivery), []).append(msg)
        for group in by_conn.values():
            self._give_back(group[0].delivery.conn, group)
        return sum(len(group) for group in by_conn.values())

    # -- the iterator's messages ----------------------------------------------------------

    def iteration_started(self) -> None:
        """An iteration begins, in the running task (see :meth:`_nobody_to_answer`)."""
        self._iterators = {t for t in self._iterators if t is not None and not t.done()}
        self._iterators.add(_current_task())

    def take(self, msg: Message) -> None:
        """``msg`` is handed out by an iterator (close gives it back if it is unanswered
        when nobody iterates any more), or kept by a handler that disabled the
        auto-response (:meth:`abandon` gives it back if it is unanswered then). Answered
        ones are dropped as the list grows, so it stays about the size of what is in hand
        however many messages a long-running consumer keeps and answers."""
        taken = self._taken
        taken.append(msg)
        if len(taken) > 2 * self._in_flight + 64:
            self._taken = [m for m in taken if m.outcome is None]

    def kept_unanswered(self) -> int:
        """Messages kept by handlers that returned (auto-response disabled) and not
        answered yet (closing counts them apart); 0 for an iterator."""
        if self._queue is not None:
            return 0
        running = {id(msg) for msg in self._handler_tasks.values()}
        return sum(1 for msg in self._taken if msg.outcome is None and id(msg) not in running)

    def in_handler(self) -> bool:
        """Whether the running code is one of this consumer's handlers (or give-up hooks),
        or a task one of them started: a close() there that waited for the handlers
        would wait for the very handler waiting on it."""
        return _HANDLING.get() is self

    def abandon(self) -> list[asyncio.Task[None]]:
        """The consumer stops waiting: give back every message still unanswered (held
        by a handler, kept by one that returned, or taken from an iterator) and cancel
        the handlers still running. Returns the cancelled tasks. Whoever answers after
        this gets AlreadyRespondedError: the message was given back, once."""
        tasks = list(self._handler_tasks)
        self.give_back([*self._handler_tasks.values(), *self._taken])
        for task in tasks:
            task.cancel()
        return tasks

    @property
    def threads(self) -> bool:
        """Handlers run in threads (which a cancel cannot stop)."""
        return self._runner is not None and self._runner.threads

    def shutdown(self) -> None:
        """The consumer is closed: let the handler threads go (a thread still running a
        handler ends when the handler returns)."""
        if self._runner is not None:
            self._runner.shutdown()

    def _give_back(self, conn: Connection, msgs: list[Message]) -> None:
        """REQ with no delay and no backoff (a closing consumer, not a failing handler):
        another consumer of the channel can have them at once."""
        count = len(msgs)
        self._settle(conn, count)
        if self._ordered:
            self._ordered_pending.pop(msgs[0].delivery.partition, None)
        is_open = conn.is_open
        trace = self._trace
        for msg in msgs:
            msg.outcome = "REQ"
            if trace is not None:
                self._trace_outcome(msg, conn, "REQ")
            if is_open:
                conn.req(msg.raw.id, 0)
        self.stats.requeued += count

    async def wait_idle(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for every message to be answered; returns how
        many are still unanswered."""
        if self._in_flight:
            self._idle = asyncio.get_running_loop().create_future()
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(self._idle)
            except TimeoutError:
                pass
        return self._in_flight
