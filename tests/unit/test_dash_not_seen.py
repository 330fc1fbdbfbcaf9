"""The dashboard, driven by the pilot on a fixed view, says of an original topic no
answering nsqd holds what the CLI's ``stat`` says (one wording, :mod:`nsqctl.stats.coverage`):
in the topics list, the summary line that counts them and the topic's screen."""

from __future__ import annotations

from textual.widgets import Static

from nsqctl.cli.commands.stat import format_row, stat_rows
from nsqctl.stats.model import ClusterSnapshot, NodeStats, UnseenTopic
from nsqctl.stats.sources import StaticSource
from nsqctl.tui.app import DashApp
from nsqctl.tui.rowtable import RowTable
from nsqctl.tui.screens import TopicScreen
from tests.helpers.wait import wait_for

UP = NodeStats(address="127.0.0.1:4151", fetched_at=1.0, state="up")
DOWN = "127.0.0.1:4251"
GUESS = f"nsqlookupd lists it with no producer: on nsqd {DOWN} (down), or left behind"


def _topic_summary(app: DashApp) -> str:
    return str(app.screen.query_one("#topic-summary", Static).render())


async def test_the_topic_list_summary_and_topic_screen_say_what_stat_says() -> None:
    """``lost`` was seen on the nsqd now down (a fact); ``left`` is listed by nsqlookupd
    with no producer (on the nsqd down, or left behind: a guess)."""
    unseen = {
        "left": UnseenTopic(holders=(DOWN,), guessed=True, unregistered=True),
        "lost": UnseenTopic(holders=(DOWN,), channels=("billing",)),
    }
    down = NodeStats(address=DOWN, fetched_at=1.0, state="down", error="refused")
    source = StaticSource([ClusterSnapshot(1.0, (UP, down), unseen_topics=unseen)])
    marks = {"left": f"NOT SEEN ({GUESS})", "lost": f"NOT SEEN (nsqd {DOWN} down)"}
    view = await source.refresh()
    stat = {r["what"]: format_row("12:00:00", r) for r in stat_rows(view, None, None)}
    assert all(stat[t].endswith(m) for t, m in marks.items()), stat  # the CLI's words
    app = DashApp(source, interval=3600)
    async with app.run_test(size=(180, 40)) as pilot:
        await wait_for(lambda: app.polls >= 1, 30, "the first poll", pause=pilot.pause)
        table = app.screen.query_one("#topics", RowTable)
        shown = {str(table.get_row_at(i)[0]): table.get_row_at(i) for i in range(2)}
        assert {t: str(cells[-1]) for t, cells in shown.items()} == marks
        summary = str(app.screen.query_one("#summary", Static).render())
        assert "1 topics not seen (their nsqds are down)" in summary, summary
        assert (
            "1 topics not seen (nsqlookupd lists it with no producer: on an nsqd (down), or "
            "left behind)"
        ) in summary, summary
        for keys, (topic, mark) in zip((["enter"], ["down", "enter"]), marks.items(), strict=True):
            await pilot.press(*keys)  # the topics are sorted by name: left, then lost
            screen = app.screen
            assert isinstance(screen, TopicScreen) and screen.topic == topic
            await wait_for(lambda: _topic_summary(app) != "", 30, "its line", pause=pilot.pause)
            said = _topic_summary(app)
            assert said.startswith(f"topic {topic} · {mark} · "), said
            await pilot.press("escape")
