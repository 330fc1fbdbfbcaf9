"""Partition-aware producer for both NSQ families.

A publish call returns only after the server's OK and raises on failure. :class:`Producer`
wires four parts, each with one job:

* :mod:`~nsqctl.producer.discovery` - where a topic can be written (lookupd or direct nsqd);
* :mod:`~nsqctl.producer.routing` - which nsqd/partition one publish goes to (pure);
* :mod:`~nsqctl.producer.pool` - the connections, one per (nsqd, topic, partition);
* :mod:`~nsqctl.producer.retry` - a call from first try to OK: retries, the failover
  window (:mod:`~nsqctl.producer.retry_clock`) and the call order of keyed publishes
  (:mod:`~nsqctl.producer.ordering`).

This module adds only the commands: what each public method sends and what it returns.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from nsqctl import protocol as p
from nsqctl.addresses import HostPort, require_cluster
from nsqctl.bounds import options_or_default
from nsqctl.closing import CloseOnce
from nsqctl.connection import Connection, ConnectionConfig
from nsqctl.errors import (
    ConfigError,
    NoSuchPartitionError,
    NsqctlError,
    PartitionUnavailableError,
    ProducerClosedError,
    PublishError,
    TopicNotFoundError,
)
from nsqctl.failover import FailoverHook
from nsqctl.lookup.topology import Topology
from nsqctl.producer.discovery import TopologyCache
from nsqctl.producer.options import ProducerOptions
from nsqctl.producer.pool import ConnectionPool
from nsqctl.producer.retry import PublishCall, RetryLoop, Send
from nsqctl.producer.routing import Router, check_partition
from nsqctl.protocol.commands import mpub_encoded
from nsqctl.protocol.names import validate_topic
from nsqctl.protocol.replies import parse_traced_reply
from nsqctl.sharding import ShardKey

__all__ = ["Producer", "PublishHook", "Receipt"]

T = TypeVar("T")


@dataclass(frozen=True)
class Receipt:
    """Where a traced publish landed (for MPUB_TRACE the fields describe the batch: the
    server answers trace id 0 and the first message's internal id; the batch's ids are
    consecutive, and ``trace_ids`` holds each message's trace id in order). A batch of
    one message has that message's trace id as ``trace_id``, as PUB_TRACE's has."""

    topic: str
    partition: int | None
    nsqd: str
    internal_id: int
    trace_id: int
    offset: int
    size: int
    count: int = 1
    trace_ids: tuple[int, ...] = ()


PublishHook = Callable[[Receipt], None]


class Producer:
    """Publish to a topic through lookupd discovery or to direct nsqd addresses.

    Use as ``async with Producer(lookupd_http=[...]) as producer: await producer.publish(...)``.
    Many publish calls may run concurrently; they pipeline on the pooled connections.
    Settings come from ``options`` (a :class:`ProducerOptions`, checked when it was made;
    the defaults without it), the connection's from ``config``.
    ``on_receipt`` is called with each traced batch's :class:`Receipt` as it is
    acknowledged; ``on_failover`` with each :class:`nsqctl.failover.FailoverEvent` of a
    publish that waits for a new leader.
    """

    def __init__(
        self,
        *,
        lookupd_http: Sequence[str | HostPort] | str | None = None,
        nsqd_tcp: Sequence[str | HostPort] | str | None = None,
        config: ConnectionConfig | None = None,
        options: ProducerOptions | None = None,
        on_receipt: PublishHook | None = None,
        on_failover: FailoverHook | None = None,
    ) -> None:
        require_cluster(lookupd_http, nsqd_tcp)
        self.options = options = options_or_default(options, ProducerOptions, "max_attempts=2")
        self.config = config or ConnectionConfig()
        self.on_receipt = on_receipt
        self._topologies = TopologyCache(lookupd_http, nsqd_tcp, options.lookup_interval)
        self._router = Router(options.hash, direct=not lookupd_http)
        self._pool = ConnectionPool(self.config)
        self._retry = RetryLoop(self._topologies, self._router, self._pool, options, on_failover)
        self._closed = False
        self._closing = CloseOnce()

    @property
    def on_failover(self) -> FailoverHook | None:
        return self._retry.on_failover

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ publishing

    async def publish(
        self,
        topic: str,
        body: bytes,
        *,
        partition: int | None = None,
        shard_key: ShardKey | None = None,
    ) -> None:
        """PUB one message; returns after OK."""
        check_body(body)

        async def send(conn: Connection, part: int | None) -> None:
            await conn.request(p.pub(topic, body, part), "pub")

        await self._publish(topic, partition, shard_key, send)

    async def publish_many(
        self,
        topic: str,
        bodies: Sequence[bytes],
        *,
        partition: int | None = None,
        shard_key: ShardKey | None = None,
    ) -> None:
        """MPUB, split into batches under the server's max body size, pipelined; returns
        when every batch got OK, or raises the first error once every batch has ended
        (then batches other than the failed one may have been stored: ``err.unsent`` is
        True only when none was written)."""
        validate_topic(topic)
        check_batch(bodies, "bodies")
        if not bodies:
            return
        try:  # each batch's body is built here, once: a body of the wrong type fails here
            batches = [p.mpub_body(b) for b in p.split_mpub(bodies, self.options.max_body_size)]
        except TypeError:
            check_bodies(bodies, "bodies")  # names the first one that is not bytes
            raise

        def mpub(batch: bytes) -> Send[None]:
            async def send(conn: Connection, part: int | None) -> None:
                await conn.request(mpub_encoded(topic, batch, part), "mpub")

            return send

        if len(batches) == 1:
            await self._publish(topic, partition, shard_key, mpub(batches[0]))
            return
        await self._publish_batches(topic, partition, shard_key, [mpub(b) for b in batches])

    async def publish_deferred(self, topic: str, body: bytes, delay: float) -> None:
        """DPUB (original family only): the message is delivered ``delay`` seconds from now
        (nsqd refuses more than its ``--max-req-timeout``, one hour by default)."""
        check_body(body)
        delay_ms = _delay_ms(delay)

        async def write(conn: Connection, part: int | None) -> None:
            await conn.request(p.dpub(topic, delay_ms, body), "dpub")

        await self._publish(topic, None, None, _checked(_refuse_redesign_dpub, write))

    async def publish_traced(
        self,
        topic: str,
        body: bytes,
        trace_id: int,
        *,
        partition: int | None = None,
        shard_key: ShardKey | None = None,
    ) -> Receipt:
        """PUB_TRACE (redesign): returns where the message landed."""
        check_body(body)
        send = self._traced_send(
            topic, lambda part: (p.pub_trace(topic, trace_id, body, part), "pub_trace"), (trace_id,)
        )
        return await self._publish(topic, partition, shard_key, send)

    async def publish_traced_many(
        self,
        topic: str,
        items: Sequence[tuple[int, bytes]],
        *,
        partition: int | None = None,
        shard_key: ShardKey | None = None,
    ) -> list[Receipt]:
        """MPUB_TRACE (redesign) of ``(trace id, body)`` items, batched as
        :meth:`publish_many` batches (under the server's max body size, pipelined): one
        receipt per batch, in item order. ``on_receipt`` sees each batch as it is
        acknowledged, so after an error it has seen exactly the batches that were stored."""
        validate_topic(topic)
        pairs = ConfigError(
            f"items must be a sequence of (trace id, body) pairs, got {type(items).__name__}",
            setting="items",
        )
        if isinstance(items, (str, *BODY_TYPES)) or not isinstance(items, Sequence):
            raise pairs
        try:
            bodies = [body for _, body in items]
        except (TypeError, ValueError):
            raise pairs from None
        check_bodies(bodies, "items", "[1]")
        if not items:
            return []
        groups = p.split_mpub(bodies, self.options.max_body_size, p.MPUB_TRACE_ENTRY_OVERHEAD)
        publishes = []
        start = 0
        for group in groups:
            batch = items[start : start + len(group)]
            start += len(group)
            trace_ids = tuple(trace_id for trace_id, _ in batch)
            publishes.append(self._traced_send(topic, _mpub_trace(topic, batch), trace_ids))
        if len(publishes) == 1:
            return [await self._publish(topic, partition, shard_key, publishes[0])]
        return await self._publish_batches(topic, partition, shard_key, publishes)

    def _traced_send(
        self,
        topic: str,
        command: Callable[[int | None], tuple[bytes, str]],
        trace_ids: tuple[int, ...],
    ) -> Send[Receipt]:
        """A traced publish's send: the receipt goes to ``on_receipt`` as the OK comes."""

        async def write(conn: Connection, part: int | None) -> Receipt:
            reply = parse_traced_reply(await conn.request(*command(part)))
            if len(trace_ids) == 1:  # MPUB_TRACE answers trace id 0 even for one message
                reply = reply._replace(trace_id=trace_ids[0])
            receipt = Receipt(
                topic, part, str(conn.address), *reply, count=len(trace_ids), trace_ids=trace_ids
            )
            if self.on_receipt is not None:
                self.on_receipt(receipt)
            return receipt

        return _checked(functools.partial(_require_redesign, what="traced publish"), write)

    async def publish_ext(
        self,
        topic: str,
        body: bytes,
        ext: dict[str, Any],
        *,
        partition: int | None = None,
        shard_key: ShardKey | None = None,
    ) -> Receipt | None:
        """PUB_EXT (redesign ext topics): a JSON header beside the body."""
        check_body(body)
        if not isinstance(ext, Mapping):
            raise ConfigError(
                f"ext must be a dict (the JSON header), got {type(ext).__name__}", setting="ext"
            )

        async def write(conn: Connection, part: int | None) -> Receipt | None:
            reply = p.parse_pub_reply(
                await conn.request(p.pub_ext(topic, ext, body, part), "pub_ext")
            )
            if reply is None:
                return None
            return Receipt(topic, part, str(conn.address), *reply)

        send = _checked(functools.partial(_require_redesign, what="ext publish"), write)
        return await self._publish(topic, partition, shard_key, send)

    async def _publish(
        self, topic: str, partition: int | None, shard_key: ShardKey | None, send: Send[T]
    ) -> T:
        """One publish call to OK or its final error."""
        call = self._begin(topic, partition, shard_key)
        return await self._retry.run(call, send)

    async def _publish_batches(
        self, topic: str, partition: int | None, shard_key: ShardKey | None, sends: list[Send[T]]
    ) -> list[T]:
        """One publish call per batch, pipelined; results in batch order, or the error of
        the first batch (in batch order) that failed, raised once every batch has ended
        (the others go on after it and may be stored), so that its ``unsent`` speaks for
        the whole call: True only when no batch was written to an nsqd. Whichever batch
        failed first in time is no choice: the same failures would raise different
        errors from one run to the next.

        Every call is begun here, before any await, so a keyed call's batches keep their
        order against the calls begun after this one; a batch task cancelled before it
        ran still releases its place in that order."""
        calls: list[PublishCall] = []
        tasks = []
        for send in sends:
            call = self._begin(topic, partition, shard_key)
            task = asyncio.ensure_future(self._retry.run(call, send))
            task.add_done_callback(functools.partial(_end_call, self._retry, call))
            calls.append(call)
            tasks.append(task)
        try:
            return list(await asyncio.gather(*tasks))
        except NsqctlError as err:
            seen = err
        # A batch still running may yet be written: "nothing was sent" is known only once
        # every batch has ended. Each ends within its own retry budget, or at close().
        # Usually they all have (they failed alike): then raise in this very turn.
        running = [task for task in tasks if not task.done()]
        if running:
            try:
                await asyncio.wait(running)
            except asyncio.CancelledError:
                for task in running:
                    task.cancel()
                raise
        # every failure is looked at (none left "never retrieved"); the first in order raised
        failures = [e for task in tasks if not task.cancelled() and (e := task.exception())]
        first = failures[0] if failures else seen
        if isinstance(first, NsqctlError):
            first.unsent = first.unsent is not False and not any(call.sent for call in calls)
        raise first

    def _begin(self, topic: str, partition: int | None, shard_key: ShardKey | None) -> PublishCall:
        if self._closed:
            raise ProducerClosedError(
                f"publish to topic {topic!r} on a closed producer: nothing was sent; publish "
                "before close(), or make a new Producer"
            )
        validate_topic(topic)
        check_partition(partition)
        return self._retry.begin(topic, partition, shard_key)

    # ------------------------------------------------------------------ topology

    async def route(self, topic: str, shard_key: ShardKey) -> tuple[str, int | None]:
        """Where ``shard_key`` lands now: (nsqd address, partition). Callers group keys by
        it to batch many keys into one MPUB without changing where each key goes. While
        the key's partition has no leader (a failover) the address is "": the publish
        itself waits for one. A failed lookup refresh answers from the last topology."""
        try:
            topo = await self._topologies.get(topic)
        except NsqctlError:
            cached = self._topologies.cached(topic)
            if cached is None:
                raise
            topo = cached
        try:
            return self._router.choose(topic, topo, None, shard_key).key
        except PartitionUnavailableError as err:
            if err.partition is None or isinstance(err, NoSuchPartitionError):
                raise
            return ("", err.partition)
        except (PublishError, TopicNotFoundError):
            # Nothing writable for a topic this producer already wrote to: an nsqlookupd
            # restarted and has not yet heard its nsqds register again. The publish waits
            # for them within the failover window, as it waits for a new leader.
            if not self._retry.has_written(topic):
                raise
            return ("", None)

    async def topology(self, topic: str, refresh: bool = False) -> Topology:
        """The producer's current view of where ``topic`` can be written."""
        return await self._topologies.get(topic, refresh)

    def known_topology(self, topic: str) -> Topology | None:
        """The topology of ``topic`` this producer last fetched, without asking anyone:
        None before its first publish to the topic (or :meth:`topology` call)."""
        return self._topologies.cached(topic)

    async def close(self) -> None:
        """Refuse new publishes, let those in progress end, then close every pooled
        connection. A publish waiting to retry (its nsqd unreachable, its partition
        without a leader) fails now with a ProducerClosedError instead of retrying on, and
        maybe storing its message, after the producer closed; one whose bytes are on the
        wire gets its answer first.

        The close runs in a task of its own: a close() cancelled (a caller's deadline)
        while it waits for a publish in progress does not leave the pooled connections
        open; the close runs on and closes them once that publish ended. Every close()
        waits for that one close."""
        self._closed = True
        self._retry.stop()  # now, not when the close's task first runs: see RetryLoop.stop
        await self._closing.run(self._close)

    async def _close(self) -> None:
        """What :meth:`close` does, in order."""
        await self._retry.close()
        await self._pool.close()
        await self._topologies.close()


#: What a message body may be: bytes as they go on the wire. Text is refused rather
#: than encoded here, since which encoding the consumers expect is the caller's choice.
BODY_TYPES = (bytes, bytearray, memoryview)
_BODY_TYPE_SET = frozenset(BODY_TYPES)


def check_body(body: object, argument: str = "body") -> None:
    """Refuse a body that is not bytes at the call, with what to do, rather than as a
    TypeError from deep inside the command encoder (or, worse, after connecting)."""
    if not isinstance(body, BODY_TYPES):
        hint = f": encode it first, e.g. {argument}.encode()" if isinstance(body, str) else ""
        raise ConfigError(
            f"{argument} must be bytes (or bytearray, memoryview), got {type(body).__name__}{hint}",
            setting=argument,
        )


def check_batch(bodies: object, argument: str) -> None:
    """A batch must be a sequence of bodies, not one body (bytes are a sequence too, of
    ints; text, of characters)."""
    if isinstance(bodies, (str, *BODY_TYPES)) or not isinstance(bodies, Sequence):
        raise ConfigError(
            f"{argument} must be a sequence (e.g. a list) of message bodies, got "
            f"{type(bodies).__name__}: publish one message with publish()",
            setting=argument,
        )


def check_bodies(bodies: Sequence[object], argument: str, suffix: str = "") -> None:
    """:func:`check_body` for each of a batch. ``suffix`` ends the name of a bad one
    (``[1]``: the body is the second of a pair)."""
    if _BODY_TYPE_SET.issuperset(map(type, bodies)):
        return  # the usual case, in one pass in C (about 60% of an isinstance loop's cost)
    for index, body in enumerate(bodies):  # a subclass of bytes, or a wrong one to name
        if not isinstance(body, BODY_TYPES):
            check_body(body, f"{argument}[{index}]{suffix}")


def _end_call(retry: RetryLoop, call: PublishCall, _task: object) -> None:
    retry.end(call)


def _mpub_trace(
    topic: str, batch: Sequence[tuple[int, bytes]]
) -> Callable[[int | None], tuple[bytes, str]]:
    return lambda part: (p.mpub_trace(topic, batch, part), "mpub_trace")


def _delay_ms(delay: float) -> int:
    """``delay`` seconds as DPUB's whole milliseconds; ConfigError when it is no delay."""
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(delay):
        raise ConfigError(f"bad delay {delay!r}: give seconds as a number", setting="delay")
    if delay < 0:
        raise ConfigError(f"bad delay {delay!r}: a delay is >= 0 seconds", setting="delay")
    return round(delay * 1000)


def _checked(check: Callable[[Connection], None], write: Send[T]) -> Send[T]:
    """A send that refuses a connection of the wrong family when called, before anything
    is written, so that the refused message is known unsent (see :data:`Send`)."""

    def send(conn: Connection, part: int | None) -> Awaitable[T]:
        check(conn)
        return write(conn, part)

    return send


def _refuse_redesign_dpub(conn: Connection) -> None:
    if conn.is_redesign:
        raise ConfigError(
            f"nsqd {conn.address} is a redesign server, which has no deferred publish"
            " (DPUB): publish without a delay",
            setting="delay",
        )


def _require_redesign(conn: Connection, what: str) -> None:
    if not conn.is_redesign:
        raise ConfigError(
            f"nsqd {conn.address} is an original NSQ server: {what} needs the redesign"
        )
