"""The health monitor's run ends as cancelled when it is cancelled, however the cancel
lines up with its pause being woken: a cancel swallowed there (asyncio.wait_for on Python
3.11, CPython gh-86296) made ``run()`` return as if stopped, so whoever cancelled it and
awaited it saw no CancelledError, and the task kept a pending cancel request that later
turned its own timeouts into cancels."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from nsqctl.health import HealthMonitor, RuleSet
from nsqctl.stats.offline import snapshot_from_files
from nsqctl.stats.sources import StaticSource

STATS = Path(__file__).resolve().parent.parent / "data" / "stats"


async def test_a_cancel_landing_as_the_pause_is_woken_ends_the_run() -> None:
    # the wake (stop) and the cancel 0, 1, 2... loop turns apart, until the run is over
    # before the cancel comes: each cancel that was taken must end the run as cancelled
    snap = snapshot_from_files({"127.0.0.1:4151": STATS / "original_nsqd_a_t0.json"}, taken_at=0)
    taken = []
    for steps in range(20):
        monitor = HealthMonitor(StaticSource([snap]), RuleSet.parse([]), interval=3600, samples=2)
        run = asyncio.create_task(monitor.run())
        await monitor.first_poll()
        await asyncio.sleep(0)  # the run is in its hour-long pause
        monitor.stop()
        for _ in range(steps):
            await asyncio.sleep(0)
        if not run.cancel():
            break  # the run ended on the stop alone: no cancel landed
        with contextlib.suppress(asyncio.CancelledError):
            await run
        taken.append((steps, run.cancelled()))
    assert taken and all(cancelled for _, cancelled in taken), taken
