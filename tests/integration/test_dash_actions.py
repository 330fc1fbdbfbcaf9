"""The dashboard's destructive-action guard and its navigation, driven with Textual's pilot
against the session clusters: ``e`` on a channel holding more than the confirmation
threshold shows the CLI's plan and loss preview and asks for the topic name (a wrong name
changes nothing, the right one empties it), on both families; enter on an nsqd opens its
screen; ``:`` jumps to a topic or an nsqd by name."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from textual.widgets import Label

from nsqctl import admin
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.read import fetch_nsqd_stats
from nsqctl.stats.sources import StatsSession
from nsqctl.tui.app import DashApp
from nsqctl.tui.screens import MainScreen, TopicScreen
from tests.helpers.redesign import TopicSpec, channel_depths, create_topics, unique
from tests.helpers.settled import channel_on, copied_to_channel
from tests.helpers.wait import wait_for
from tests.integration.test_dash import cells, until


class NotedApp(DashApp):
    """The dashboard, keeping what it told the operator in a notification."""

    def __init__(self, c: Cluster) -> None:
        poller = StatsPoller(c.lookupd_http, [], timeout=2.0)
        super().__init__(StatsSession(poller), interval=0.3)
        self.notes: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:
        self.notes.append(message)
        super().notify(message, **kwargs)


def record_notes(app: DashApp) -> list[str]:
    """What ``app`` tells the operator in notifications from now on (still shown too)."""
    told: list[str] = []
    notify = app.notify

    def record(message: str, **kwargs: Any) -> None:
        told.append(message)
        notify(message, **kwargs)

    app.notify = record  # type: ignore[method-assign]
    return told


def shown(app: DashApp, screen: str) -> bool:
    """Whether ``screen`` is in front, by name, so this module imports on the code it tests
    before the screens existed (and fails there on behaviour, not on an import)."""
    return type(app.screen).__name__ == screen


BACKLOG = 1500  # over admin.DEFAULT_CONFIRM_ABOVE: the name must be typed back


async def held(c: Cluster, topic: str) -> int:
    """Messages the channel holds as the nsqds themselves say (each partition's leader on
    the redesign), read apart from the dashboard."""
    if c.flavor == "redesign":
        return sum((await asyncio.to_thread(channel_depths, c, topic, "held")).values())
    async with httpx.AsyncClient(timeout=5) as http:
        node = await fetch_nsqd_stats(http, c.nsqd_http[0], topic=topic)
    found = node.channel(topic, "held")
    assert found is not None
    return found.depth


async def backlog_on_a_channel(c: Cluster, topic: str) -> None:
    """``topic`` with channel ``held`` holding :data:`BACKLOG` messages (the original
    family: on the first nsqd; the redesign: over two partitions)."""
    if c.flavor == "redesign":
        await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2)}, channels=("held",))
        async with Producer(lookupd_http=c.lookupd_http) as producer:
            await producer.publish_many(topic, [b"m"] * BACKLOG)
        return
    await held_on_one_nsqd(c, topic, 0, BACKLOG)


async def held_on_one_nsqd(c: Cluster, topic: str, index: int, count: int) -> None:
    """Original family: ``topic`` with channel ``held`` on nsqd ``index`` alone, holding
    ``count`` more messages there."""
    nsqd = c.nsqd_http[index]
    created = await admin.create_topic_async(c.lookupd_http, topic, nsqd_http=[nsqd])
    created.raise_for_failures()
    placement, stages = await admin.prepare(
        "channel", topic, (), [nsqd], action="create", channel="held"
    )
    (await admin.run_plan("channel create", placement, stages, channel="held")).raise_for_failures()
    before = (await channel_on(nsqd, topic, "held")).message_count
    async with Producer(nsqd_tcp=[c.nsqd_tcp[index]]) as producer:
        await producer.publish_many(topic, [b"m"] * count)
    await copied_to_channel(nsqd, topic, "held", before + count)


async def test_empty_over_the_threshold_asks_for_the_topic_name(any_cluster: Cluster) -> None:
    c = any_cluster
    topic = unique("dempty")
    await backlog_on_a_channel(c, topic)
    assert await held(c, topic) == BACKLOG > admin.DEFAULT_CONFIRM_ABOVE
    app = NotedApp(c)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: topic in [r[0] for r in cells(app, "topics")], "the topic")
        await pilot.press("slash", *topic, "enter", "enter")
        assert isinstance(app.screen, TopicScreen) and app.screen.topic == topic
        await until(pilot, lambda: bool(cells(app, "channels")), "the channel row")

        await pilot.press("e")
        await until(pilot, lambda: shown(app, "TypeNameScreen"), "the name dialog")
        question = str(app.screen.query_one("#question", Label).content)
        assert f"drop every queued message of channel {topic}/held on nsqd" in question
        assert f"total: {BACKLOG} messages" in question  # the CLI's loss preview
        assert topic in str(app.screen.query_one("#prompt", Label).content)
        await pilot.press("y", "enter")  # a reflexive yes is not the name
        await until(pilot, lambda: isinstance(app.screen, TopicScreen), "the dialog closed")
        assert any("the topic name was not typed back" in n for n in app.notes)
        assert await held(c, topic) == BACKLOG

        await pilot.press("e")
        await until(pilot, lambda: shown(app, "TypeNameScreen"), "the name dialog")
        await pilot.press(*topic, "enter")
        await until(pilot, lambda: isinstance(app.screen, TopicScreen), "the dialog closed")
        await until(
            pilot,
            lambda: bool(app.view and app.view.topic(topic).channel("held").depth == 0),  # type: ignore[union-attr]
            "the channel emptied",
        )
    assert await held(c, topic) == 0


async def test_empty_shows_the_loss_of_now_not_of_the_last_poll(
    original_cluster: Cluster,
) -> None:
    """The loss in the guard is measured when the operator is asked, on the nsqds the
    topic is on then, after the CLI's preparation: messages published after the last poll,
    on an nsqd the poll had not seen the topic on, are counted (and emptied) too."""
    c = original_cluster
    topic = unique("dnow")
    await held_on_one_nsqd(c, topic, 0, 3)
    app = NotedApp(c)
    app.interval = 600.0  # the first polls (start, opening the topic) only: no poll meanwhile
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: topic in [r[0] for r in cells(app, "topics")], "the topic")
        await pilot.press("slash", *topic, "enter", "enter")
        assert isinstance(app.screen, TopicScreen) and app.screen.topic == topic
        await until(pilot, lambda: bool(cells(app, "channels")), "the channel row")
        polled = app.polls

        await held_on_one_nsqd(c, topic, 1, 4)  # after the last poll, on the other nsqd

        async def on_both() -> bool:
            placement, _ = await admin.prepare(
                "channel", topic, c.lookupd_http, (), action="empty", channel="held"
            )
            return len(placement.nsqds) == 2

        await wait_for(on_both, 10, "the lookupd to list the topic on both nsqds")
        assert app.view is not None and app.view.topic(topic) is not None
        assert [p.leader for p in app.view.topic(topic).partitions] == [c.nsqd_http[0]]  # type: ignore[union-attr]

        await pilot.press("e")
        await until(pilot, lambda: shown(app, "ConfirmScreen"), "the confirmation")
        question = str(app.screen.query_one("#question", Label).content)
        assert app.polls == polled
        assert "total: 7 messages" in question, question
        assert c.nsqd_http[1] in question, question
        await pilot.press("y")
        await until(pilot, lambda: any("done on" in n for n in app.notes), "the empty done")
    async with httpx.AsyncClient(timeout=5) as http:
        for address in c.nsqd_http:
            node = await fetch_nsqd_stats(http, address, topic=topic)
            assert node.channel(topic, "held").depth == 0, address  # type: ignore[union-attr]


async def test_enter_on_an_nsqd_and_colon_jumps(original_cluster: Cluster) -> None:
    c = original_cluster
    topic = unique("djump")
    async with Producer(nsqd_tcp=[c.nsqd_tcp[1]]) as producer:
        await producer.publish_many(topic, [b"j"] * 3)
    app = NotedApp(c)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: topic in [r[0] for r in cells(app, "topics")], "the topic")
        await pilot.press("shift+tab")  # from the topics table to the nodes table
        nodes = [r[0] for r in cells(app, "nodes")]
        await pilot.press(*["down"] * nodes.index(c.nsqd_http[1]), "enter")
        assert shown(app, "NsqdScreen") and app.screen.address == c.nsqd_http[1]  # type: ignore[attr-defined]
        await until(pilot, lambda: bool(cells(app, "nsqd-topics")), "its topics")
        held = cells(app, "nsqd-topics")
        [row] = [r for r in held if r[0] == topic]
        assert row[3] == "3"  # depth, as that nsqd holds it
        await pilot.press(*["down"] * held.index(row), "enter")  # enter: the topic's screen
        assert isinstance(app.screen, TopicScreen) and app.screen.topic == topic
        await pilot.press("escape", "escape", "n", "enter")  # the node screen: its first nsqd
        assert shown(app, "NsqdScreen") and app.screen.address == nodes[0]  # type: ignore[attr-defined]
        await pilot.press("escape", "escape")
        assert isinstance(app.screen, MainScreen)

        await pilot.press("colon", *topic, "enter")
        assert isinstance(app.screen, TopicScreen) and app.screen.topic == topic
        await pilot.press("escape", "colon", *c.nsqd_http[0], "enter")
        assert shown(app, "NsqdScreen") and app.screen.address == c.nsqd_http[0]  # type: ignore[attr-defined]
        await pilot.press("escape", "colon", *"no-such-topic", "enter")
        assert isinstance(app.screen, MainScreen)
        assert any("no topic or nsqd named 'no-such-topic'" in n for n in app.notes)
