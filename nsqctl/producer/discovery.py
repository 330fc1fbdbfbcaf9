"""Where each topic can be written now: the producer's cache of write topologies.

With lookupds, a topic's topology comes from ``/lookup?access=w`` (with partition meta)
and is kept for ``interval`` seconds or until a publish fails and marks it stale. With
direct nsqd addresses the topology is those addresses. One refresh per topic runs at a
time; publishes that wait for it take its answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from nsqctl.addresses import HostPort, parse_addresses
from nsqctl.errors import LookupUnavailableError, NsqctlError
from nsqctl.lookup.topology import Topology

if TYPE_CHECKING:
    from nsqctl.lookup.client import LookupClient

__all__ = ["TopologyCache"]


class TopologyCache:
    """Write topologies per topic, from lookupds or from direct nsqd addresses."""

    def __init__(
        self,
        lookupd_http: Sequence[str | HostPort] | str | None,
        nsqd_tcp: Sequence[str | HostPort] | str | None,
        interval: float,
    ) -> None:
        self.interval = interval
        self._nsqd = parse_addresses(nsqd_tcp, example="127.0.0.1:4150") if nsqd_tcp else []
        self._lookup: LookupClient | None = None
        if lookupd_http:
            from nsqctl.lookup.client import LookupClient  # httpx only when lookupd is used

            self._lookup = LookupClient(lookupd_http, poll_interval=interval)
        self._topologies: dict[str, Topology] = {}
        self._stale: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._lookupd_redesign: bool | None = None
        self._redesign_topics: set[str] = set()  # seen with partitions or meta

    def cached(self, topic: str) -> Topology | None:
        """The last topology of ``topic``, fresh or not."""
        return self._topologies.get(topic)

    def mark_stale(self, topic: str) -> None:
        """A publish failed: the next :meth:`get` asks the lookupds again."""
        self._stale.add(topic)

    def is_lookup_outage(self, err: BaseException) -> bool:
        """True when ``err`` says no lookupd answered (a publish may wait that out)."""
        return self._lookup is not None and isinstance(err, LookupUnavailableError)

    async def get(self, topic: str, refresh: bool = False) -> Topology:
        topo = self._topologies.get(topic)
        fresh = topo is not None and time.time() - topo.fetched_at < self.interval
        if topo is not None and fresh and not refresh and topic not in self._stale:
            return topo
        lock = self._locks.setdefault(topic, asyncio.Lock())
        async with lock:
            newer = self._topologies.get(topic)
            if newer is not None and newer is not topo and topic not in self._stale:
                return newer  # another task refreshed while we waited
            topo = await self._fetch(topic)
            self._topologies[topic] = topo
            self._stale.discard(topic)
            return topo

    async def close(self) -> None:
        if self._lookup is not None:
            await self._lookup.aclose()

    async def _fetch(self, topic: str) -> Topology:
        if self._lookup is None:
            return Topology.from_nsqd_addresses(self._nsqd, topic=topic)
        topo = await self._lookup.lookup(topic, access="w", metainfo=True)
        if topo.is_redesign:
            self._redesign_topics.add(topic)
        elif (
            topo.is_empty
            and topic not in self._redesign_topics  # never re-route its partitions
            and not await self._redesign_cluster()
        ):
            topo = await self._original_new_topic(topic, topo)
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
        try:
            nodes = await self._lookup.nodes()
        except LookupUnavailableError:
            # Every lookupd is down, after this topic was written through nsqds an earlier
            # /nodes named and before a lookup saw them register it: those nsqds still
            # take it, as the last known topology of any other topic is used in an outage.
            known = self._topologies.get(topic)
            if known is None or known.is_empty:
                raise
            return known.as_stale()
        addresses = [f"{n['broadcast_address']}:{n['tcp_port']}" for n in nodes]
        if not addresses:
            return topo
        return Topology.from_nsqd_addresses(addresses, topic=topic)
