"""nsqctl.tui.events: what the dashboard says when a partition's leader, ISR or catch-up changes
between polls (pure; the live move is in tests/integration/test_dash_redesign_move.py)."""

from __future__ import annotations

from rich.text import Text

from nsqctl.stats.view import ClusterView, PartitionView, TopicView
from nsqctl.tui import rows
from nsqctl.tui.events import HIGHLIGHT_SECONDS, PartitionTracker

A, B, C = "127.0.0.1:4151", "127.0.0.1:4251", "127.0.0.1:4351"


def view(
    at: float,
    leader: str | None,
    isr: tuple[str, ...] | None,
    catchup: tuple[str, ...] | None = (),
    counts: dict[str, int] | None = None,
) -> ClusterView:
    part = PartitionView(
        topic="t",
        partition=0,
        leader=leader,
        replicas=(),
        isr=isr,
        catchup=catchup,
        write_enabled=leader is not None,
        depth=0,
        stored_bytes=0,
        messages=100,
        rate=None,
        paused=False,
        channels=(),
        holder_messages=tuple((counts or {}).items()),
    )
    topic = TopicView(
        name="t",
        partitions=(part,),
        channels=(),
        depth=0,
        messages=100,
        rate=None,
        ordered=False,
        ext=False,
        paused=False,
        is_redesign=True,
        depth_growing=False,
        severity="ok",
    )
    return ClusterView(at, (), (), (topic,), None, True)


def test_a_leader_move_is_told_step_by_step() -> None:
    watch = PartitionTracker()
    assert watch.observe(view(0, A, (A, B))) == []  # the baseline
    steps = [
        view(1, A, (A, B), (C,), {A: 100, C: 40}),
        view(2, A, (A, B, C)),
        view(3, None, (A, B, C)),
        view(4, C, (B, C)),
    ]
    said = [[e.text for e in watch.observe(v)] for v in steps]
    assert said == [
        [f"{C} catching up"],
        [f"{C} joined the ISR (3 in sync)"],
        [f"no writable leader (was {A})"],
        [f"leader {A} → {C}", f"ISR lost {A} (2 in sync)"],
    ]
    assert watch.leader_changed("t", 0, 4) and watch.isr_shrunk("t", 0, 4)
    assert not watch.leader_changed("t", 0, 4 + HIGHLIGHT_SECONDS + 1)
    assert [e.kind for e in watch.recent("t", 2)] == ["leader", "isr-left"]
    assert watch.recent("other") == []


def test_rows_mark_the_new_leader_the_shrunk_isr_and_catch_up_progress() -> None:
    watch = PartitionTracker()
    watch.observe(view(0, A, (A, B)))
    catching = view(1, A, (A, B), (C,), {A: 20_000, C: 12_500})
    watch.observe(catching)
    row = rows.partition_rows(catching.topics[0], watch, 1)[0][1]
    assert str(row[4]) == f"{C} 12.5k/20.0k"  # catch-up cell: how far it has come
    moved = view(2, C, (B, C))
    watch.observe(moved)
    row = rows.partition_rows(moved.topics[0], watch, 2)[0][1]
    leader, isr = row[1], row[3]
    assert isinstance(leader, Text) and str(leader) == C and "reverse" in str(leader.style)
    assert isinstance(isr, Text) and "reverse" in str(isr.style)
    later = rows.partition_rows(moved.topics[0], watch, 2 + HIGHLIGHT_SECONDS + 1)[0][1]
    assert later[1] == C  # no longer marked
    lines = rows.event_lines(watch.recent("t")).plain.splitlines()
    assert [line[9:] for line in lines[-3:]] == [  # after the HH:MM:SS stamp
        f"t partition 0: leader {A} → {C}",
        f"t partition 0: ISR lost {A} (2 in sync)",
        f"t partition 0: {C} joined the ISR (2 in sync)",
    ]
