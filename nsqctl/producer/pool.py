"""The producer's open connections: one per (nsqd, topic, partition), shared by every
publish that goes there, so concurrent publishes pipeline on it.

A redesign nsqd binds a connection's publishes to the partition named in them, and a
connection that got "this partition moved" must not be reused, so connections are kept
per topic and partition, not per nsqd. Concurrent first publishes to one key wait for the
one connection being opened instead of each opening their own.
"""

from __future__ import annotations

import asyncio

from nsqctl.addresses import HostPort
from nsqctl.connection import Connection, ConnectionConfig
from nsqctl.producer.routing import Target

__all__ = ["ConnectionPool", "PoolKey"]

#: (nsqd TCP address, topic, partition)
PoolKey = tuple[HostPort, str, int | None]


class ConnectionPool:
    """Opens, reuses and forgets the producer's connections."""

    def __init__(self, config: ConnectionConfig) -> None:
        self.config = config
        self._open: dict[PoolKey, Connection] = {}
        self._opening: dict[PoolKey, asyncio.Future[Connection]] = {}

    async def connection(self, topic: str, target: Target) -> Connection:
        """An open connection for publishes of ``topic`` to ``target``."""
        key = (target.peer.tcp_address, topic, target.partition)
        conn = self._open.get(key)
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
            self._open[key] = conn
            fut.set_result(conn)
            return conn
        except BaseException as err:
            fut.set_exception(err)
            fut.exception()  # mark retrieved: nobody else may be waiting
            raise
        finally:
            self._opening.pop(key, None)

    async def drop_topic(self, topic: str) -> None:
        """Close every connection of ``topic``: after "this partition moved" the next
        attempt reconnects to wherever a fresh lookup says."""
        for key, conn in list(self._open.items()):
            if key[1] == topic:
                self._open.pop(key, None)
                await conn.close()

    async def close(self) -> None:
        """Close every connection."""
        conns = list(self._open.values())
        self._open.clear()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

    def _forget(self, key: PoolKey, conn: Connection) -> None:
        """A connection closed on its own (server, network): it leaves the pool."""
        if self._open.get(key) is conn:
            del self._open[key]
