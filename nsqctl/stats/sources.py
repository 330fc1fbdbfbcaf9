"""A polling session: snapshots in, views (with rates and history) out.

``nsqctl stat`` and ``nsqctl dash`` both read a :class:`ViewSource`; the live one is a
:class:`StatsSession`, tests and benchmarks use :class:`StaticSource`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from nsqctl.errors import NsqctlError
from nsqctl.stats.history import DEFAULT_LENGTH, History
from nsqctl.stats.model import ClusterSnapshot
from nsqctl.stats.read import ClientScope
from nsqctl.stats.view import ClusterView, build_view


class ViewSource(Protocol):
    async def refresh(self) -> ClusterView: ...

    def focus(self, topics: Collection[str]) -> None:
        """The topics a viewer shows in detail (their ISR is worth asking for)."""

    def show_clients(self, scopes: Collection[ClientScope] | None) -> None:
        """Whose client connections (and the RDY they add up to) a viewer shows: topics,
        or ``(topic, channel)`` pairs; ``None``: every topic's, what a source lists until
        told otherwise."""

    async def aclose(self) -> None: ...


class SnapshotSource(Protocol):
    """What a session polls: :class:`StatsPoller`, or a stand-in in benchmarks."""

    async def snapshot(self) -> ClusterSnapshot: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class FocusablePoller(Protocol):
    """A snapshot source that can ask more about some topics (:class:`StatsPoller`)."""

    def set_focus(self, topics: Collection[str] | None) -> None: ...


@runtime_checkable
class ClientSelectingPoller(Protocol):
    """A snapshot source that can list clients of some topics only (:class:`StatsPoller`)."""

    def set_clients(self, scopes: Collection[ClientScope] | None) -> None: ...


class StatsSession:
    """Keeps the previous snapshot (for rates) and the session history (for sparklines)."""

    def __init__(self, poller: SnapshotSource, history_length: int = DEFAULT_LENGTH) -> None:
        self.poller = poller
        self.history = History(history_length)
        self._previous: ClusterSnapshot | None = None

    async def refresh(self) -> ClusterView:
        try:
            snap = await self.poller.snapshot()
        except NsqctlError:
            self.history.gap(time.time())  # the failed poll shows as a gap, not a zero
            raise
        view = await asyncio.to_thread(build_view, snap, self._previous, self.history)
        self._previous = snap
        return view

    def focus(self, topics: Collection[str]) -> None:
        if isinstance(self.poller, FocusablePoller):
            self.poller.set_focus(topics)

    def show_clients(self, scopes: Collection[ClientScope] | None) -> None:
        if isinstance(self.poller, ClientSelectingPoller):
            self.poller.set_clients(scopes)

    async def aclose(self) -> None:
        await self.poller.aclose()


class StaticSource:
    """A fixed view built from prepared snapshots (recorded payloads) as if polled in order;
    every refresh returns the final view, so what is shown is deterministic."""

    def __init__(
        self, snapshots: Sequence[ClusterSnapshot], history_length: int = DEFAULT_LENGTH
    ) -> None:
        if not snapshots:
            raise ValueError("StaticSource needs at least one snapshot")
        self.history = History(history_length)
        self._views: list[ClusterView] = []
        previous: ClusterSnapshot | None = None
        for snap in snapshots:
            self._views.append(build_view(snap, previous, self.history))
            previous = snap

    async def refresh(self) -> ClusterView:
        return self._views[-1]

    def focus(self, topics: Collection[str]) -> None:
        return None  # the views are fixed

    def show_clients(self, scopes: Collection[ClientScope] | None) -> None:
        return None  # the views are fixed

    async def aclose(self) -> None:
        return None
