"""Messages in, answers out: each read's messages go to the handler (or the iterator's
queue), an ordered partition's second copies are dropped, and FIN/REQ leave with their
in-flight, RDY and backoff bookkeeping (the Responder side of :mod:`nsqctl.message`).

Its own module because it is the Consumer's hot path, read as one piece; cut from
:mod:`nsqctl.consumer.client` along its sections. Layer: above :mod:`.rdy`, below
:mod:`.connections` (whose connections hand it their reads).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from nsqctl.consumer.order import OrderViolation
from nsqctl.consumer.rdy import _RdyMixin
from nsqctl.message import Delivery, Message

if TYPE_CHECKING:
    from nsqctl.connection import Connection
    from nsqctl.consumer.options import ConsumerOptions
    from nsqctl.protocol.message import RawMessage
    from nsqctl.tracelog import TraceLog

log = logging.getLogger("nsqctl.consumer")
_monotonic = time.monotonic

Handler = Callable[[Message], Awaitable[Any] | Any]
GiveUpHook = Callable[[Message], Awaitable[Any] | Any]
OrderEventHook = Callable[[OrderViolation], Any]


class _DeliveryMixin(_RdyMixin):
    """Message handling and answering of :class:`nsqctl.consumer.Consumer`."""

    topic: str
    channel: str
    options: ConsumerOptions
    _handler: Handler | None
    _handler_is_async: bool
    _queue: asyncio.Queue[Message] | None
    _giving_up: GiveUpHook
    _on_order: OrderEventHook | None
    _trace: TraceLog | None
    _deliveries: dict[int, Delivery]
    _handler_tasks: set[asyncio.Task[None]]
    _in_flight: int
    _idle: asyncio.Future[None] | None
    _ordered_pending: dict[int | None, tuple[int | None, int | None]]
    _fin_marks: dict[int | None, tuple[int | None, int | None]]

    def _on_messages(self, conn: Connection, raws: list[RawMessage]) -> None:
        # The hot path: called once per read with every message it brought. Counts, RDY
        # and rate bookkeeping happen once per read, and a synchronous handler's FINs
        # leave together, after the whole read was handled.
        now = _monotonic()
        count = len(raws)
        self.stats.received += count
        self._in_flight += count
        cid = id(conn)
        updates = self._rdy.on_messages(cid, count, now)
        if updates:
            self._apply(updates)
        if self._limiter is not None:
            self._limiter.on_messages(count, now)
        via = self._deliveries.get(cid)
        if via is None:  # a read that arrived as the connection was being dropped
            via = Delivery(conn, self, self.topic, self.channel, None)
        # The subscription, not the frame layout: SUB_ADVANCED (a start position) frames
        # carry offsets too, but a plain channel has many in flight and requeues.
        if self.options.ordered:
            raws = self._ordered_arrivals(conn, via, raws, now)
            if not raws:
                return
        if self._rejoined and via.partition in self._rejoined:
            self._count_duplicates(via.partition, raws)
        epoch = self._backoff.epoch
        max_attempts = self.options.max_attempts
        handler = self._handler
        if handler is None or self._handler_is_async:
            queue = self._queue
            for raw in raws:
                msg = Message(raw, via, now, epoch)
                if max_attempts and raw.attempts > max_attempts:
                    self._spawn(self._give_up(msg))
                elif queue is not None:
                    queue.put_nowait(msg)
                else:
                    self._spawn(self._run_async(msg))
            return
        done: list[Message] = []
        for raw in raws:
            msg = Message(raw, via, now, epoch)
            if max_attempts and raw.attempts > max_attempts:
                self._spawn(self._give_up(msg))
                continue
            try:
                handler(msg)
            except Exception as err:
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
        for raw in raws:
            key = (raw.offset, raw.internal_id)
            if key == self._ordered_pending.get(partition):
                self.stats.redelivered += 1
                self._settle(conn, 1)
                continue
            if key == self._fin_marks.get(partition):
                msg = Message(raw, via, now, self._backoff.epoch)
                msg.outcome = "FIN"
                self.stats.redelivered += 1
                self.finish_messages(conn, [msg])
                continue
            violation = self._order.check(via.nsqd_address, partition, raw)
            if violation is not None:
                self._report_order(violation)
            self._ordered_pending[partition] = key
            fresh.append(raw)
        return fresh

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._handler_tasks.add(task)
        task.add_done_callback(self._handler_tasks.discard)

    async def _run_async(self, msg: Message) -> None:
        try:
            await self._handler(msg)  # type: ignore[misc]
        except Exception as err:
            self._handler_failed(msg, err)
            return
        if msg.auto_response and msg.outcome is None:
            msg.finish()

    def _handler_failed(self, msg: Message, err: Exception) -> None:
        log.warning("handler failed on message %s (attempt %d): %s", msg.id_text, msg.attempts, err)
        if msg.auto_response and msg.outcome is None:
            msg.requeue(backoff=True)

    async def _give_up(self, msg: Message) -> None:
        try:
            result = self._giving_up(msg)
            if inspect.isawaitable(result):
                await result
        except Exception as err:
            log.error("giving-up hook failed on %s (%s): requeueing it", msg.id_text, err)
            msg.requeue(backoff=False)
            return
        self.stats.given_up += 1
        msg._respond("giving-up")
        self.finish_messages(msg._via.conn, [msg])

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

    # The Responder side of nsqctl.message: Message.finish / requeue / finish_all call these.
    def finish_messages(self, conn: Connection, msgs: list[Message]) -> None:
        """FIN ``msgs`` of ``conn`` (each already marked answered), in one write."""
        count = len(msgs)
        self._settle(conn, count)
        if self._trace is not None:
            for msg in msgs:
                self._trace_outcome(msg, conn, msg.outcome or "FIN")
        ids = [msg._raw.id for msg in msgs]
        if conn.is_open:
            conn.fin_many(ids)
        self._fins.add_many(msgs[0]._via.partition, ids)  # one connection: one partition
        if self.options.ordered:
            last = msgs[-1]
            key = (last._raw.offset, last._raw.internal_id)
            self._fin_marks[last._via.partition] = key
            if self._ordered_pending.get(last._via.partition) == key:
                del self._ordered_pending[last._via.partition]
        self.stats.finished += count
        backoff = self._backoff
        if backoff.level:  # on_success does nothing at level 0
            for msg in msgs:
                action = backoff.on_success(_monotonic(), msg._epoch)
                if action is not None:
                    self._apply(self._rdy.apply_backoff(action, _monotonic()))
                    self._wake.set()

    def requeue_message(
        self, msg: Message, conn: Connection, delay: float | None, backoff: bool
    ) -> None:
        """REQ one message of ``conn`` (already marked answered)."""
        if self.options.ordered:
            self._ordered_pending.pop(msg._via.partition, None)
        if delay is None:
            delay = self.options.default_requeue_delay * msg.attempts
        cap = self.options.max_requeue_delay
        if conn.identify and conn.identify.max_msg_timeout:
            cap = min(cap, conn.identify.max_msg_timeout / 1000.0)
        delay_ms = int(max(0.0, min(delay, cap)) * 1000)
        self._settle(conn, 1)
        if self._trace is not None:
            self._trace_outcome(msg, conn, "REQ")
        if conn.is_open:
            conn.req(msg.id, delay_ms)
        self.stats.requeued += 1
        now = time.monotonic()
        action = (
            self._backoff.on_failure(now, msg._epoch)
            if backoff
            else self._backoff.on_neutral(now, msg._epoch)
        )
        if action is not None:
            self._apply(self._rdy.apply_backoff(action, now))
            self._wake.set()

    def _settle(self, conn: Connection, count: int) -> None:
        """``count`` messages of ``conn`` are being answered: in-flight and RDY bookkeeping,
        before their FIN/REQ is queued, so RDY changes go out first."""
        in_flight = self._in_flight - count
        if in_flight <= 0:
            in_flight = 0
            if self._idle is not None and not self._idle.done():
                self._idle.set_result(None)
        self._in_flight = in_flight
        updates = self._rdy.on_messages_done(id(conn), count, _monotonic())
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
            handler_ms=round((time.monotonic() - msg.received_at) * 1000, 3),
        )
        self._trace.write(record)
