"""Consumer: subscribe a topic/channel on every nsqd (every partition on the redesign),
hand messages to a handler, and keep RDY, backoff and rate limits right.

The decisions live in the sans-IO machines of :mod:`nsqctl.flow`; this module feeds them
events (message, FIN/REQ, timers, connections coming and going) and sends the RDY
commands they return. Nothing is acknowledged before the handler finished: FIN is sent
after the handler returns (or when the handler calls ``finish()`` itself).

:class:`Consumer` is built in layers, each a mixin in its own module that uses only the
ones below it: :mod:`.leaders` (leader failover), :mod:`.rdy` (sending RDY, flow
timers), :mod:`.delivery` (messages to the handler, FIN/REQ), :mod:`.connections`
(connect, subscribe, reconnect); this module adds construction, start/stop, iteration
and introspection.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from nsqctl.addresses import HostPort, parse_addresses
from nsqctl.connection import Connection, ConnectionConfig
from nsqctl.consumer.connections import _ConnectionsMixin
from nsqctl.consumer.delivery import GiveUpHook, Handler, OrderEventHook  # re-exported
from nsqctl.consumer.failover import FinWindow, PartitionWatch
from nsqctl.consumer.leaders import FailoverHook  # re-exported
from nsqctl.consumer.options import _ORDERED_START, ConsumerOptions, ConsumerStats
from nsqctl.consumer.order import OrderChecker
from nsqctl.consumer.rdy import _Target
from nsqctl.deadletter import DeadLetterFile, dead_letter_path
from nsqctl.errors import ConfigError, NoConnectionError
from nsqctl.flow import BackoffController, RateLimiter, RdyController
from nsqctl.lookup.model import Topology
from nsqctl.message import Delivery, Message
from nsqctl.protocol.names import validate_channel, validate_topic
from nsqctl.tracelog import TraceLog

if TYPE_CHECKING:
    from nsqctl.lookup.client import LookupClient

log = logging.getLogger("nsqctl.consumer")


class Consumer(_ConnectionsMixin):
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
            topo = await self._lookup.lookup(self.topic, access="r", metainfo=True, consistent=True)
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


_STOP: Any = object()
