"""Consumer: subscribe a topic/channel on every nsqd (every partition on the redesign),
hand messages to a handler, and keep RDY, backoff and rate limits right.

:class:`Consumer` is composed, go-nsq style, of collaborators that each own their state
and meet through narrow interfaces, so each can be read (and tested) on its own:

- :class:`.connections.ConnectionSet`: which connections to have; connect, subscribe,
  reconnect with backoff. Opens through :meth:`Consumer._dial`, reports each connection
  subscribed or dropped.
- :class:`.delivery.DeliveryPath`: messages to the handler or the iterator, FIN/REQ, the
  in-flight count, ordered second copies; the Responder of :mod:`nsqctl.message`.
- :class:`.rdy.FlowControl`: the sans-IO flow machines of :mod:`nsqctl.flow`, the RDY
  they decide, and the loop of their timers.
- :class:`.leaders.LeaderWatch`: partitions waiting for a new leader, duplicates after a
  reconnect, the order checker's reconnect bookkeeping.
- :class:`.resume.Resumer` (with a lookupd): each redesign partition's confirmed position,
  and a new leader's channel moved back to it when it is missing or past it.

This module wires them and keeps the public face: construction (typed options), start,
close, iteration and introspection. Nothing is acknowledged before the handler finished:
FIN is sent after the handler returns (or when the handler calls ``finish()`` itself).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from nsqctl.addresses import HostPort, parse_addresses, require_cluster
from nsqctl.bounds import check_bound, options_or_default
from nsqctl.closing import CloseOnce, retrieve
from nsqctl.connection import Connection, ConnectionConfig
from nsqctl.consumer.connections import ConnectionSet, Target
from nsqctl.consumer.delivery import (
    END_OF_STREAM,
    DeliveryPath,
    GiveUpHook,
    OrderEventHook,
)
from nsqctl.consumer.flow_control import FlowControl
from nsqctl.consumer.handlers import Handler, check_handler_settings
from nsqctl.consumer.leaders import LeaderWatch
from nsqctl.consumer.options import CONSUMER_BOUNDS, ConsumerOptions
from nsqctl.consumer.stats import ConsumerStats
from nsqctl.errors import ConfigError, NoConnectionError, UsageError
from nsqctl.failover import FailoverHook
from nsqctl.flow import BackoffController, RateLimiter, RdyController
from nsqctl.lookup.topology import Topology
from nsqctl.message import Message
from nsqctl.protocol.names import validate_channel, validate_topic
from nsqctl.tracelog import TraceLog

if TYPE_CHECKING:
    from nsqctl.connection.tcp import CloseHandler, ErrorHandler
    from nsqctl.consumer.resume import Resumer
    from nsqctl.lookup.client import LookupClient

log = logging.getLogger("nsqctl.consumer")

_T = TypeVar("_T")

#: Seconds close() lets cancelled handlers unwind (their messages were given back
#: already); one that ignores its cancellation is not waited for longer.
HANDLER_CANCEL_GRACE = 1.0

__all__ = ["Consumer", "FailoverHook", "GiveUpHook", "Handler", "OrderEventHook"]


class Consumer:
    """Consume ``topic``/``channel`` with a handler, or iterate: ``async for msg in c``.

    A handler that returns normally gets its message FINed; one that raises gets it
    requeued with backoff; one that called ``finish()``/``requeue()`` (or
    ``disable_auto_response()``) answers itself. In the iterator form the caller must answer.
    An async handler runs as a task per message (up to ``max_in_flight`` at once, or
    ``concurrency``); a plain function runs on the event loop, one message at a time,
    unless ``threads=True`` runs it in ``concurrency`` threads.

    Settings come from ``options`` (a :class:`ConsumerOptions`, checked when it was made
    and never changed; the defaults without it), the connection's from ``config``. Close
    with :meth:`close` (or ``async with``).
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
    ) -> None:
        self.topic = validate_topic(topic)
        self.channel = validate_channel(channel)
        self.options = opts = _checked_options(options, lookupd_http, nsqd_tcp)
        check_handler_settings(handler, opts)
        self.config = config or ConnectionConfig()
        self.stats = ConsumerStats()
        self.failed = asyncio.Event()  # set with ``error`` when the consumer cannot go on
        self._ended = asyncio.Event()  # failed, or closed: what run_forever waits for
        self.error: BaseException | None = None
        self._nsqd = parse_addresses(nsqd_tcp, example="127.0.0.1:4150") if nsqd_tcp else []
        # With a lookupd, partitions ride a failover and keep their confirmed position (the
        # Resumer), so a new leader without the channel skips nothing.
        self._lookup, self._resumer = _lookup_parts(self.topic, self.channel, lookupd_http, opts)
        rng = random.Random(opts.seed)
        self._flow = _flow_control(opts, rng)
        self._leaders = self._leader_watch(on_failover)
        self._delivery = self._delivery_path(handler, giving_up, on_order_violation, trace_log)
        # What every connection hands its reads to (read when a connection is opened).
        self._on_messages = self._delivery.on_messages
        self._connections = self._connection_set(rng)
        self._tasks: list[asyncio.Task[Any]] = []  # the flow loop and the lookup polling
        self._started = False
        self._stopping = False
        self._closing = CloseOnce()

    # ------------------------------------------------------------------ wiring

    def _refresher(self) -> Callable[[], None] | None:
        """Asks the lookup for a new topology now (none without a lookupd)."""
        return self._lookup.request_refresh if self._lookup is not None else None

    def _leader_watch(self, on_failover: FailoverHook | None) -> LeaderWatch:
        return LeaderWatch(
            self.topic,
            self.options.failover_window,
            self.stats,
            refresh=self._refresher(),
            on_failover=on_failover,
            on_fatal=self._fail,
        )

    def _delivery_path(
        self,
        handler: Handler | None,
        giving_up: GiveUpHook | None,
        on_order_violation: OrderEventHook | None,
        trace_log: TraceLog | None,
    ) -> DeliveryPath:
        resumer = self._resumer
        return DeliveryPath(
            self.topic,
            self.channel,
            self.options,
            self.stats,
            self._flow,
            self._leaders,
            handler=handler,
            giving_up=giving_up or _DeadLetters(self.topic, self.channel),
            on_order_violation=on_order_violation,
            trace_log=trace_log,
            positions=resumer.positions if resumer is not None else None,
        )

    def _connection_set(self, rng: random.Random) -> ConnectionSet:
        resumer = self._resumer
        return ConnectionSet(
            self.topic,
            self.channel,
            self.options,
            self.stats,
            dial=self._dial,
            on_connected=self._connected,
            on_dropped=self._dropped,
            rng=rng,
            refresh=self._refresher(),
            waiting_for_leader=self._leaders.waiting_for_leader,
            resume_start=resumer.start_for if resumer is not None else None,
            skipped_start=resumer.skipped_start if resumer is not None else None,
            on_fatal=self._fail,
            on_attempting=self._flow.expect_connections,
        )

    async def _dial(
        self, address: HostPort, on_error: ErrorHandler, on_close: CloseHandler
    ) -> Connection:
        return await Connection.open(
            address,
            self.config,
            on_messages=self._on_messages,
            on_error=on_error,
            on_close=on_close,
        )

    def _connected(self, target: Target, conn: Connection) -> None:
        now = time.monotonic()
        self._delivery.add(conn, target[1])
        reason = self._resumer.take_reason(target[1]) if self._resumer is not None else ""
        self._leaders.joined(target[1], str(target[0]), now, reason)
        self._flow.add_connection(conn, now)

    def _dropped(self, target: Target, conn: Connection, lost: bool) -> None:
        now = time.monotonic()
        self._flow.remove_connection(conn, now)
        self._delivery.remove(conn)
        if lost:
            self._leaders.lost(target[1], now)

    async def _follow(self, topo: Topology) -> None:
        """Read what ``topo`` lists; a partition it counts but names no leader for (every
        nsqd holding it down, or none elected yet) waits for one as a lost partition does:
        noted while waiting, given up on after the failover window, never silently unread."""
        # Not a lookup that lists producers but no partition (nsqds that name none: they
        # are read as they are) nor one without a meta (the topic nowhere yet). One with a
        # meta and neither (youzan's answer when every partition is leaderless) marks them
        # all as waiting.
        meta = topo.meta
        if (
            not topo.stale
            and meta is not None
            and meta.valid
            and (topo.partitions or not topo.producers)
        ):
            read = self.options.partitions
            connected = {part for _address, part in self._connections.connections}
            now = time.monotonic()
            for part in topo.leaderless_partitions:
                if (read is None or part in read) and part not in connected:
                    self._leaders.lost(part, now)
        await self._connections.sync(topo)

    def _fail(self, error: BaseException) -> None:
        """The consumer cannot go on: :meth:`run_forever` and the iterator raise ``error``."""
        if self.error is not None:
            return
        self.error = error
        self.failed.set()
        self._ended.set()
        queue = self._delivery.queue
        if queue is not None:
            queue.put_nowait(END_OF_STREAM)  # wakes an iterator waiting for a message

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect everywhere the topic lives and start receiving.

        A :meth:`close` while this runs (a service stopped during its start) ends it at
        once: start returns, the consumer closed, nothing left running or connecting. A
        closed consumer cannot start again (:class:`UsageError`): make a new one.

        A start that does not complete closes the consumer before its error goes on:
        one that raised, and one cancelled by its caller (a deadline around it, its task
        cancelled), maybe with some nsqds already read and others still connecting. Left
        open, such a consumer would read on half started: a refusal of its settings by
        one nsqd would still end it as at start-up (it never settled), and no call would
        start it again (it had begun). It closes as :meth:`close` does, handlers already
        running waited for (up to ``stop_timeout``: a cancel can outlast the caller's
        deadline by that much, rather than cut a handler short); the messages it took and
        did not handle are given back, and :meth:`run_forever` or another start() says it
        is closed.
        """
        if self._stopping:
            raise UsageError(
                f"the consumer of {self.topic}/{self.channel} is closed: make a new Consumer"
            )
        if self._started:
            return
        self._started = True
        try:
            await self._start()
        except (Exception, asyncio.CancelledError):
            await self.close()
            raise

    async def _start(self) -> None:
        """What :meth:`start` does, once."""
        self._flow.start(time.monotonic())
        self._tasks.append(asyncio.create_task(self._flow.run(self._leaders.tick), name="nsq-flow"))
        limit = self.options.connect_timeout
        if self._lookup is not None:
            # consistent: each partition on its elected leader only, so a new leader is
            # found as soon as it is elected (see LookupClient.lookup)
            topo = await self._unless_closed(
                self._lookup.lookup(self.topic, access="r", metainfo=True, consistent=True),
                "nsq-lookup",
            )
            if topo is None:
                return
            if topo.meta is not None and topo.meta.extend_support:  # nsqd requires it
                self.config = replace(self.config, extend_support=True)
            if topo.is_redesign and self.config.output_buffer_original_only:
                self.config = replace(
                    self.config, output_buffer_size=None, output_buffer_timeout_ms=None
                )
        else:
            topo = Topology.from_nsqd_addresses(self._nsqd, topic=self.topic)
        # The connect timeout counts from here, not from after the first connects: an
        # nsqd that accepts and never answers would otherwise hold start() for its whole
        # handshake deadline before the timeout even began.
        started = asyncio.get_running_loop().time()
        first = asyncio.create_task(self._follow(topo), name="nsq-connect")
        self._tasks.append(first)  # close() cancels it if it is still connecting
        await _wait_step(first, limit)  # None: no limit
        if self._stopping:
            return
        if first.done():
            first.result()  # what the first connects raised, as awaiting them would
        if self._lookup is not None:
            self._tasks.append(
                self._lookup.start_polling(
                    self.topic, self._follow, access="r", metainfo=True, consistent=True
                )
            )
        await self._connections.await_first(limit, since=started)
        if self._stopping:
            return
        fatal = self._connections.fatal or self.error
        if fatal is not None:
            raise fatal  # start() closes the consumer
        self._connections.start_ended()

    async def _unless_closed(self, step: Coroutine[Any, Any, _T], name: str) -> _T | None:
        """Run one step of :meth:`start` as a task that :meth:`close` cancels: its result,
        or None once close() began (a closing consumer looks nothing up, connects
        nowhere); close() is not held up by a step that would take long (a slow lookupd)."""
        task = asyncio.create_task(step, name=name)
        self._tasks.append(task)
        await _wait_step(task)
        if self._stopping:
            return None
        return task.result()

    async def close(self, timeout: float | None = None) -> None:
        """Stop receiving and close, giving back what was not handled, once.

        In order: RDY 0 on every connection; the messages waiting in the iterator's queue
        (or for a free handler, with ``concurrency``) are given back at once (REQ, no
        delay, no backoff), as is every message that still arrives (nsqd sent it before it
        saw RDY 0) and every message taken from an iterator that was left (``break``)
        without answering it; handlers in progress (and messages taken by an iteration
        still in progress) get up to ``timeout`` seconds (default ``stop_timeout``) to be
        answered; what is still unanswered then is given back at once and its handler
        cancelled (a handler that answers after that gets AlreadyRespondedError: each
        message is given back once, never FINed after; a handler thread cannot be
        cancelled and runs on, its late answer raising AlreadyRespondedError in that
        thread), a message a handler kept (``disable_auto_response()``) to answer later
        included, so a late answer to it raises AlreadyRespondedError too; the background
        tasks (flow, connecting, lookup polling) are stopped, waiting at most the connect
        timeout for them; then CLS and close, each
        connection reading on briefly after CLOSE_WAIT (a message nsqd wrote just after it
        is given back like any other arrival, not left in flight until its msg-timeout).

        The close runs in a task of its own: a close() cancelled (a caller's deadline)
        does not leave the consumer half closed, connected and its run_forever() waiting;
        the close runs on. Every close() waits for that one close. Called from one of
        this consumer's own handlers (or a task one started: ``wait_for(close(), t)``,
        ``gather``), close() returns once the close began: the close waits for that
        handler, which could never return while it waited for the close (its message is
        then FINed as usual, or given back after ``timeout``).
        """
        self._stopping = True
        first = not self._closing.begun
        # begun first: the task cannot run before this call yields, and it exists even
        # if stopping intake failed
        closing = self._closing.begin(functools.partial(self._close, timeout))
        if first:
            self._stop_intake()
        if self._delivery.in_handler():
            return
        await asyncio.shield(closing)

    async def _close(self, timeout: float | None) -> None:
        """What :meth:`close` does, in order. Whatever fails on the way, the connections
        are closed and run_forever() ends: a close begun by a handler is awaited by
        nobody, its error only retrieved."""
        try:
            await self._settle_messages(timeout)
        finally:
            try:
                try:
                    self._delivery.shutdown()
                    await self._stop_tasks()
                finally:
                    try:
                        await self._connections.close_all()
                    finally:
                        if self._lookup is not None:
                            await self._lookup.aclose()
                        if self._resumer is not None:
                            await self._resumer.aclose()
            finally:
                self._ended.set()

    def _stop_intake(self) -> None:
        """RDY 0 on every connection and the queue closed: done in the close() call
        itself, before the close's task first runs, so that nsqd is told in the same turn
        as whatever the caller just did (a requeue with no delay is not sent back to this
        consumer in the turn it waits for the task). Connecting stops in the task."""
        self._flow.close_window(time.monotonic())
        self._delivery.close()

    async def _settle_messages(self, timeout: float | None) -> None:
        """Wait up to ``timeout`` for the messages in hand to be answered (intake stopped
        by :meth:`_stop_intake`); give back what is not, cancelling its handlers."""
        timeout = self.options.stop_timeout if timeout is None else timeout
        self._connections.stop_connecting()
        left = await self._delivery.wait_idle(timeout)
        if left:
            delivery = self._delivery
            kept = delivery.kept_unanswered()  # counted apart: no handler is running them
            handlers = delivery.abandon()
            # What abandon could not reach: only a message whose auto_response attribute
            # was set off directly, instead of through disable_auto_response().
            unreached = delivery.in_flight
            log.warning(
                "closing %s/%s: %d message(s) still unanswered after %gs: %d given back "
                "(requeued at once), %d of them kept by a handler (auto-response disabled) "
                "that returned without answering (a later finish() or requeue() on them "
                "raises AlreadyRespondedError); %d overrunning handler(s) cancelled%s%s",
                self.topic,
                self.channel,
                left,
                timeout,
                left - unreached,
                kept,
                len(handlers),
                " (a handler thread cannot be stopped: it runs on, and what it answers "
                "now raises AlreadyRespondedError)"
                if handlers and delivery.threads
                else "",
                f"; {unreached} the consumer was not told of (auto_response set without "
                "disable_auto_response()) stay in flight on nsqd until its message timeout"
                if unreached
                else "",
            )
            if handlers:  # let the cancelled handlers unwind, within a bound
                await asyncio.wait(handlers, timeout=HANDLER_CANCEL_GRACE)

    async def _stop_tasks(self) -> None:
        """Cancel the background tasks and wait for them, within a bound.

        A cancelled task may still await its cleanup (a connect in progress closes the
        connection it opened), and a cleanup stuck on a peer that never answers would keep
        close() from returning. Such a cleanup is only ever a connection's, so the bound is
        the time one connect may take; what is left after it is cancelled once more and
        not waited for. No message is at stake: everything handled was answered before,
        and the connections are closed (CLS) after this either way.
        """
        tasks = [task for task in self._tasks if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=self.config.connect_timeout)
        left = [task for task in tasks if not task.done()]
        for task in left:
            task.cancel()
            task.add_done_callback(retrieve)  # it may end later: nobody awaits it then
        if left:
            log.warning(
                "closing %s/%s: %d background task(s) did not stop within %gs and were "
                "abandoned: %s",
                self.topic,
                self.channel,
                len(left),
                self.config.connect_timeout,
                ", ".join(sorted(task.get_name() for task in left)),
            )
        for task in self._tasks:
            if task.done():
                retrieve(task)

    async def stop(self, timeout: float | None = None) -> None:
        """The same as :meth:`close`."""
        await self.close(timeout)

    async def run_forever(self) -> None:
        """Start, then run until the consumer fails (raising its :attr:`error`, e.g.
        FailoverTimeoutError), is closed (returning once :meth:`close` finished) or is
        cancelled; closes either way."""
        await self.start()
        try:
            await self._ended.wait()
            if self.error is not None:
                raise self.error
        finally:
            await self.close()

    def __aiter__(self) -> AsyncIterator[Message]:
        if self._delivery.queue is None:
            raise ConfigError(
                "this consumer has a handler; iterate only a handler-less one", setting="handler"
            )
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Message]:
        delivery = self._delivery
        queue = delivery.queue
        assert queue is not None
        if not self._started:
            await self.start()
        delivery.iteration_started()
        while True:
            msg = await queue.get()
            if self.error is not None:  # failed: raise, whatever is queued
                if msg is END_OF_STREAM:
                    queue.put_nowait(END_OF_STREAM)  # a second iterator raises too
                else:
                    delivery.take(msg)  # close gives it back
                raise self.error
            if msg is END_OF_STREAM:
                queue.put_nowait(END_OF_STREAM)  # a second iterator ends too
                return
            delivery.take(msg)
            yield msg

    # ------------------------------------------------------------------ introspection

    def is_starved(self) -> bool:
        """True when some connection's window is (nearly) full of in-flight messages."""
        return self._flow.rdy.is_starved()

    def set_max_in_flight(self, value: int) -> None:
        check_bound("max_in_flight", value, CONSUMER_BOUNDS["max_in_flight"])
        self._flow.set_max_in_flight(value, time.monotonic())

    @property
    def delivery(self) -> DeliveryPath:
        """The delivery path (a reader thread of an ordered partition reports to it)."""
        return self._delivery

    @property
    def connections(self) -> dict[Target, Connection]:
        return dict(self._connections.connections)

    @property
    def unconnected(self) -> list[tuple[HostPort | None, int | None]]:
        """What this consumer should read and has no connection to now, as (nsqd, partition)
        pairs: an nsqd (partition None on the original family) or a partition being
        connected or reconnected, and a redesign partition waiting for a new leader (nsqd
        None when the lookup lists no leader for it yet). Empty when every source is read;
        a quiet consumer with something here is not caught up, only cut off."""
        targets = self._connections.unconnected()
        pending = {part for _address, part in targets}
        down: list[tuple[HostPort | None, int | None]] = sorted(
            targets, key=lambda t: (str(t[0]), -1 if t[1] is None else t[1])
        )
        # a lost partition that the lookup lists on no nsqd (its leader is gone, none new yet)
        down += [
            (None, part) for part in self._leaders.watch.lost_partitions() if part not in pending
        ]
        return down

    def unreached_error(
        self, down: Iterable[tuple[HostPort | None, int | None]]
    ) -> type[NoConnectionError]:
        """The error for sources of :attr:`unconnected` that stay out of reach, as start-up
        decides it: :class:`~nsqctl.errors.NoConnectionTimeoutError` when each of their
        nsqds stayed silent (none refused, every partition has one), else
        :class:`~nsqctl.errors.NoConnectionError`."""
        return self._connections.unreached_error(address for address, _part in down)

    def rdy_of(self, target: Target) -> int:
        return self._flow.rdy_of(self._connections.connections[target])

    @property
    def total_rdy(self) -> int:
        return self._flow.rdy.total_rdy

    @property
    def in_flight(self) -> int:
        """Messages received and not answered yet."""
        return self._delivery.in_flight


