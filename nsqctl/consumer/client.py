"""Consumer: subscribe a topic/channel on every nsqd (every partition on the redesign),
hand messages to a handler, and keep RDY, backoff and rate limits right.

The decisions live in the sans-IO machines of :mod:`nsqctl.flow`; this module feeds them
events (message, FIN/REQ, timers, connections coming and going) and sends the RDY
commands they return. Nothing is acknowledged before the handler finished: FIN is sent
after the handler returns (or when the handler calls ``finish()`` itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nsqctl import protocol as p
from nsqctl.addresses import HostPort, parse_addresses
from nsqctl.connection import ConnectError, Connection, ConnectionConfig
from nsqctl.consumer.failover import FinWindow, LeaderWait, PartitionWatch
from nsqctl.consumer.options import (
    _ORDERED_START,
    ConsumerOptions,
    ConsumerStats,
    NoConnectionError,
)
from nsqctl.consumer.order import OrderChecker, OrderViolation
from nsqctl.deadletter import DeadLetterFile, dead_letter_path
from nsqctl.errors import ConfigError, NsqctlError
from nsqctl.flow import BackoffController, RateLimiter, RdyController
from nsqctl.lookup.model import Topology
from nsqctl.message import Delivery, Message
from nsqctl.protocol.message import RawMessage
from nsqctl.protocol.names import validate_channel, validate_topic
from nsqctl.tracelog import TraceLog

if TYPE_CHECKING:
    from nsqctl.lookup.client import LookupClient

log = logging.getLogger("nsqctl.consumer")
_monotonic = time.monotonic

Handler = Callable[[Message], Awaitable[Any] | Any]
GiveUpHook = Callable[[Message], Awaitable[Any] | Any]
OrderEventHook = Callable[[OrderViolation], Any]
FailoverHook = Callable[[LeaderWait], Any]

_Target = tuple[str, int | None]  # (nsqd tcp address, partition)

class Consumer:
    """Consume ``topic``/``channel`` with a handler, or iterate: ``async for msg in c``.

    A handler that returns normally gets its message FINed; one that raises gets it
    requeued with backoff; one that called ``finish()``/``requeue()`` (or
    ``disable_auto_response()``) answers itself. In the iterator form the caller must answer.
    """

    def __init__(
        self,
        topic: str,
        channel: str,
        handler: Handler | None = None,
        *,
        lookupd_http: Sequence[str | HostPort] | str | None = None,
        nsqd_tcp: Sequence[str | HostPort] | str | None = None,
        config: ConnectionConfig | None = None,
        options: ConsumerOptions | None = None,
        giving_up: GiveUpHook | None = None,
        on_order_violation: OrderEventHook | None = None,
        on_failover: FailoverHook | None = None,
        trace_log: TraceLog | None = None,
        **option_overrides: Any,
    ) -> None:
        self.topic = validate_topic(topic)
        self.channel = validate_channel(channel)
        if not lookupd_http and not nsqd_tcp:
            raise ConfigError("no cluster given: pass --lookupd HOST:PORT or --nsqd HOST:PORT")
        opts = options or ConsumerOptions()
        for key, value in option_overrides.items():
            if not hasattr(opts, key):
                raise TypeError(f"unknown consumer option {key!r}")
            setattr(opts, key, value)
        if opts.ordered and opts.start is not None:
            raise ConfigError(_ORDERED_START)
        self.options = opts
        self.config = config or ConnectionConfig()
        self._handler = handler
        self._queue: asyncio.Queue[Message] | None = None if handler else asyncio.Queue()
        self._nsqd = parse_addresses(nsqd_tcp, example="127.0.0.1:4150") if nsqd_tcp else []
        self._lookup: LookupClient | None = None
        if lookupd_http:
            from nsqctl.lookup.client import LookupClient  # httpx only when lookupd is used

            self._lookup = LookupClient(
                lookupd_http, poll_interval=opts.lookup_interval, jitter=opts.lookup_jitter
            )
        self._rng = random.Random(opts.seed)
        self._rdy = RdyController(
            opts.max_in_flight,
            rng=self._rng,
            fixed_rdy_one=opts.ordered,
            redistribute_interval=opts.rdy_redistribute_interval,
            low_rdy_idle_timeout=opts.low_rdy_idle_timeout,
            low_rdy_timeout=opts.low_rdy_timeout,
        )

        self._backoff = BackoffController(
            backoff_multiplier=opts.backoff_multiplier, max_backoff_duration=opts.max_backoff
        )
        self._limiter = (
            RateLimiter(opts.max_rate, time.monotonic(), max_burst=max(1, opts.max_in_flight))
            if opts.max_rate
            else None
        )
        self._giving_up = giving_up or DeadLetterFile(dead_letter_path(self.topic, self.channel))
        self._on_order = on_order_violation
        self._on_failover = on_failover
        self._watch = PartitionWatch(self.topic, opts.failover_window)
        self._fins = FinWindow()
        self._rejoined: set[int | None] = set()  # partitions connected again after a loss
        self._ever: set[int | None] = set()  # partitions connected at least once
        self.failed = asyncio.Event()  # set with ``error`` when the consumer cannot go on
        self.error: BaseException | None = None
        self._order = OrderChecker(self.topic)
        # Ordered (one message in flight per partition): partition -> (offset, internal id)
        # of the message handed out and not yet answered, and of the last one FINed.
        self._ordered_pending: dict[int | None, tuple[int | None, int | None]] = {}
        self._fin_marks: dict[int | None, tuple[int | None, int | None]] = {}
        self._trace = trace_log
        self.stats = ConsumerStats()
        self._conns: dict[_Target, Connection] = {}
        self._deliveries: dict[int, Delivery] = {}  # by id(connection)
        self._targets: set[_Target] = set()
        self._connecting: dict[_Target, asyncio.Task[None]] = {}
        self._reconnect_delay: dict[_Target, float] = {}
        self._connect_errors: dict[str, str] = {}  # nsqd address -> last failure (start-up)
        self._handler_tasks: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        # Resolved when _in_flight drops to 0 while stop() waits for it (created there, so
        # the per-message path does not toggle an Event twice per message).
        self._idle: asyncio.Future[None] | None = None
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._started = False
        self._stopping = False
        self._fatal: BaseException | None = None
        self._handler_is_async = handler is not None and inspect.iscoroutinefunction(handler)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Connect everywhere the topic lives and start receiving."""
        if self._started:
            return
        self._started = True
        now = time.monotonic()
        if self._limiter is not None:
            self._apply(self._rdy.set_rate_cap(self._limiter.allowance(now), now))
        self._tasks.append(asyncio.create_task(self._flow_loop(), name="nsq-flow"))
        if self._lookup is not None:
            # consistent: each partition on its elected leader only, so a new leader is
            # found as soon as it is elected (see LookupClient.lookup)
            topo = await self._lookup.lookup(
                self.topic, access="r", metainfo=True, consistent=True
            )
            if topo.meta is not None and topo.meta.extend_support:  # nsqd requires it
                self.config = replace(self.config, extend_support=True)
            await self._sync_targets(topo)
            self._tasks.append(
                self._lookup.start_polling(
                    self.topic, self._sync_targets, access="r", metainfo=True, consistent=True
                )
            )
        else:
            topo = Topology.from_nsqd_addresses(self._nsqd, topic=self.topic)
            await self._sync_targets(topo)
        await self._await_first_connection()
        if self._fatal is not None:
            await self.stop()
            raise self._fatal

    async def _await_first_connection(self) -> None:
        """Fail fast when the known nsqds cannot be reached at all (a wrong address, nothing
        running); a topic lookupd lists on no nsqd yet is waited for, like nsq_tail does."""
        limit = self.options.connect_timeout
        if limit is None:
            return
        deadline = time.monotonic() + limit
        while not self._conns and self._targets and self._fatal is None:
            if time.monotonic() >= deadline:
                tried = " | ".join(self._connect_errors.values()) or "no answer"
                self._fatal = NoConnectionError(
                    f"no nsqd of topic {self.topic!r} reachable within {limit:g}s: {tried}"
                )
                return
            await asyncio.sleep(0.05)

    async def stop(self, timeout: float | None = None) -> None:
        """Stop RDY, wait for in-flight handlers (bounded), CLS and close everything."""
        if self._stopping:
            return
        self._stopping = True
        timeout = self.options.stop_timeout if timeout is None else timeout
        # Through the controller, so the flow loop (rate refills) cannot reopen RDY.
        self._apply(self._rdy.set_max_in_flight(0, time.monotonic()))
        for task in list(self._connecting.values()):
            task.cancel()
        if self._in_flight:
            self._idle = asyncio.get_running_loop().create_future()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._idle), timeout)
        if self._in_flight:
            log.warning(
                "stopping with %d message(s) still in a handler: nsqd redelivers them "
                "after msg_timeout",
                self._in_flight,
            )
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(
            *(c.close() for c in list(self._conns.values())), return_exceptions=True
        )
        self._conns.clear()
        if self._lookup is not None:
            await self._lookup.aclose()
        if self._queue is not None:
            self._queue.put_nowait(_STOP)  # type: ignore[arg-type]

    async def run_forever(self) -> None:
        await self.start()
        try:
            await asyncio.Event().wait()
        finally:
            await self.stop()

    def __aiter__(self) -> AsyncIterator[Message]:
        if self._queue is None:
            raise ConfigError("this consumer has a handler; iterate only a handler-less one")
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Message]:
        assert self._queue is not None
        if not self._started:
            await self.start()
        while True:
            msg = await self._queue.get()
            if msg is _STOP:
                return
            yield msg

    # ------------------------------------------------------------------ introspection

    def is_starved(self) -> bool:
        """True when some connection's window is (nearly) full of in-flight messages."""
        return self._rdy.is_starved()

    def set_max_in_flight(self, value: int) -> None:
        self._apply(self._rdy.set_max_in_flight(value, time.monotonic()))

    @property
    def connections(self) -> dict[_Target, Connection]:
        return dict(self._conns)

    def rdy_of(self, target: _Target) -> int:
        conn = self._conns[target]
        return self._rdy.rdy(id(conn))

    @property
    def total_rdy(self) -> int:
        return self._rdy.total_rdy

    # ------------------------------------------------------------------ connections

    async def _sync_targets(self, topo: Topology) -> None:
        wanted = set()
        for peer, part in topo.targets():
            if self.options.partitions is not None and part not in self.options.partitions:
                continue
            wanted.add((peer.tcp_address, part))
        if topo.stale and not wanted:
            return
        if not topo.stale:
            for target in set(self._conns) - wanted:
                if self._lookup is not None:
                    log.info("nsqd %s partition %s left topic %s", *target, self.topic)
                    conn = self._conns.pop(target)
                    self._drop_conn(conn)
                    await conn.close()
        self._targets = wanted | (self._targets if topo.stale else set())
        await asyncio.gather(*(self._ensure(t) for t in wanted if t not in self._conns))

    async def _ensure(self, target: _Target) -> None:
        if target in self._conns or target in self._connecting or self._stopping:
            return
        task = asyncio.current_task()
        assert task is not None
        self._connecting[target] = task
        try:
            await self._connect(target)
        finally:
            if self._connecting.get(target) is task:  # a scheduled retry may have replaced us
                del self._connecting[target]

    async def _connect(self, target: _Target) -> None:
        address, partition = target
        try:
            conn = await Connection.open(
                address,
                self.config,
                on_messages=self._on_messages,
                on_error=self._on_conn_error,
                on_close=lambda c, err: self._on_close(target, c, err),
            )
        except (ConnectError, OSError) as err:
            text = str(err) if isinstance(err, ConnectError) else f"{address}: {err}"
            self._connect_errors[address] = text
            # Before anything ever connected the start-up check reports it in one line.
            log.log(logging.WARNING if self.stats.connections or self._conns else logging.INFO,
                    "%s", text)
            self._schedule_reconnect(target)
            return
        try:
            await conn.subscribe(
                self.topic,
                self.channel,
                partition,
                ordered=self.options.ordered,
                start=self.options.start,
            )
        except p.SubOrderIsMustError as err:
            self._fatal = ConfigError(_ORDERED_START) if self.options.start else err
            await conn.close()
            return
        except (
            p.BadTopicError,
            p.BadChannelError,
            p.SubExtendNeedError,
            p.SubExtendForbiddenError,
            ConfigError,
        ) as err:
            self._fatal = err
            await conn.close()
            return
        except NsqctlError as err:
            log.warning("subscribe on %s failed: %s", address, err)
            await conn.close()
            self._schedule_reconnect(target)
            return
        self._conns[target] = conn
        self._deliveries[id(conn)] = Delivery(conn, self, self.topic, self.channel, partition)
        self._reconnect_delay.pop(target, None)
        self._joined(partition, address)
        self.stats.connections = len(self._conns)
        self._apply(self._rdy.add_connection(id(conn), conn.max_rdy_count, time.monotonic()))

    def _on_close(self, target: _Target, conn: Connection, err: BaseException | None) -> None:
        if self._conns.get(target) is not conn:
            return  # closed while connecting or subscribing: _connect handles that
        del self._conns[target]
        self._drop_conn(conn)
        if err is not None and not self._stopping:
            log.warning("lost %s: %s", target[0], err)
            self.stats.reconnects += 1
            if self._rides(target[1]):
                self._watch.lost(target[1], time.monotonic())
            self._schedule_reconnect(target)
            if self._lookup is not None:
                self._lookup.request_refresh()

    def _drop_conn(self, conn: Connection) -> None:
        with contextlib.suppress(KeyError):
            self._apply(self._rdy.remove_connection(id(conn), time.monotonic()))
        self._deliveries.pop(id(conn), None)
        self.stats.connections = len(self._conns)

    def _schedule_reconnect(self, target: _Target) -> None:
        pending = self._connecting.get(target)
        if self._stopping or (pending is not None and pending is not asyncio.current_task()):
            return  # another attempt is already under way
        if self._lookup is not None and target not in self._targets:
            return
        delay = self._reconnect_delay.get(target, self.options.reconnect_initial)
        self._reconnect_delay[target] = min(delay * 2, self.options.reconnect_max)
        if self._rides(target[1]) and self._watch.waiting:
            # Waiting for a new leader: the lookup refresh below finds it, so the dead
            # address is not worth a long backoff; the refresh is paced by this delay.
            delay = min(delay, 1.0)
            assert self._lookup is not None
            self._lookup.request_refresh()
        jittered = delay * (0.8 + 0.4 * self._rng.random())

        async def later() -> None:
            await asyncio.sleep(jittered)
            self._connecting.pop(target, None)
            await self._ensure(target)

        task = asyncio.create_task(later(), name=f"nsq-reconnect-{target[0]}")
        self._connecting[target] = task

    def _on_conn_error(self, conn: Connection, err: p.ServerError) -> None:
        if conn.layout.ordered and err.code == "E_FIN_FAILED":
            # youzan resets an ordered channel's reader (first ordered SUB, leader change):
            # the message comes again and is FINed then, without a second handling.
            log.info("nsqd %s: %s (expected after an ordered reset)", conn.address, err)
            return
        log.warning("nsqd %s: %s", conn.address, err)

    # ------------------------------------------------------------------ messages

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
        if conn.layout.ordered:
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

    # ------------------------------------------------------------------ failover

    def _rides(self, partition: int | None) -> bool:
        """Partitions of the redesign found through a lookupd ride through a failover."""
        return self._lookup is not None and partition is not None

    def _joined(self, partition: int | None, address: str) -> None:
        if partition in self._ever:
            self._rejoined.add(partition)
            self._order.reconnected(partition)
        self._ever.add(partition)
        event = self._watch.resumed(partition, address, time.monotonic())
        if event is not None:
            log.info("%s", event.describe())
            if self._on_failover is not None:
                self._on_failover(event)

    def _count_duplicates(self, partition: int | None, raws: list[RawMessage]) -> None:
        fins = self._fins
        for raw in raws:
            if fins.seen(partition, raw.id):
                self.stats.duplicates += 1
        self.stats.order_redeliveries = self._order.redeliveries

    def _tick_failover(self, now: float) -> None:
        if not self._watch.waiting or self.error is not None:
            return
        if self._lookup is not None:
            # Ask again every tick (about a second) until the new leader is listed: once a
            # consistent lookup dropped the dead leader there is no reconnect left to ask,
            # and the next poll would be up to a minute away.
            self._lookup.request_refresh()
        notes, error = self._watch.tick(now)
        for note in notes:
            log.info("%s", note.describe())
            if self._on_failover is not None:
                self._on_failover(note)
        if error is not None:
            self.error = self._fatal = error
            self.failed.set()

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
        if conn.is_open:
            conn.fin_many([msg._raw.id for msg in msgs])
        fins = self._fins
        for msg in msgs:
            fins.add(msg._via.partition, msg._raw.id)
        if conn.layout.ordered:
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
        if conn.layout.ordered:
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

    # ------------------------------------------------------------------ RDY

    def _apply(self, updates: Sequence[Any]) -> None:
        by_id = {id(c): c for c in self._conns.values()}
        for update in updates:
            conn = by_id.get(update.conn_id)
            if conn is not None and conn.is_open:
                conn.rdy(update.count)
        if updates:
            self._wake.set()

    async def _flow_loop(self) -> None:
        """Timers of the flow machines: RDY rotation, backoff windows, rate refills."""
        while not self._stopping:
            now = time.monotonic()
            deadlines = [
                d
                for d in (
                    self._rdy.next_deadline(),
                    self._backoff.next_deadline(),
                    self._limiter.next_deadline() if self._limiter else None,
                )
                if d is not None
            ]
            delay = min(deadlines) - now if deadlines else 1.0
            self._wake.clear()
            if delay > 0:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
                # lands just after the event is set (CPython gh-86296), hanging stop().
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(delay, 1.0)):
                        await self._wake.wait()
            now = time.monotonic()
            self._tick_failover(now)
            action = self._backoff.tick(now)
            if action is not None:
                self._apply(self._rdy.apply_backoff(action, now))
            if self._limiter is not None:
                self._apply(self._rdy.set_rate_cap(self._limiter.allowance(now), now))
            self._apply(self._rdy.tick(now))


_STOP: Any = object()
