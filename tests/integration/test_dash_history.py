"""The dashboard's history against a live original cluster: the topics list's trend cells
show a sparkline with its range, which moves when messages are published, and opening the
topic's row shows the history view (depth and rate over the window, with the scale)."""

from __future__ import annotations

import re
import uuid

from nsqctl.producer import Producer
from nsqctl.servers import cluster
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.sources import StatsSession
from nsqctl.tui import rows
from nsqctl.tui.app import DashApp
from nsqctl.tui.history import HistoryPanel
from nsqctl.tui.screens import TopicScreen
from tests.integration.test_dash import cells, until

RANGE = re.compile(r" (?:(?P<low>[\d.k]+)–)?(?P<top>[\d.k]+) (?P<unit>msgs|msg/s)$")


def trend_range(cell: str) -> tuple[str, str, str] | None:
    """``(low, top, unit)`` of a trend cell (a flat range has one value); None while it
    has no known sample (``-``)."""
    found = RANGE.search(cell)
    return (found["low"] or found["top"], found["top"], found["unit"]) if found else None


async def test_trend_ranges_move_with_publishing_and_the_history_view_opens(
    original_cluster: cluster.Cluster,
) -> None:
    c = original_cluster
    topic = f"dhist_{uuid.uuid4().hex[:10]}"
    async with Producer(nsqd_tcp=[c.nsqd_tcp[0]]) as producer:
        await producer.publish(topic, b"first")  # no channel: the topic holds it (depth 1)
    app = DashApp(StatsSession(StatsPoller(c.lookupd_http, [], timeout=2.0)), interval=0.3)
    col = {name: i for i, name in enumerate(rows.TOPIC_COLUMNS)}

    def row() -> list[str] | None:
        return {r[0]: r for r in cells(app, "topics")}.get(topic)

    def trend(name: str) -> tuple[str, str, str] | None:
        shown = row()
        return trend_range(shown[col[name]]) if shown else None

    async with app.run_test(size=(220, 50)) as pilot:
        await until(pilot, lambda: trend("depth trend") == ("1", "1", "msgs"), "depth 1, flat")
        await until(pilot, lambda: trend("rate trend") == ("0.0", "0.0", "msg/s"), "rate 0")
        assert row()[col["depth trend"]].startswith("▄")  # type: ignore[index]  # flat
        async with Producer(nsqd_tcp=[c.nsqd_tcp[0]]) as producer:
            await producer.publish_many(topic, [b"x"] * 50)
        await until(pilot, lambda: trend("depth trend") == ("1", "51", "msgs"), "depth 1–51")
        rate = trend("rate trend")
        assert rate is not None and rate[0] == "0.0" and float(rate[1]) > 0, rate
        depth_cell = row()[col["depth trend"]]  # type: ignore[index]
        assert "▁" in depth_cell and "█" in depth_cell, depth_cell  # scaled to its range
        await pilot.press("slash", *topic, "enter", "enter")
        assert isinstance(app.screen, TopicScreen) and app.screen.topic == topic
        panel = app.screen.query_one("#history", HistoryPanel)
        await until(pilot, lambda: panel.depth.last == 51, "the history of the open topic")
        shown = panel.render().plain
        assert "depth (msgs)  now 51  range 1–51 msgs" in shown, shown
        assert re.search(r"rate \(msg/s\)  now 0\.0  range 0\.0–[\d.]+ msg/s", shown), shown
        lines = shown.splitlines()
        assert lines[1].lstrip().startswith("51┤") and lines[4].lstrip().startswith("1┤")
