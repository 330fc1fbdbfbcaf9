"""The words every view uses for an original topic whose every nsqd is down, when nothing
says which nsqd holds it (model only: the real servers' cells, where the holder is known,
are in tests/integration/test_degraded_views_original.py)."""

from __future__ import annotations

from nsqctl.cli.commands.stat import format_row, stat_rows
from nsqctl.stats.coverage import coverage
from nsqctl.stats.model import ClusterSnapshot, NodeStats, TopicPartitionStats, UnseenTopic
from nsqctl.stats.view import build_view
from nsqctl.tui import rows

UP = NodeStats(address="127.0.0.1:4151", fetched_at=1.0, state="up")
A, B = "127.0.0.1:4251", "127.0.0.1:4351"
DOWN = tuple(NodeStats(address=a, fetched_at=1.0, state="down", error="refused") for a in (A, B))


def test_a_topic_on_one_of_several_nsqds_down_names_them_all_as_a_guess() -> None:
    unseen = {"orders": UnseenTopic(holders=(A, B), channels=("billing",), guessed=True)}
    view = build_view(ClusterSnapshot(1.0, (UP, *DOWN), unseen_topics=unseen))
    seen = coverage(view)
    assert seen.complete is False
    assert seen.warnings("this sample")[-1] == (
        "topic orders: not seen this poll: no live copy (every nsqd holding it is down or "
        f"not answering: one of nsqd {A}, {B}): this sample may be incomplete"
    )
    marked = f"NOT SEEN (one of nsqd {A}, {B} down)"
    lines = [format_row("12:00:00", r) for r in stat_rows(view, None, None)]
    assert [line.split()[1] for line in lines] == ["orders", "orders/billing"]
    assert all(line.endswith(marked) for line in lines), lines
    [(_, row)] = rows.topic_rows(view)
    assert [str(c) for c in (row[1], row[2], row[-1])] == ["?", "?", marked]
    [topic] = view.topics
    assert rows.not_seen_summary(topic) == (
        f"topic orders · {marked} · its numbers are unknown until one of its nsqds answers"
        " · channels: billing"
    )


def test_a_topic_an_answering_nsqd_holds_is_not_kept_as_unseen() -> None:
    """The poller's sources can lag (nsqlookupd, a last poll): what an nsqd that answered
    shows wins."""
    held = TopicPartitionStats("orders", None, UP.address, 0, 0, 0, False, True)
    up = NodeStats(address=UP.address, fetched_at=1.0, state="up", topics=(held,))
    unseen = {"orders": UnseenTopic(holders=(A,))}
    view = build_view(ClusterSnapshot(1.0, (up, *DOWN), unseen_topics=unseen))
    [topic] = view.topics
    assert not topic.not_seen and coverage(view).unseen_topics == ()


def test_a_topic_nsqlookupd_lists_with_no_producer_reads_as_the_guess_it_is() -> None:
    """On the nsqds down, or a registration left behind: every view says both, and
    --json carries ``unregistered``."""
    unseen = {"left": UnseenTopic(holders=(A, B), guessed=True, unregistered=True)}
    view = build_view(ClusterSnapshot(1.0, (UP, *DOWN), unseen_topics=unseen))
    where = f"nsqlookupd lists it with no producer: on one of nsqd {A}, {B} (down), or left behind"
    assert coverage(view).warnings("this sample")[-1] == (
        f"topic left: not seen this poll: {where}: this sample may be incomplete"
    )
    [row] = stat_rows(view, None, None)
    assert (row["not_seen"], row["held_by"], row["unregistered"]) == (True, [A, B], True)
    assert format_row("12:00:00", row).endswith(f"NOT SEEN ({where})")
    [(_, cells)] = rows.topic_rows(view)
    assert str(cells[-1]) == f"NOT SEEN ({where})"
    [topic] = view.topics
    assert topic.severity == "warn"
