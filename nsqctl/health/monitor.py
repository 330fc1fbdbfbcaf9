"""Keep judging a cluster: poll every ``interval`` seconds and hold the latest verdict.

The exporter serves what the monitor last saw instead of polling on every scrape, so a
scrape is cheap, rates have a previous poll, and several Prometheus servers scraping do
not multiply the load on nsqd. The latest :class:`Latest` is replaced whole (one
reference assignment), so the HTTP thread reading it never sees half an update.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from dataclasses import dataclass

from nsqctl.health.check import CheckResult, judge
from nsqctl.health.spec import RuleSet
from nsqctl.health.time_to_drain import DRAIN_WINDOW
from nsqctl.stats.sources import ViewSource
from nsqctl.stats.view import ClusterView

MAX_KEPT = 61
"""Polls kept for the drain estimate at most: a short interval narrows its window rather
than holding hundreds of cluster views in memory."""


@dataclass(frozen=True)
class Latest:
    """One poll and its verdict; ``view`` is None before the first poll ended.
    ``window`` is the polls the drain estimate saw (``view`` last); empty means ``view``
    alone."""

    view: ClusterView | None
    result: CheckResult | None
    polled_at: float = 0.0
    poll_seconds: float = 0.0
    polls: int = 0
    window: tuple[ClusterView, ...] = ()


class HealthMonitor:
    """Polls ``source`` until :meth:`stop`; the rules see the last ``samples`` polls, the
    time to drain those of the last :data:`~nsqctl.health.time_to_drain.DRAIN_WINDOW` seconds
    (a steadier pace than a few polls give: see :mod:`nsqctl.health.time_to_drain`)."""

    def __init__(
        self, source: ViewSource, rules: RuleSet, *, interval: float, samples: int
    ) -> None:
        self.source = source
        self.rules = rules
        self.interval = interval
        self.samples = max(2, samples)
        keep = max(self.samples, min(MAX_KEPT, math.ceil(DRAIN_WINDOW / interval) + 1))
        self.window: deque[ClusterView] = deque(maxlen=keep)
        self.latest = Latest(None, None)
        self._stop = asyncio.Event()
        self._polled = asyncio.Event()

    async def poll_once(self) -> Latest:
        started = time.monotonic()
        view = await self.source.refresh()
        self.window.append(view)
        window = tuple(self.window)
        result = judge(window, self.rules, polls=self.samples)
        self.latest = Latest(
            view,
            result,
            time.time(),
            time.monotonic() - started,
            self.latest.polls + 1,
            window,
        )
        self._polled.set()
        return self.latest

    async def run(self) -> None:
        """Poll until :meth:`stop`; the source is closed on the way out."""
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                await self.poll_once()
                pause = max(0.0, self.interval - (time.monotonic() - started))
                # asyncio.timeout, never wait_for: on 3.11 wait_for returns when a cancel
                # lands as the stop wakes it (CPython gh-86296), and run() then ended as
                # if stopped, its canceller never seeing the cancel it asked for
                with contextlib.suppress(TimeoutError):  # the pause ended: poll again
                    async with asyncio.timeout(pause):
                        await self._stop.wait()
        finally:
            await self.source.aclose()

    async def first_poll(self) -> Latest:
        await self._polled.wait()
        return self.latest

    def stop(self) -> None:
        self._stop.set()
