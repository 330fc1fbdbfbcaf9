"""The dashboard's actions on a degraded cluster refuse as the CLI does, in its words, with
nothing changed: driven with Textual's pilot against a private original cluster (2 nsqd)
one nsqd of which is stopped (SIGSTOP: registered, its sockets open, answering nothing).

The dashboard plans on its last poll, where the stopped nsqd soon shows down and the topic
on the other nsqd alone; before it asks, it goes through the CLI's preparation, which asks
every nsqd holding the topic and refuses. The CLI's dry run runs beside it, in the same
stop window, to compare the words.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import StartCluster
from tests.helpers.hang import nsqctl, stopped
from tests.integration.test_dash import cells, until
from tests.integration.test_dash_actions import NotedApp, shown
from tests.integration.test_degraded_actions import BOUND, error_line, held, two_nsqds

ERROR = "nsqctl: error: "


@pytest.mark.original
async def test_pause_with_a_hung_nsqd_is_refused_in_the_clis_words(
    start_cluster: StartCluster,
) -> None:
    c = start_cluster("original", nsqd=2)
    pair = await asyncio.to_thread(two_nsqds, c)
    topic, (a, b) = pair.topic, c.nsqds
    nodes = [a.http_address, b.http_address]
    before = await asyncio.to_thread(held, nodes, topic)
    app = NotedApp(c)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: topic in [r[0] for r in cells(app, "topics")], "the topic")
        await pilot.press("slash", *topic, "enter", "enter")
        await until(pilot, lambda: bool(cells(app, "channels")), "the channel row")
        async with stopped(b):
            cli = asyncio.create_task(
                nsqctl("channel", "pause", topic, "c", *pair.lookupd, "--dry-run", bound=BOUND)
            )
            await pilot.press("p")
            # refused before any question (the CLI checks before it asks too), within what
            # a command may take: the hung nsqd's ping times out first; a question instead
            # is an end too, answered nothing and failed below
            await until(
                pilot,
                lambda: any("refused" in n for n in app.notes) or shown(app, "ConfirmScreen"),
                lambda: f"the pause refused or asked (it said: {app.notes})",
                tries=400,
                timeout=BOUND,
            )
            assert not shown(app, "ConfirmScreen"), "asked to confirm what is refused"
            dry = await cli
    told = [n for n in app.notes if "refused" in n]
    assert len(told) == 1, app.notes
    assert told[0] == error_line(dry, 1, alone=True).removeprefix(ERROR)
    assert f"nsqd {b.http_address}" in told[0] and "nothing was changed" in told[0], told
    assert not any("done on" in n for n in app.notes), app.notes
    assert await asyncio.to_thread(held, nodes, topic) == before
