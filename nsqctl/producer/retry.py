"""One publish call from first try to OK or final error: route, connect, send, and on
failure refresh and try again.

"This partition moved" errors (NOT_LEADER, NOT_WRITABLE, TOPIC_NOT_EXIST) and lost
connections drop the topic's connections, mark its topology stale and retry, on the
:class:`~nsqctl.producer.retry_clock.RetryClock`: a few quick attempts for a topic not yet
written, up to the failover window for one that was. Bad messages are raised at once.
An unkeyed publish retries on an nsqd of its topic it has not tried yet (at once, after
TLS refused by one nsqd), and its final error says what each nsqd it tried did.

A keyed publish (partition or shard key) holds a ticket, its call order, and sends on its
route in ticket order across retries (:mod:`nsqctl.producer.ordering`): pipelined while
the route is healthy, one at a time after a failure until the calls from before it are
settled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import TypeVar

from nsqctl import protocol as p
from nsqctl.addresses import HostPort
from nsqctl.connection import Connection
from nsqctl.errors import (
    ConnectError,
    ConnectionClosedError,
    NoSuchPartitionError,
    NsqctlError,
    NsqctlTimeoutError,
    PartitionTimeoutError,
    PartitionUnavailableError,
    ProducerClosedError,
    PublishConnectError,
    PublishConnectTimeoutError,
    PublishError,
    PublishTimeoutError,
    PublishTransportError,
    TLSError,
    TopicNotFoundError,
    TransportError,
)
from nsqctl.failover import FailoverEvent, FailoverHook
from nsqctl.lookup.topology import Topology
from nsqctl.producer.discovery import TopologyCache
from nsqctl.producer.options import ProducerOptions
from nsqctl.producer.ordering import RouteOrder, TicketLine
from nsqctl.producer.pool import ConnectionPool
from nsqctl.producer.retry_clock import FailoverNotes, RetryClock
from nsqctl.producer.routing import Router, Target, check_keyed_send, not_led_by_given
from nsqctl.sharding import ShardKey

__all__ = ["PublishCall", "RetryLoop", "Send", "stored_nothing"]

log = logging.getLogger("nsqctl.producer")

T = TypeVar("T")

#: Sends one command on a connection (with the partition argument it takes) and returns
#: what the publish call returns; raises to fail the attempt. Called, it may refuse the
#: connection at once (a ConfigError: the wrong family), before anything is written, so
#: that the message is known unsent; the awaitable it returns writes.
Send = Callable[[Connection, int | None], Awaitable[T]]


@dataclass
class NsqdTried:
    """One nsqd a publish call failed on: how often, its last failure, and when (the
    call's attempt number), so the next attempt can go to the one that failed longest ago."""

    attempts: int
    last: BaseException
    at: int


@dataclass
class PublishCall:
    """The state of one publish call across its attempts (from :meth:`RetryLoop.begin`)."""

    topic: str
    partition: int | None
    shard_key: ShardKey | None
    clock: RetryClock
    line: TicketLine | None  # keyed calls only
    ticket: int = -1
    order: RouteOrder | None = None  # once registered on its route
    where: int | None = None  # the partition being waited for, once known
    refresh: bool = False
    target: Target | None = None  # where the last attempt went, once it was routed
    tried: dict[HostPort, NsqdTried] = field(default_factory=dict)  # in order first tried
    refused: list[str] = field(default_factory=list)  # given nsqds that do not lead it
    # an attempt handed the message to a connection, and no answer says it stored nothing
    # (see stored_nothing): the message may have been stored
    sent: bool = False
    # every failed attempt so far failed by a deadline (a hung nsqd, not a refusal)
    timed_out: bool = True
    counted: bool = False  # counted among the loop's running calls until ended

    def avoid(self) -> list[HostPort]:
        """The nsqds this call failed on, the oldest failure first (see Router.choose)."""
        return sorted(self.tried, key=lambda address: self.tried[address].at)

    def failed_on_target(self, last: BaseException) -> None:
        """Record ``last`` against the nsqd the attempt went to, if it got that far."""
        if self.target is None:
            return
        address = self.target.peer.tcp_address
        seen = self.tried.get(address)
        attempts = 1 if seen is None else seen.attempts + 1
        self.tried[address] = NsqdTried(attempts, last, self.clock.attempts)

    def refused_tls(self, err: TLSError, nsqds: Collection[HostPort]) -> bool:
        """Record ``err`` (one of :data:`~nsqctl.protocol.errors.TLS_REFUSALS`: TLS asked
        of an nsqd that offers none, a certificate not accepted) against the nsqd the
        attempt went to. True when the call may go on elsewhere: it is unkeyed (a partition
        or a shard key has one place) and some nsqd of its topic (``nsqds``) has not
        refused its TLS. One nsqd restarted without its certificate, or with another, must
        not fail the publishes the others would take; every nsqd refusing is a mismatch of
        settings."""
        if self.partition is not None or self.shard_key is not None:
            return False
        self.failed_on_target(err)
        for address in nsqds:
            seen = self.tried.get(address)
            if seen is None or not isinstance(seen.last, p.TLS_REFUSALS):
                return True
        return False

    def untried(self, nsqds: Collection[HostPort]) -> bool:
        """True when some nsqd of ``nsqds`` has not failed this call yet."""
        return any(address not in self.tried for address in nsqds)

    def what_each_did(self, last: BaseException) -> str:
        """``last``, or, when the call failed on several nsqds, what each of them did
        (and ``last`` after them when it is none of theirs: a failure before any nsqd
        was chosen, such as every lookupd down)."""
        if len(self.tried) < 2:
            return str(last)
        parts = []
        for address, seen in self.tried.items():
            text = str(seen.last)
            if str(address) not in text:
                text = f"nsqd {address}: {text}"
            times = "1 attempt" if seen.attempts == 1 else f"{seen.attempts} attempts"
            parts.append(f"[{times}] {text}")
        text = f"on {len(self.tried)} nsqds: " + "; ".join(parts)
        if all(seen.last is not last for seen in self.tried.values()):
            text += f"; then: {last}"
        return text


#: The batch publishes: youzan nsqd checks that it leads the partition before it stores
#: any of the batch (nsqdserver/protocol_v2.go, internalMPUBEXTAndTrace, which serves
#: MPUB, MPUB_TRACE and MPUB_EXT).
_LEADER_CHECKED_FIRST = frozenset({"mpub", "mpub_trace", "mpub_ext"})


def stored_nothing(err: p.ServerError) -> bool:
    """Whether nsqd's answer ``err`` to a publish says that it stored nothing, so that the
    attempt cannot have made a copy. These answers do:

    - E_BAD_MESSAGE, E_BAD_BODY, E_BAD_TOPIC (both families): the command, its body or a
      message of a batch failed nsqd's checks (too big, empty, a bad size, a bad topic
      name) while nsqd read it, before it put anything in the topic.

    - E_TOPIC_NOT_EXIST (youzan's nsqdserver/protocol_v2.go): nsqd holds no copy of the
      topic or partition; every publish command looks it up first (preparePub), before
      it reads the body.
    - E_FAILED_ON_NOT_LEADER to a batch publish (youzan), which nsqd answers before it
      stores any of the batch.

    Not E_FAILED_ON_NOT_LEADER to a single publish (PUB, PUB_TRACE, PUB_EXT): nsqd
    answers that code there after its write failed, whenever it no longer leads the
    partition. An nsqd that did not lead it when the write began stored nothing, but one
    that lost the leadership while the write was being replicated answers the same, and
    the replicas that took the write may keep it (nsqd rolls back only its own copy).
    Nor E_FAILED_ON_NOT_WRITABLE or E_MPUB_FAILED: they come after a write that may have
    reached replicas, or stored part of a batch."""
    if isinstance(err, TopicNotFoundError | p.BadMessageError | p.BadBodyError | p.BadTopicError):
        return True
    return isinstance(err, p.NotLeaderError) and err.context in _LEADER_CHECKED_FIRST


class RetryLoop:
    """Runs publish calls to OK or a final error (see the module docstring)."""

    def __init__(
        self,
        topologies: TopologyCache,
        router: Router,
        pool: ConnectionPool,
        options: ProducerOptions,
        on_failover: FailoverHook | None = None,
    ) -> None:
        self.topologies = topologies
        self.router = router
        self.pool = pool
        self.options = options
        self.on_failover = on_failover
        self._notes = FailoverNotes(options.failover_window)
        self._written: set[str] = set()  # topics that took a publish: failover rides
        self._tickets: dict[str, TicketLine] = {}
        self._routes: dict[tuple[str, int | HostPort], RouteOrder] = {}
        # Calls begun and not yet ended (a batch's call counts before its task starts,
        # so close() waits for it too), and what close() sets: a call waiting to retry
        # then gives up at once instead of retrying on a closed producer (see close).
        self._running = 0
        self._idle = asyncio.Event()
        self._closing = asyncio.Event()

    def stop(self) -> None:
        """What :meth:`close` does at once, before it waits: no more retries, no call begun
        before it starts an attempt after it."""
        self._closing.set()

    async def close(self) -> None:
        """No more retries: a call waiting for its next attempt fails now (a
        ProducerClosedError saying the producer closed, its last failure chained), an
        attempt in progress ends as it ends (its OK, or its error), and a call begun but
        not yet run fails at its start without connecting. Returns when every call begun
        has ended, so none connects or publishes after the producer closed."""
        self.stop()
        if self._running:
            self._idle.clear()
            await self._idle.wait()

    def has_written(self, topic: str) -> bool:
        """True once a publish to ``topic`` got OK: its failures may wait out a failover."""
        return topic in self._written

    def begin(self, topic: str, partition: int | None, shard_key: ShardKey | None) -> PublishCall:
        """A new publish call, in call order: a keyed call takes its ticket here, before
        any await, so calls begun one after the other send in that order. Every call
        begun must be :meth:`run` or :meth:`end`-ed, or later keyed calls of its topic
        wait for it forever."""
        clock = RetryClock(self.options, time.monotonic(), topic in self._written)
        call = PublishCall(topic, partition, shard_key, clock, None, where=partition)
        if partition is not None or shard_key is not None:
            call.line = self._tickets.setdefault(topic, TicketLine())
            call.ticket = call.line.take()
        # Counted here, not when it runs: a call whose task has not started yet must
        # still hold close() until it ends.
        call.counted = True
        self._running += 1
        return call

    def end(self, call: PublishCall) -> None:
        """Release the call's place in order (done, failed, cancelled, or never run).
        Idempotent; :meth:`run` ends its call itself."""
        if call.line is not None:
            call.line.passed(call.ticket)  # no-op once registered
        if call.order is not None:
            call.order.settle(call.ticket)
        if call.counted:  # end() is reached more than once (run, then a done callback)
            call.counted = False
            self._running -= 1
            if not self._running:
                self._idle.set()

    async def run(self, call: PublishCall, send: Send[T]) -> T:
        """Publish with ``send`` until OK; raise the error that ends it."""
        topic = call.topic
        try:
            if self._closing.is_set():
                # begun before close() but run after it (a batch task not yet started)
                raise ProducerClosedError(
                    f"the producer was closed before the publish to topic {topic!r} was "
                    "sent: nothing was sent"
                )
            while True:
                try:
                    result, conn = await self._attempt(call, send)
                except NoSuchPartitionError:
                    raise  # no waiting makes the partition appear
                except p.TLS_REFUSALS as err:
                    # no retry changes what TLS that nsqd offers or accepts, but another
                    # nsqd may take these settings
                    nsqds = self._nsqds(topic)
                    if not call.refused_tls(err, nsqds):
                        raise
                    call.timed_out = False
                    if call.untried(nsqds):
                        continue  # no failover to wait for: the next nsqd now, uncounted
                    await self._before_retry(call, err, recorded=True)
                    continue
                except p.ServerError as err:
                    repinned = self._check_pin(call, err)
                    if not (err.retryable_on_publish or err.needs_lookup_refresh):
                        err.topic = err.topic or topic
                        raise
                    if err.needs_lookup_refresh:
                        await self.pool.drop_topic(topic)
                    if repinned:
                        # Asking the given nsqds in turn which leads the partition is not
                        # a failed attempt: more of them than the retry budget would
                        # otherwise leave the last ones (maybe the leader) unasked.
                        if call.order is not None:
                            call.order.failed(call.ticket)
                        continue
                    last: BaseException = err
                except (ConnectionClosedError, ConnectError) as err:
                    last = err  # a closed connection already left the pool
                except PublishError as err:  # no writable leader / topic not (yet) known
                    last = err
                except NsqctlError as err:
                    if not (call.clock.may_ride and self.topologies.is_lookup_outage(err)):
                        raise
                    last = err  # every lookupd down during a failover (e.g. restarted)
                else:
                    self._succeeded(call, conn)
                    return result
                await self._before_retry(call, last)
        except NsqctlError as err:
            # "may have been sent" wins: one error object can end several calls (a failed
            # lookup they shared), and only if none of them sent is nothing stored
            err.unsent = err.unsent is not False and not call.sent
            raise
        finally:
            self.end(call)

    async def _attempt(self, call: PublishCall, send: Send[T]) -> tuple[T, Connection]:
        topic = call.topic
        call.target = None  # a failure before routing is no nsqd's
        topo = await self.topologies.get(topic, call.refresh)
        if call.where is None and topo.partition_num == 1 and topo.is_redesign:
            call.where = 0
        try:
            target = self.router.choose(topic, topo, call.partition, call.shard_key, call.avoid())
        except PartitionUnavailableError as err:
            if err.partition is not None:
                if call.line is not None and call.order is None:
                    await self._register(call, call.line, err.partition)
                call.where = err.partition
            raise
        if target.partition is not None:
            call.where = target.partition
        if call.line is not None and call.order is None:  # keyed, first time routed
            await self._register(call, call.line, target.route)
        if call.order is not None:
            target = await self._turn(call, call.order, topo, target)
        call.target = target
        conn = await self.pool.connection(topic, target)
        check_keyed_send(topic, target, call.shard_key, conn.is_redesign)
        # refusals of this connection (a partition for an original nsqd, a command only
        # the redesign has) come before anything is written: the message stays unsent
        sending = send(conn, conn.partition_arg(target.partition))
        before = call.sent
        call.sent = True  # from here on the message may reach nsqd, and be stored
        try:
            return await sending, conn
        except p.ServerError as err:
            if stored_nothing(err):
                call.sent = before  # this attempt is known to have stored nothing
            raise

    async def _register(self, call: PublishCall, line: TicketLine, route: int | HostPort) -> None:
        """Register a keyed call's ticket on its route once every earlier ticket of the
        topic has (a later call that found the topology cached must not overtake)."""
        await line.turn(call.ticket)
        call.order = self._routes.setdefault((call.topic, route), RouteOrder())
        call.order.register(call.ticket)
        line.passed(call.ticket)

    async def _turn(
        self, call: PublishCall, order: RouteOrder, topo: Topology, target: Target
    ) -> Target:
        """Wait until the call may send on its route; the target to send to then."""
        if order.recovering and log.isEnabledFor(logging.DEBUG):  # describe() scans every ticket
            log.debug(
                "%s ticket %d for route %s waits: %s",
                call.topic,
                call.ticket,
                target.route,
                order.describe(),
            )
        if not await order.turn(call.ticket):
            return target
        # It waited behind a recovery, maybe since before the election: send where the
        # ticket that went before it just succeeded, not to the leader it saw then (a
        # burst of waiters split between a dead leader and the new one would land out of
        # order).
        topo = self.topologies.cached(call.topic) or topo
        return self.router.choose(call.topic, topo, call.partition, call.shard_key)

    def _check_pin(self, call: PublishCall, err: p.ServerError) -> bool:
        """A partition pinned on given nsqd addresses, refused by the nsqd it went to as
        not its leader: the next attempt goes to the next given nsqd; once every one of
        them refused it, no retry can help (nothing looks its leader up), so say so.
        True when this refusal was the first from that nsqd (a given nsqd is asked once)."""
        target = call.target
        if not self.router.direct or call.partition is None or target is None:
            return False
        if not isinstance(err, p.NotLeaderError | TopicNotFoundError):
            return False
        address = str(target.peer.tcp_address)
        first = address not in call.refused
        if first:
            call.refused.append(address)
        topo = self.topologies.cached(call.topic)
        if topo is None or {str(peer.tcp_address) for peer in topo.producers} <= set(call.refused):
            raise not_led_by_given(call.topic, call.partition, call.refused, err) from err
        self.router.not_led_by(call.topic, topo, target)
        return first

    def _succeeded(self, call: PublishCall, conn: Connection) -> None:
        self._written.add(call.topic)
        clock = call.clock
        if clock.attempts:
            log.debug(
                "%s ticket %d accepted by %s after %d failure(s)",
                call.topic,
                call.ticket,
                conn.address,
                clock.attempts,
            )
        if clock.riding:
            waited = clock.waited(time.monotonic())
            self._report(self._notes.resumed(call.topic, call.where, waited, str(conn.address)))

    async def _before_retry(
        self, call: PublishCall, last: BaseException, recorded: bool = False
    ) -> None:
        """Record the failure (unless ``recorded`` already); wait before the next
        attempt, or raise the final error."""
        if call.order is not None:
            call.order.failed(call.ticket)
        call.timed_out = call.timed_out and isinstance(last, NsqctlTimeoutError)
        if not recorded:
            call.failed_on_target(last)
        call.refresh = True
        self.topologies.mark_stale(call.topic)
        now = time.monotonic()
        delay = call.clock.failed(now, leader_lost=True)
        if delay is None:
            final = self._gave_up(call, last)
            if final is last:
                raise final
            raise final from last
        if call.clock.riding:
            waited = call.clock.waited(now)
            note = self._notes.waiting(
                call.topic, call.where, waited, str(last), now, self._leaderless(call)
            )
            self._report(note)
        log.info(
            "publish to %s failed (%s); ticket %d retry %d in %.2fs",
            call.topic,
            last,
            call.ticket,
            call.clock.attempts,
            delay,
        )
        closing = self._closing
        if not closing.is_set():
            try:
                async with asyncio.timeout(delay):
                    await closing.wait()
            except TimeoutError:
                pass
        if closing.is_set():
            raise ProducerClosedError(
                f"the producer was closed while the publish to topic {call.topic!r} waited "
                f"to retry, unacknowledged ({last})"
            ) from last

    def _nsqds(self, topic: str) -> list[HostPort]:
        """The nsqds an unkeyed publish to ``topic`` may go to, as last looked up."""
        topo = self.topologies.cached(topic)
        return [] if topo is None else [peer.tcp_address for peer, _ in topo.targets()]

    def _leaderless(self, call: PublishCall) -> bool:
        """True when the call's topic is known to be of the original family (no partition,
        a topology that is not the redesign's): it waits for an nsqd, not for a leader."""
        topo = self.topologies.cached(call.topic)
        return call.where is None and topo is not None and not topo.is_redesign

    def _gave_up(self, call: PublishCall, last: BaseException) -> NsqctlError:
        """The error a publish call ends with: of the kind of its last failure (which the
        caller chains as its cause), so that it is caught by that kind."""
        topic, clock = call.topic, call.clock
        window = self.options.failover_window
        if clock.riding and not self._leaderless(call):
            place = topic if call.where is None else f"{topic}/{call.where}"
            unavailable = PartitionTimeoutError if call.timed_out else PartitionUnavailableError
            each = " (each attempt timed out)" if call.timed_out else ""
            return unavailable(
                f"no leader took the publish to {place} within the failover window "
                f"({window:.0f}s){each}: {call.what_each_did(last)}; check `lookup({topic})`",
                call.where,
                setting="failover_window",
            )
        # The original family has no partition and no leader: a publish that rode out the
        # window waited for its nsqd, and fails of the kind its nsqd's last failure was.
        if isinstance(last, PublishError | TopicNotFoundError):
            if isinstance(last, TopicNotFoundError):
                last.topic = last.topic or topic
            return last
        text = f"publish to topic {topic!r} failed after {clock.attempts} attempt(s)"
        if clock.riding:
            text += f" within the failover window ({window:.0f}s)"
        if call.timed_out:
            text += " (each timed out)"
        text += f": {call.what_each_did(last)}"
        setting = last.setting if isinstance(last, NsqctlError) else None
        if isinstance(last, ConnectError):
            # given addresses are the setting to fix; a lookupd's answer is not a setting
            direct = "nsqd_tcp" if self.router.direct else None
            connect = PublishConnectTimeoutError if call.timed_out else PublishConnectError
            return connect(text, setting=setting or direct)
        if isinstance(last, TransportError):
            transport = PublishTimeoutError if call.timed_out else PublishTransportError
            return transport(text, setting=setting)
        return PublishError(text, setting=setting)

    def _report(self, event: FailoverEvent | None) -> None:
        if event is None:
            return
        log.info("%s", event.describe())
        if self.on_failover is not None:
            self.on_failover(event)