class _DeadLetters:
    """The default giving-up hook (:class:`nsqctl.deadletter.DeadLetterFile` for this
    topic/channel), loaded with the first message given up on: most consumers never give
    up on one, and ``nsqctl tail``'s start-up need not import the dead-letter file."""

    def __init__(self, topic: str, channel: str) -> None:
        self._topic, self._channel = topic, channel
        self._file: Callable[[Message], None] | None = None

    def __call__(self, msg: Message) -> None:
        if self._file is None:
            from nsqctl.deadletter import DeadLetterFile, dead_letter_path

            self._file = DeadLetterFile(dead_letter_path(self._topic, self._channel))
        self._file(msg)


def _lookup_parts(
    topic: str,
    channel: str,
    lookupd_http: Sequence[str | HostPort] | str | None,
    options: ConsumerOptions,
) -> tuple[LookupClient | None, Resumer | None]:
    """The lookup client and the position keeper of a consumer given lookupd addresses
    (None, None without: httpx is imported only when a lookupd is used)."""
    if not lookupd_http:
        return None, None
    from nsqctl.consumer.resume import Resumer
    from nsqctl.lookup.client import LookupClient

    lookup = LookupClient(
        lookupd_http, poll_interval=options.lookup_interval, jitter=options.lookup_jitter
    )
    return lookup, Resumer(topic, channel, ordered=options.ordered)


