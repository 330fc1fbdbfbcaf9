"""The dashboard's poll ends when it is cancelled, whatever it was waiting on: the app's exit
cancels it and then waits for it, so a poll that outlived its cancel kept polling and the
dashboard never exited."""

from __future__ import annotations

from pathlib import Path

from nsqctl.stats.offline import snapshot_from_files
from nsqctl.stats.sources import StaticSource
from nsqctl.tui.app import DashApp
from tests.helpers.wait import wait_for

STATS = Path(__file__).resolve().parent.parent / "data" / "stats"


async def test_a_cancel_landing_as_the_poll_is_woken_ends_it() -> None:
    # a refresh asked just before the exit: the poll's wait has ended, the poll not yet
    # resumed, when the cancel lands (asyncio.wait_for on 3.11 then returns, cancel lost)
    snap = snapshot_from_files({"127.0.0.1:4151": STATS / "original_nsqd_a_t0.json"}, taken_at=0)
    app = DashApp(StaticSource([snap]), interval=3600)
    async with app.run_test() as pilot:
        await wait_for(lambda: app.polls >= 1, 30, "the first poll", pause=pilot.pause)
        [poll] = [w for w in app.workers if w.name == "poll"]
        app.action_refresh()
        poll.cancel()
        # the next poll would wait an hour (interval): anything short of that tells
        await wait_for(lambda: poll.is_finished, 30, "the poll to end on its cancel", 0.05)
