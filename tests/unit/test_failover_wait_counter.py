"""The "waiting for a leader (Ns of 180s)" counter of a publish counts up: it is the
topic/partition's wait, not the wait of whichever publish in flight happens to report."""

from __future__ import annotations

from nsqctl.producer.retry_clock import FailoverNotes


def test_a_later_publish_does_not_turn_the_counter_back() -> None:
    notes = FailoverNotes(window=180, interval=5)
    first = notes.waiting("ha", 0, 10.0, "refused", now=110.0)  # failing since 100
    # a batch sent at 113 fails too; at 116 it is the one whose turn it is to report
    later = notes.waiting("ha", 0, 3.0, "refused", now=116.0)
    assert first is not None and later is not None
    assert first.waited == 10.0 and later.waited == 16.0
    assert later.describe().startswith("waiting for a leader for ha/0 (16s of 180s)")


def test_a_new_wait_after_a_resumption_counts_from_its_own_start() -> None:
    notes = FailoverNotes(window=180, interval=5)
    notes.waiting("ha", 0, 10.0, "refused", now=110.0)
    assert notes.resumed("ha", 0, 12.0, "127.0.0.1:4150") is not None
    again = notes.waiting("ha", 0, 1.0, "refused", now=300.0)
    assert again is not None and again.waited == 1.0


def test_a_wait_after_one_that_gave_up_counts_from_its_own_start() -> None:
    """Publishes that gave up report no resumption; their start is not the next wait's."""
    notes = FailoverNotes(window=30, interval=5)
    notes.waiting("ha", 0, 29.0, "refused", now=129.0)  # then gave up at 130
    again = notes.waiting("ha", 0, 2.0, "refused", now=500.0)
    assert again is not None and again.waited == 2.0
