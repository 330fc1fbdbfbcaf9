"""``pub``'s account of which input lines were published (:mod:`nsqctl.cli.commands.pub_lines`)."""

from __future__ import annotations

from nsqctl.cli.commands.pub_input import Batch
from nsqctl.cli.commands.pub_lines import SHOWN_SPANS, LineLedger, spans_of


def test_spans_follow_the_input_numbering_across_blank_lines() -> None:
    assert spans_of(Batch([b"a", b"b"], 5)) == [(5, 6)]
    assert spans_of(Batch([b"a", b"b", b"c"], 1, [1, 2, 4])) == [(1, 2), (4, 4)]
    assert spans_of(Batch([])) == []


def test_published_is_what_was_launched_less_what_was_not_confirmed() -> None:
    ledger = LineLedger()
    for spans in ([(1, 200)], [(201, 300)], [(301, 305)]):
        ledger.launched(spans)
    ledger.not_confirmed([(201, 300)])
    assert ledger.published() == [(1, 200), (301, 305)]
    assert ledger.describe(stopped=True) == (
        "input line(s) 1-200, 301-305 were published; line(s) 201-300 were sent but not "
        "confirmed; nothing after line 305 was sent"
    )


def test_nothing_launched_says_so() -> None:
    assert LineLedger().describe(stopped=True) == "no input line was published; nothing was sent"


def test_a_long_account_stays_one_short_line() -> None:
    ledger = LineLedger()
    ledger.launched([(1, 1000)])
    ledger.not_confirmed([(n, n) for n in range(10, 1000, 10)])
    text = ledger.describe(stopped=False)
    assert "\n" not in text and "more span(s)" in text and len(text) < 300
    assert text.count(",") <= 2 * SHOWN_SPANS + 2


def test_skipped_lines_are_neither_published_nor_unconfirmed() -> None:
    ledger = LineLedger()
    ledger.launched([(1, 5)])
    ledger.not_confirmed([(3, 3)])
    ledger.skipped(3)  # nsqd refused it, and skipping was asked for
    assert ledger.published() == [(1, 2), (4, 5)]
    assert ledger.describe(stopped=False) == (
        "input line(s) 1-2, 4-5 were published; line(s) 3 were skipped"
    )


def test_lines_refused_before_sending_are_not_said_to_be_sent() -> None:
    ledger = LineLedger()
    ledger.launched([(1, 200)])
    ledger.not_sent([(1, 200)])  # the library refused the batch before writing it
    assert ledger.published() == []
    assert ledger.describe(stopped=True) == "no input line was published; nothing was sent"


def test_an_unsent_batch_between_sent_ones_is_named() -> None:
    ledger = LineLedger()
    for spans in ([(1, 10)], [(11, 20)], [(21, 30)], [(31, 40)]):
        ledger.launched(spans)
    ledger.not_sent([(11, 20)])
    ledger.not_confirmed([(21, 30)])
    ledger.not_sent([(31, 40)])
    assert ledger.published() == [(1, 10)]
    assert ledger.describe(stopped=True) == (
        "input line(s) 1-10 were published; line(s) 21-30 were sent but not confirmed; "
        "line(s) 11-20 were not sent (no nsqd got them); nothing after line 30 was sent"
    )


def test_lines_that_reached_no_nsqd_are_said_not_sent() -> None:
    """A publish that failed before writing (no lookup, no leader, no connection) cannot
    have stored its lines: "sent but not confirmed" would have the operator fear copies."""
    ledger = LineLedger()
    ledger.launched([(1, 10)])
    ledger.launched([(11, 20)])
    ledger.not_confirmed([(1, 10)])
    ledger.not_sent([(11, 20)])
    assert ledger.published() == []
    assert ledger.describe(stopped=True) == (
        "no input line was published; line(s) 1-10 were sent but not confirmed; "
        "nothing after line 10 was sent"
    )


def test_a_line_nsqd_refused_is_said_refused_and_not_stored_or_skipped_when_asked() -> None:
    """A message nsqd refused whole was not stored: "sent but not confirmed" would have
    the operator fear a copy. Skipped as asked, it is said skipped only."""
    ledger = LineLedger()
    ledger.launched([(1, 5)])
    ledger.refused_by_nsqd([(3, 3)])
    ledger.not_sent([(4, 5)])
    assert ledger.published() == [(1, 2)]
    assert ledger.describe(stopped=True) == (
        "input line(s) 1-2 were published; line(s) 3 were refused by nsqd (not stored); "
        "nothing after line 3 was sent"
    )
    ledger = LineLedger()
    ledger.launched([(1, 5)])
    ledger.refused_by_nsqd([(3, 3)])
    ledger.skipped(3)
    assert ledger.describe(stopped=False) == (
        "input line(s) 1-2, 4-5 were published; line(s) 3 were skipped"
    )


def test_json_lists_every_line_by_what_became_of_it() -> None:
    """After a keyed publish that failed part-way the published lines are no prefix of
    the input, and the error line shows the first few spans only: --json gives them all,
    so a script can publish again exactly what was not."""
    ledger = LineLedger()
    for first in range(1, 100, 10):
        ledger.launched([(first, first + 9)])
    ledger.not_confirmed([(n, n) for n in range(3, 100, 10)])  # one in each batch
    ledger.refused_by_nsqd([(95, 95)])
    ledger.not_sent([(96, 100)])
    assert "more span(s) (--json lists them all)" in ledger.describe(stopped=True)
    lines = ledger.to_json()
    assert lines["unconfirmed"] == [[n, n] for n in range(3, 100, 10)]
    assert lines["refused"] == [[95, 95]] and lines["unsent"] == [[96, 100]]
    assert lines["published"][:2] == [[1, 2], [4, 12]] and lines["published"][-1] == [94, 94]
    assert lines["sent_up_to"] == 95