def _flow_control(opts: ConsumerOptions, rng: random.Random) -> FlowControl:
    """RDY, backoff and rate limit as the options set them."""
    return FlowControl(
        RdyController(
            opts.max_in_flight,
            rng=rng,
            fixed_rdy_one=opts.ordered,
            redistribute_interval=opts.rdy_redistribute_interval,
            low_rdy_idle_timeout=opts.low_rdy_idle_timeout,
            low_rdy_timeout=opts.low_rdy_timeout,
            idle_turn=opts.rdy_idle_turn,
        ),
        BackoffController(
            backoff_multiplier=opts.backoff_multiplier, max_backoff_duration=opts.max_backoff
        ),
        RateLimiter(opts.max_rate, time.monotonic(), max_burst=max(1, opts.max_in_flight))
        if opts.max_rate
        else None,
    )


def _checked_options(
    options: ConsumerOptions | None,
    lookupd_http: Sequence[str | HostPort] | str | None,
    nsqd_tcp: Sequence[str | HostPort] | str | None,
) -> ConsumerOptions:
    """The consumer's options (the defaults when None), refused with a :class:`ConfigError`
    when they do not fit the cluster given: one of ``lookupd_http``/``nsqd_tcp`` is needed,
    and ``partitions`` needs the lookup that says which nsqd leads each one."""
    options = options_or_default(options, ConsumerOptions, "max_in_flight=10")
    require_cluster(lookupd_http, nsqd_tcp)
    if lookupd_http and nsqd_tcp:
        raise ConfigError(
            "both lookupd_http= and nsqd_tcp= given: pass one (with lookupd_http the "
            "nsqds come from the lookup, and nsqd_tcp would be ignored)",
            setting="nsqd_tcp",
        )
    if nsqd_tcp and options.partitions is not None:
        raise ConfigError(
            "partitions= needs lookupd_http=: the lookup says which nsqd leads each "
            "partition; with nsqd_tcp= nothing would be read",
            setting="partitions",
        )
    return options


async def _wait_step(task: asyncio.Task[Any], timeout: float | None = None) -> None:
    """Wait for one step of :meth:`Consumer.start` (at most ``timeout``; the step runs on
    after it), without taking its result; a cancel of start() itself cancels the step
    too (waiting on a task, unlike awaiting it, does not pass the cancel on)."""
    try:
        await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
