"""The dashboard's actions with one of two original nsqlookupds down refuse as the CLI does,
in its words, with nothing changed: driven with Textual's pilot against a private original
cluster (1 nsqd, 2 nsqlookupds) one nsqlookupd of which is killed (-9).

An nsqd registers with the nsqlookupds it was told of, so the one down may be the only
one that knows an nsqd holding the topic: the CLI refuses a pause, an unpause or an empty
found through the nsqlookupds then, and the dashboard, which finds the topic through the
same nsqlookupds, must refuse it too rather than act on the nsqds the other one lists.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from textual.pilot import Pilot

from nsqctl.servers import process
from tests.conftest import StartCluster
from tests.helpers.cli import run_main
from tests.helpers.redesign import eventually, unique
from tests.integration.test_dash import cells, until
from tests.integration.test_dash_actions import NotedApp, shown
from tests.integration.test_degraded_actions import error_line, held

ERROR = "nsqctl: error: "

pytestmark = [pytest.mark.timeout(300)]


def topics_of(lookupd: str) -> list[str]:
    topics: list[str] = httpx.get(f"http://{lookupd}/topics", timeout=10).json()["topics"]
    return topics


async def told_after(pilot: Pilot[None], app: NotedApp, key: str) -> str:
    """Press ``key`` and wait for the action's end before any question (every action is
    prepared and checked as the CLI's before it asks): the one notification it gave."""
    told = len(app.notes)

    def ended() -> bool:
        return bool(app.notes[told:]) or shown(app, "ConfirmScreen")

    await pilot.press(key)
    await until(pilot, ended, lambda: f"{key}: refused or asked (said: {app.notes[told:]})")
    assert not shown(app, "ConfirmScreen"), f"{key}: asked to confirm what is refused"
    [note] = app.notes[told:]
    return note


@pytest.mark.original
async def test_actions_with_a_lookupd_down_are_refused_in_the_clis_words(
    start_cluster: StartCluster,
) -> None:
    c = start_cluster("original", nsqd=1, lookupd=2)
    topic, nsqd = unique("lkdown"), c.nsqd_http[0]
    for path in (f"/topic/create?topic={topic}", f"/channel/create?topic={topic}&channel=c"):
        httpx.post(f"http://{nsqd}{path}", timeout=10).raise_for_status()
    httpx.post(f"http://{nsqd}/mpub?topic={topic}", content=b"1\n2\n3", timeout=10)
    down = c.lookupds[1]
    await asyncio.to_thread(
        eventually,
        lambda: all(topic in topics_of(a) for a in c.lookupd_http),
        30,
        "the topic registered with both nsqlookupds",
    )
    process.kill_hard(down)
    lookupd = [x for a in c.lookupd_http for x in ("--lookupd", a)]
    before = await asyncio.to_thread(held, [nsqd], topic)
    app = NotedApp(c)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: topic in [r[0] for r in cells(app, "topics")], "the topic")
        await pilot.press("slash", *topic, "enter", "enter")
        await until(pilot, lambda: bool(cells(app, "channels")), "the channel row")
        for key, args in (
            ("p", ("channel", "pause", topic, "c")),
            ("t", ("topic", "pause", topic)),
            ("e", ("channel", "empty", topic, "c")),
        ):
            line = await told_after(pilot, app, key)
            dry = await asyncio.to_thread(run_main, *args, *lookupd, "--dry-run")
            assert line == error_line(dry, 1, alone=True).removeprefix(ERROR), args
            assert f"nsqlookupd {down.http_address}" in line, line
            assert "refused, nothing was changed" in line, line
            assert shown(app, "TopicScreen")
    assert await asyncio.to_thread(held, [nsqd], topic) == before
