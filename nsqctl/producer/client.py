"""Partition-aware producer for both NSQ families.

Routing: explicit ``partition=``; ``shard_key=`` → ``hash(key) mod partition_num`` on the
redesign (partition_num from lookup ``meta``) or one nsqd chosen consistently over the
sorted node list on the original; otherwise round-robin over writable partitions/nodes.

Reliability: a publish call returns only after the server's OK and raises on failure.
"This partition moved" errors (NOT_LEADER, NOT_WRITABLE, TOPIC_NOT_EXIST) and lost
connections drop that connection, refresh the lookup and retry: a few quick attempts for a
topic not yet written, and up to the failover window for one that was (see
:mod:`nsqctl.producer.failover`). Bad messages are raised at once. A sharded publish never
falls back to another partition (that would break per-key order), and its retries keep
call order per partition (:mod:`nsqctl.producer.ordering`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from nsqctl import protocol as p
from nsqctl.addresses import HostPort, parse_addresses
from nsqctl.connection import Connection, ConnectionConfig
from nsqctl.errors import (
    ConfigError,
    ConnectError,
    ConnectionClosedError,
    NoSuchPartitionError,
    NsqctlError,
    PartitionUnavailableError,
    PublishError,
)
from nsqctl.lookup.model import Peer, Topology
from nsqctl.producer.failover import FailoverEvent, RetryClock, RetryPolicy
from nsqctl.producer.ordering import RouteOrder, TicketLine
from nsqctl.protocol.names import validate_topic
from nsqctl.protocol.replies import parse_traced_reply
from nsqctl.sharding import DEFAULT_HASH, partition_for_key, pick_node_for_key

if TYPE_CHECKING:
    from nsqctl.lookup.client import LookupClient

log = logging.getLogger("nsqctl.producer")

T = TypeVar("T")

#: nsqd's default --max-body-size (MPUB bodies are split to stay under it).
DEFAULT_MAX_BODY_SIZE = 5 * 1024 * 1024


@dataclass(frozen=True)
class Receipt:
    """Where a traced publish landed (for MPUB_TRACE the fields describe the batch: the
    server answers trace id 0 and the first message's internal id; the batch's ids are
    consecutive, and ``trace_ids`` holds each message's trace id in order)."""

    topic: str
    partition: int | None
    nsqd: str
    internal_id: int
    trace_id: int
    offset: int
    size: int
    count: int = 1
    trace_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Target:
    peer: Peer
    partition: int | None

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.peer.tcp_address, self.partition)

    @property
    def route(self) -> int | str:
        """The ordering domain: the partition on the redesign, the node on the original."""
        return self.peer.tcp_address if self.partition is None else self.partition


PublishHook = Callable[[Receipt], None]
FailoverHook = Callable[[FailoverEvent], None]

#: seconds between two "waiting for a leader" events of one topic/partition
WAIT_NOTE_INTERVAL = 5.0


