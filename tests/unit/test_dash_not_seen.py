"""What the dashboard says it cannot see, driven by the pilot on a fixed view: of an
original topic no answering nsqd holds, what the CLI's ``stat`` says (one wording,
:mod:`nsqctl.stats.coverage`) in the topics list, the summary line that counts them and the
topic's screen; of an nsqd that does not answer, that what it holds is unknown, and what
the rest of the cluster places on it."""

from __future__ import annotations

from textual.widgets import Static

from nsqctl.cli.commands.stat import format_row, stat_rows
from nsqctl.stats.model import ClusterSnapshot, CoordInfo, NodeStats, UnseenTopic
from nsqctl.stats.sources import StaticSource
from nsqctl.stats.view import build_view
from nsqctl.tui.app import DashApp
from nsqctl.tui.nsqdscreen import NsqdScreen, placed_rows, unknown_holdings_title
from nsqctl.tui.rowtable import RowTable
from nsqctl.tui.screens import TopicScreen
from tests.helpers.stats import topic_stats
from tests.helpers.wait import wait_for

UP = NodeStats(address="127.0.0.1:4151", fetched_at=1.0, state="up")
DOWN = "127.0.0.1:4251"
GUESS = f"nsqlookupd lists it with no producer: on nsqd {DOWN} (down), or left behind"


def _cells(app: DashApp, table: str) -> list[list[str]]:
    rows = app.screen.query_one(f"#{table}", RowTable)
    return [[str(c) for c in rows.get_row_at(i)] for i in range(rows.row_count)]


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


async def test_the_screen_of_an_nsqd_that_does_not_answer_says_its_holdings_are_unknown() -> None:
    """It listed nothing under "held by", as if the nsqd held no topic."""
    unseen = {"lost": UnseenTopic(holders=(DOWN,), channels=("billing",))}
    down = NodeStats(address=DOWN, fetched_at=1.0, state="down", error="refused")
    app = DashApp(StaticSource([ClusterSnapshot(1.0, (UP, down), unseen_topics=unseen)]), 3600)
    async with app.run_test(size=(180, 40)) as pilot:
        await wait_for(lambda: app.polls >= 1, 30, "the first poll", pause=pilot.pause)
        await pilot.press("colon", *DOWN, "enter")
        assert isinstance(app.screen, NsqdScreen) and app.screen.address == DOWN
        await wait_for(lambda: bool(_cells(app, "nsqd-topics")), 30, "rows", pause=pilot.pause)
        title = str(app.screen.query_one("#held-title", Static).render())
        assert title == (
            f"held by nsqd {DOWN}: unknown, it does not answer; below, what the rest of the "
            "cluster places on it"
        )
        mark = f"NOT SEEN (nsqd {DOWN} down)"
        assert _cells(app, "nsqd-topics") == [["lost", "-", "-", "?", "?", "1", mark]]


def test_a_down_redesign_nsqd_holds_the_partitions_that_name_it() -> None:
    """Its leaders as nsqlookupd names them, and the ISR and catch-up lists the other
    copies report, in their words; a partition that names it nowhere is not its."""
    a, b, c = UP.address, DOWN, "127.0.0.1:4451"
    held = (
        topic_stats(a, "T", partition=0),
        topic_stats(a, "T", partition=1),
        topic_stats(a, "U", partition=0),
    )
    up = NodeStats(address=a, fetched_at=1.0, state="up", is_redesign=True, topics=held)
    down = NodeStats(address=b, fetched_at=1.0, state="down", error="refused", is_redesign=True)
    coordinator = (
        CoordInfo("T", 0, a, isr=(a, b)),
        CoordInfo("T", 1, a, isr=(a,), catchup=(b,)),
        CoordInfo("U", 0, a, isr=(a, c)),
    )
    view = build_view(ClusterSnapshot(1.0, (up, down), coordinator=coordinator))
    assert [cells for _, cells in placed_rows(view, b)] == [
        ("T", "0", "no", "?", "?", "?", "in its ISR"),
        ("T", "1", "no", "?", "?", "?", "in its catch-up list"),
    ]
    head = f"held by nsqd {b}: unknown, it does not answer; "
    assert unknown_holdings_title(view, b, True) == (
        f"{head}below, what the rest of the cluster places on it"
    )
    # the dashboard asks a partition's ISR only while its topic is open: say what is missing
    unasked = build_view(ClusterSnapshot(1.0, (up, down), coordinator=coordinator[:2]))
    assert unknown_holdings_title(unasked, b, False) == (
        f"{head}the rest of the cluster places no topic on it (ISRs are asked only for an "
        "open topic: its copies in others are not shown)"
    )


async def test_a_down_nsqd_never_matched_to_its_node_id_is_not_said_to_hold_nothing() -> None:
    """An nsqd down since the dashboard began (given by HTTP address, never listed by
    nsqlookupd) has no known TCP address, so the ISRs name it only by its youzan node id
    (``ip:rpc_port:tcp_port:n``): its screen said the cluster placed no topic on it."""
    a, b = UP.address, DOWN
    ids = ("127.0.0.1:4250:4252:7", "127.0.0.1:4450:4452:9")  # as youzan's GenNsqdNodeID
    held = (topic_stats(a, "T", partition=0), topic_stats(a, "T", partition=1))
    up = NodeStats(address=a, fetched_at=1.0, state="up", is_redesign=True, topics=held)
    down = NodeStats(address=b, fetched_at=1.0, state="down", error="refused", is_redesign=True)
    coordinator = (
        CoordInfo("T", 0, a, isr=(a, ids[0])),
        CoordInfo("T", 1, a, isr=(a,), catchup=(ids[1],)),
    )
    source = StaticSource([ClusterSnapshot(1.0, (up, down), coordinator=coordinator)])
    app = DashApp(source, interval=3600)
    async with app.run_test(size=(240, 40)) as pilot:
        await wait_for(lambda: app.polls >= 1, 30, "the first poll", pause=pilot.pause)
        await pilot.press("colon", *b, "enter")
        assert isinstance(app.screen, NsqdScreen) and app.screen.address == b
        title = app.screen.query_one("#held-title", Static)
        await wait_for(lambda: "unknown" in str(title.render()), 30, "title", pause=pilot.pause)
        assert str(title.render()) == (
            f"held by nsqd {b}: unknown, it does not answer; ISRs name nsqds by node id that "
            f"could not be matched ({ids[0]}, {ids[1]}): one may be this one"
        )
        assert _cells(app, "nsqd-topics") == []
    # a partition that names it by address is listed, the unmatched ids still said
    named = (CoordInfo("T", 0, a, isr=(a, b)), coordinator[1])
    view = build_view(ClusterSnapshot(1.0, (up, down), coordinator=named))
    assert [cells[-1] for _, cells in placed_rows(view, b)] == ["in its ISR"]
    assert unknown_holdings_title(view, b, True).endswith(
        "below, what the rest of the cluster places on it; ISRs also name nsqds by node id "
        f"that could not be matched ({ids[1]}): one may be this one"
    )
