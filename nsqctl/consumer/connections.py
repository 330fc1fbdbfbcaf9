"""A Consumer's connections: follow the topology (one connection per nsqd and partition
it reads), connect and subscribe, and reconnect with backoff when one is lost.

Its own module because connection upkeep is one job of the Consumer, cut from
:mod:`nsqctl.consumer.client` along its sections. Layer: above :mod:`.delivery` (a new
connection hands its reads to it), below :mod:`.client`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from nsqctl import protocol as p
from nsqctl.connection import Connection
from nsqctl.consumer.delivery import _DeliveryMixin
from nsqctl.consumer.options import _ORDERED_START
from nsqctl.consumer.rdy import _Target
from nsqctl.errors import ConfigError, ConnectError, NsqctlError
from nsqctl.message import Delivery

if TYPE_CHECKING:
    import random

    from nsqctl.connection import ConnectionConfig
    from nsqctl.lookup.model import Topology

log = logging.getLogger("nsqctl.consumer")


class _ConnectionsMixin(_DeliveryMixin):
    """Connection upkeep of :class:`nsqctl.consumer.Consumer`."""

    config: ConnectionConfig
    _rng: random.Random
    _targets: set[_Target]
    _connecting: dict[_Target, asyncio.Task[None]]
    _reconnect_delay: dict[_Target, float]
    _connect_errors: dict[str, str]

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
            log.log(
                logging.WARNING if self.stats.connections or self._conns else logging.INFO,
                "%s",
                text,
            )
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
        if self.options.ordered and err.code == "E_FIN_FAILED":
            # youzan resets an ordered channel's reader (first ordered SUB, leader change):
            # the message comes again and is FINed then, without a second handling.
            log.info("nsqd %s: %s (expected after an ordered reset)", conn.address, err)
            return
        log.warning("nsqd %s: %s", conn.address, err)