class Producer:
    """Publish to a topic through lookupd discovery or to direct nsqd addresses.

    Use as ``async with Producer(lookupd_http=[...]) as producer: await producer.publish(...)``.
    Many publish calls may run concurrently; they pipeline on the pooled connections.
    """

    def __init__(
        self,
        *,
        lookupd_http: Sequence[str | HostPort] | str | None = None,
        nsqd_tcp: Sequence[str | HostPort] | str | None = None,
        config: ConnectionConfig | None = None,
        hash: str = DEFAULT_HASH,
        retry: RetryPolicy | None = None,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        lookup_interval: float = 60.0,
        on_receipt: PublishHook | None = None,
        on_failover: FailoverHook | None = None,
    ) -> None:
        if not lookupd_http and not nsqd_tcp:
            raise ConfigError("no cluster given: pass --lookupd HOST:PORT or --nsqd HOST:PORT")
        self._nsqd = parse_addresses(nsqd_tcp, example="127.0.0.1:4150") if nsqd_tcp else []
        self._lookup: LookupClient | None = None
        if lookupd_http:
            from nsqctl.lookup.client import LookupClient  # httpx only when lookupd is used

            self._lookup = LookupClient(lookupd_http, poll_interval=lookup_interval)
        self.config = config or ConnectionConfig()
        self.hash = hash
        self.retry = retry or RetryPolicy()
        self.max_body_size = max_body_size
        self.lookup_interval = lookup_interval
        self.on_receipt = on_receipt
        self.on_failover = on_failover
        self._written: set[str] = set()  # topics that took a publish: failover rides
        self._tickets: dict[str, TicketLine] = {}
        self._routes: dict[tuple[str, int | str], RouteOrder] = {}
        self._wait_noted: dict[str, float] = {}
        self._topologies: dict[str, Topology] = {}
        self._stale_topics: set[str] = set()
        self._lookup_locks: dict[str, asyncio.Lock] = {}
        self._pool: dict[tuple[str, str, int | None], Connection] = {}
        self._opening: dict[tuple[str, str, int | None], asyncio.Future[Connection]] = {}
        self._rr: dict[str, itertools.count[int]] = {}
        self._lookupd_redesign: bool | None = None
        self._redesign_topics: set[str] = set()  # seen with partitions or meta
        self._closed = False

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ public API

    async def publish(
        self,
        topic: str,
        body: bytes,
        *,
        partition: int | None = None,
        shard_key: Any = None,
    ) -> None:
        """PUB one message; returns after OK."""
        validate_topic(topic)

        async def send(conn: Connection, part: int | None) -> None:
            await conn.request(p.pub(topic, body, part), "pub")

        await self._with_retry(topic, partition, shard_key, send)

    async def publish_many(
        self,
        topic: str,
        bodies: Sequence[bytes],
        *,
        partition: int | None = None,
        shard_key: Any = None,
    ) -> None:
        """MPUB, split into batches under the server's max body size; all or an error."""
        validate_topic(topic)
        if not bodies:
            return
        batches = p.split_mpub(bodies, self.max_body_size)
        if len(batches) == 1:
            await self._mpub(topic, batches[0], partition, shard_key)
            return
        await asyncio.gather(*(self._mpub(topic, b, partition, shard_key) for b in batches))

    async def _mpub(
        self, topic: str, bodies: Sequence[bytes], partition: int | None, shard_key: Any
    ) -> None:
        async def send(conn: Connection, part: int | None) -> None:
            await conn.request(p.mpub(topic, bodies, part), "mpub")

        await self._with_retry(topic, partition, shard_key, send)

    async def publish_deferred(self, topic: str, body: bytes, defer_ms: int) -> None:
        """DPUB (original family only): delivered after ``defer_ms``."""
        validate_topic(topic)

        async def send(conn: Connection, part: int | None) -> None:
            if conn.is_redesign:
                raise ConfigError(
                    f"nsqd {conn.address} is a redesign server, which has no deferred publish"
                    " (DPUB): publish without --defer"
                )
            await conn.request(p.dpub(topic, defer_ms, body), "dpub")

        await self._with_retry(topic, None, None, send)

    async def publish_traced(
        self,
        topic: str,
        body: bytes,
        trace_id: int,
        *,
        partition: int | None = None,
        shard_key: Any = None,
    ) -> Receipt:
        """PUB_TRACE (redesign): returns where the message landed."""
        return await self._traced(
            topic,
            lambda part: (p.pub_trace(topic, trace_id, body, part), "pub_trace"),
            (trace_id,),
            partition,
            shard_key,
        )

    async def publish_traced_many(
        self,
        topic: str,
        items: Sequence[tuple[int, bytes]],
        *,
        partition: int | None = None,
        shard_key: Any = None,
    ) -> Receipt:
        """MPUB_TRACE (redesign): one receipt describing the batch."""
        return await self._traced(
            topic,
            lambda part: (p.mpub_trace(topic, items, part), "mpub_trace"),
            tuple(trace_id for trace_id, _ in items),
            partition,
            shard_key,
        )

    def traced_batches(
        self, items: Sequence[tuple[int, bytes]]
    ) -> list[Sequence[tuple[int, bytes]]]:
        """``items`` cut, in order, into MPUB_TRACE batches under the server's max body size
        (one :meth:`publish_traced_many` each: a receipt describes one batch)."""
        groups = p.split_mpub(
            [body for _, body in items], self.max_body_size, p.MPUB_TRACE_ENTRY_OVERHEAD
        )
        batches: list[Sequence[tuple[int, bytes]]] = []
        start = 0
        for group in groups:
            batches.append(items[start : start + len(group)])
            start += len(group)
        return batches

    async def _traced(
        self,
        topic: str,
        command: Callable[[int | None], tuple[bytes, str]],
        trace_ids: tuple[int, ...],
        partition: int | None,
        shard_key: Any,
    ) -> Receipt:
        validate_topic(topic)

        async def send(conn: Connection, part: int | None) -> Receipt:
            _require_redesign(conn, "traced publish")
            reply = parse_traced_reply(await conn.request(*command(part)))
            return Receipt(
                topic, part, str(conn.address), *reply, count=len(trace_ids), trace_ids=trace_ids
            )

        receipt = await self._with_retry(topic, partition, shard_key, send)
        if self.on_receipt is not None:
            self.on_receipt(receipt)
        return receipt

    async def publish_ext(
        self,
        topic: str,
        body: bytes,
        ext: dict[str, Any],
        *,
        partition: int | None = None,
        shard_key: Any = None,
    ) -> Receipt | None:
        """PUB_EXT (redesign ext topics): a JSON header beside the body."""
        validate_topic(topic)

        async def send(conn: Connection, part: int | None) -> Receipt | None:
            _require_redesign(conn, "ext publish")
            reply = p.parse_pub_reply(
                await conn.request(p.pub_ext(topic, ext, body, part), "pub_ext")
            )
            if reply is None:
                return None
            return Receipt(topic, part, str(conn.address), *reply)

        return await self._with_retry(topic, partition, shard_key, send)

    async def route(self, topic: str, shard_key: Any) -> tuple[str, int | None]:
        """Where ``shard_key`` lands now: (nsqd address, partition). Callers group keys by
        it to batch many keys into one MPUB without changing where each key goes. While
        the key's partition has no leader (a failover) the address is "": the publish
        itself waits for one. A failed lookup refresh answers from the last topology."""
        try:
            topo = await self._topology(topic)
        except NsqctlError:
            topo = self._topologies.get(topic)
            if topo is None:
                raise
        try:
            return self._choose(topic, topo, None, shard_key).key
        except PartitionUnavailableError as err:
            if err.partition is None or isinstance(err, NoSuchPartitionError):
                raise
            return ("", err.partition)

    async def topology(self, topic: str, refresh: bool = False) -> Topology:
        """The producer's current view of where ``topic`` can be written."""
        return await self._topology(topic, refresh)

    async def close(self) -> None:
        """Close every pooled connection."""
        self._closed = True
        conns = list(self._pool.values())
        self._pool.clear()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
        if self._lookup is not None:
            await self._lookup.aclose()

    # ------------------------------------------------------------------ routing

    async def _topology(self, topic: str, refresh: bool = False) -> Topology:
        topo = self._topologies.get(topic)
        fresh = topo is not None and time.time() - topo.fetched_at < self.lookup_interval
        if topo is not None and fresh and not refresh and topic not in self._stale_topics:
            return topo
        lock = self._lookup_locks.setdefault(topic, asyncio.Lock())
        async with lock:
            newer = self._topologies.get(topic)
            if newer is not None and newer is not topo and topic not in self._stale_topics:
                return newer  # another task refreshed while we waited
            if self._lookup is None:
                topo = Topology.from_nsqd_addresses(self._nsqd, topic=topic)
            else:
                topo = await self._lookup.lookup(topic, access="w", metainfo=True)
                if topo.is_redesign:
                    self._redesign_topics.add(topic)
                elif (
                    topo.is_empty
                    and topic not in self._redesign_topics  # never re-route its partitions
                    and not await self._redesign_cluster()
                ):
                    topo = await self._original_new_topic(topic, topo)
            self._topologies[topic] = topo
            self._stale_topics.discard(topic)
            return topo

    async def _redesign_cluster(self) -> bool:
        """True when the lookupds run a redesign cluster (they answer ``/listlookup``). There
        only the lookupd leader creates topics: a PUB to some nsqd gets E_TOPIC_NOT_EXIST."""
        if self._lookupd_redesign is None:
            assert self._lookup is not None
            try:
                self._lookupd_redesign = await self._lookup.listlookup() is not None
            except NsqctlError:
                return False  # not known this time: ask again next time
        return self._lookupd_redesign

    async def _original_new_topic(self, topic: str, topo: Topology) -> Topology:
        """An original nsqd creates a topic on first PUB: any registered nsqd will do."""
        if self._nsqd:
            return Topology.from_nsqd_addresses(self._nsqd, topic=topic)
        assert self._lookup is not None
        nodes = await self._lookup.nodes()
        addresses = [f"{n['broadcast_address']}:{n['tcp_port']}" for n in nodes]
        if not addresses:
            return topo
        return Topology.from_nsqd_addresses(addresses, topic=topic)

    def _choose(self, topic: str, topo: Topology, partition: int | None, shard_key: Any) -> _Target:
        if partition is not None:
            if not topo.is_redesign and not topo.partitions:
                raise ConfigError(
                    f"topic {topic!r} is on original NSQ servers, which have no partitions:"
                    f" drop --partition {partition}"
                )
            peer = topo.partitions.get(partition)
            if peer is None:
                num = topo.partition_num if topo.meta is not None else 0
                if 0 < num <= partition:
                    raise NoSuchPartitionError(
                        f"topic {topic!r} has {num} partition(s), numbered 0-{num - 1}: "
                        f"there is no partition {partition}",
                        partition,
                    )
                raise PartitionUnavailableError(
                    f"partition {partition} of topic {topic!r} has no writable leader right now"
                    f" (known: {sorted(topo.partitions) or 'none'}); check `nsqctl lookup {topic}`",
                    partition,
                )
            return _Target(peer, partition)
        if shard_key is not None:
            if topo.partitions or topo.is_redesign:
                num = topo.partition_num
                if num <= 0:
                    raise PartitionUnavailableError(
                        f"topic {topic!r} has no partition count in its lookup meta yet: cannot "
                        "shard; check that it exists (`nsqctl lookup`)"
                    )
                part = partition_for_key(shard_key, num, self.hash)
                peer = topo.partitions.get(part)
                if peer is None:
                    raise PartitionUnavailableError(
                        f"shard key maps to partition {part} of topic {topic!r}, which has no "
                        "writable leader right now; not rerouting (that would break order)",
                        part,
                    )
                return _Target(peer, part)
            nodes = {peer.tcp_address: peer for peer in topo.producers}
            if not nodes:
                raise self._no_nodes(topic, topo)
            chosen = pick_node_for_key(shard_key, list(nodes), self.hash)
            return _Target(nodes[chosen], None)
        targets = topo.targets()
        if not targets:
            raise self._no_nodes(topic, topo)
        counter = self._rr.setdefault(topic, itertools.count())
        peer, part = targets[next(counter) % len(targets)]
        return _Target(peer, part)

    def _no_nodes(self, topic: str, topo: Topology) -> PublishError:
        if topo.topic_not_found:
            return PublishError(
                f"topic {topic!r} does not exist on any lookupd: create it first "
                f"(`nsqctl topic create {topic}`)"
            )
        return PublishError(f"no writable nsqd for topic {topic!r}: check `nsqctl lookup {topic}`")

    async def _connection(self, topic: str, target: _Target) -> Connection:
        key = (target.peer.tcp_address, topic, target.partition)
        conn = self._pool.get(key)
        if conn is not None and conn.is_open:
            return conn
        pending = self._opening.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self._opening[key] = fut
        try:
            conn = await Connection.open(
                target.peer.tcp_address,
                self.config,
                on_close=lambda c, _err: self._forget(key, c),
            )
            self._pool[key] = conn
            fut.set_result(conn)
            return conn
        except BaseException as err:
            fut.set_exception(err)
            fut.exception()  # mark retrieved
            raise
        finally:
            self._opening.pop(key, None)

    def _forget(self, key: tuple[str, str, int | None], conn: Connection) -> None:
        if self._pool.get(key) is conn:
            del self._pool[key]

    async def _with_retry(
        self,
        topic: str,
        partition: int | None,
        shard_key: Any,
        send: Callable[[Connection, int | None], Awaitable[T]],
    ) -> T:
        if self._closed:
            raise PublishError("the producer is closed")
        keyed = partition is not None or shard_key is not None
        # the call order, taken before any await: keyed retries keep it per route
        line = self._tickets.setdefault(topic, TicketLine()) if keyed else None
        ticket = line.take() if line is not None else -1
        order: RouteOrder | None = None
        clock = RetryClock(self.retry, time.monotonic(), topic in self._written)
        where: int | None = partition  # the partition being waited for, once known
        refresh = False
        try:
            while True:
                try:
                    topo = await self._topology(topic, refresh)
                    if where is None and topo.partition_num == 1 and topo.is_redesign:
                        where = 0
                    try:
                        target = self._choose(topic, topo, partition, shard_key)
                    except PartitionUnavailableError as err:
                        if line is not None and order is None and err.partition is not None:
                            order = await self._route_order(topic, err.partition, line, ticket)
                        where = err.partition if err.partition is not None else where
                        raise
                    where = target.partition if target.partition is not None else where
                    if line is not None and order is None:
                        order = await self._route_order(topic, target.route, line, ticket)
                    if order is not None:
                        if order.recovering:
                            log.debug("%s ticket %d for route %s waits: %s",
                                      topic, ticket, target.route, order.describe())  # fmt: skip
                        if await order.turn(ticket):
                            # It waited behind a recovery, maybe since before the election:
                            # send where the ticket that went before it just succeeded, not
                            # to the leader it saw then (a burst of waiters split between a
                            # dead leader and the new one would land out of order).
                            topo = self._topologies.get(topic, topo)
                            target = self._choose(topic, topo, partition, shard_key)
                    conn = await self._connection(topic, target)
                    result = await send(conn, conn.partition_arg(target.partition))
                except NoSuchPartitionError:
                    raise
                except p.ServerError as err:
                    if not (err.retryable_on_publish or err.needs_lookup_refresh):
                        err.topic = err.topic or topic
                        raise
                    last: BaseException = err
                    if err.needs_lookup_refresh or err.fatal:
                        await self._drop(topic, err)
                except (ConnectionClosedError, ConnectError) as err:
                    last = err
                    await self._drop(topic, err)
                except PublishError as err:  # no writable leader / topic not (yet) known
                    last = err
                except NsqctlError as err:
                    if not (clock.may_ride and self._lookup_unavailable(err)):
                        raise
                    last = err  # every lookupd down during a failover (e.g. restarted)
                else:
                    self._written.add(topic)
                    if clock.attempts:
                        log.debug("%s ticket %d accepted by %s after %d failure(s)",
                                  topic, ticket, conn.address, clock.attempts)  # fmt: skip
                    if clock.riding:
                        self._note(FailoverEvent(
                            "resumed", topic, where, clock.waited(time.monotonic()),
                            str(conn.address),
                        ))  # fmt: skip
                    return result
                if order is not None:
                    order.failed(ticket)
                refresh = True
                self._stale_topics.add(topic)
                now = time.monotonic()
                delay = clock.failed(now, leader_lost=True)
                if delay is None:
                    raise self._gave_up(topic, where, clock, last)
                if clock.riding:
                    self._waiting(FailoverEvent("waiting", topic, where, clock.waited(now),
                                                str(last)))  # fmt: skip
                log.info("publish to %s failed (%s); ticket %d retry %d in %.2fs",
                         topic, last, ticket, clock.attempts, delay)  # fmt: skip
                await asyncio.sleep(delay)
        finally:
            if line is not None:
                line.passed(ticket)  # no-op once registered
            if order is not None:
                order.settle(ticket)

    async def _route_order(
        self, topic: str, route: int | str, line: TicketLine, ticket: int
    ) -> RouteOrder:
        """Register ``ticket`` on its route once every earlier ticket of the topic has."""
        await line.turn(ticket)
        order = self._routes.setdefault((topic, route), RouteOrder())
        order.register(ticket)
        line.passed(ticket)
        return order

    def _lookup_unavailable(self, err: BaseException) -> bool:
        if self._lookup is None:
            return False
        from nsqctl.errors import LookupUnavailableError

        return isinstance(err, LookupUnavailableError)

    def _gave_up(
        self, topic: str, where: int | None, clock: RetryClock, last: BaseException
    ) -> PublishError:
        if clock.riding:
            window = self.retry.failover_window
            place = topic if where is None else f"{topic}/{where}"
            return PublishError(
                f"no leader took the publish to {place} within the failover window "
                f"({window:.0f}s): {last}; check `nsqctl lookup {topic}`, or wait longer "
                "with --failover-window"
            )
        if isinstance(last, PublishError):
            return last
        return PublishError(
            f"publish to topic {topic!r} failed after {clock.attempts} attempt(s): {last}"
        )

    def _waiting(self, event: FailoverEvent) -> None:
        """A waiting event at most every WAIT_NOTE_INTERVAL per topic/partition (many
        publishes in flight wait for the same leader)."""
        now = time.monotonic()
        if now - self._wait_noted.get(event.where, -WAIT_NOTE_INTERVAL) < WAIT_NOTE_INTERVAL:
            return
        self._wait_noted[event.where] = now
        self._note(event)

    def _note(self, event: FailoverEvent) -> None:
        if event.kind == "resumed" and self._wait_noted.pop(event.where, None) is None:
            return  # another publish already said so
        log.info("%s", event.describe(self.retry.failover_window))
        if self.on_failover is not None:
            self.on_failover(event)

    async def _drop(self, topic: str, err: BaseException) -> None:
        """After "this partition moved", close the topic's connections: the next attempt
        reconnects from a fresh lookup. Closed connections already left the pool
        through ``_forget``."""
        if isinstance(err, p.ServerError) and err.needs_lookup_refresh:
            for key, conn in list(self._pool.items()):
                if key[1] == topic:
                    self._pool.pop(key, None)
                    await conn.close()


def _require_redesign(conn: Connection, what: str) -> None:
    if not conn.is_redesign:
        raise ConfigError(
            f"nsqd {conn.address} is an original NSQ server: {what} needs the redesign"
        )
