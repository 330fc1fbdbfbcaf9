"""Where the poller puts an original topic no answering nsqd holds, from what its sources
answered (the decision alone: the real servers' cells are in
tests/integration/test_degraded_views_original.py)."""

from __future__ import annotations

from nsqctl.stats.model import UnseenTopic
from nsqctl.stats.unseen import place_unseen

A, B, C = "127.0.0.1:4251", "127.0.0.1:4351", "127.0.0.1:4451"


def test_a_topic_nsqlookupd_lists_with_no_producer_is_a_guess_on_the_nsqds_down() -> None:
    """A killed nsqd's topic (nsqlookupd dropped its producers) and a registration
    nsqlookupd kept after its last producer left read the same: put on the nsqds down,
    marked as the guess it is, never dropped (a first poll would hide the killed nsqd's
    topics) nor put there as a fact."""
    nobody = {
        "left": UnseenTopic(unregistered=True),
        "forgotten": UnseenTopic(channels=("c",), unregistered=True),
    }
    assert place_unseen([B], {}, ["left", "forgotten"], nobody) == {
        "left": UnseenTopic((B,), guessed=True, unregistered=True),
        "forgotten": UnseenTopic((B,), ("c",), guessed=True, unregistered=True),
    }
    assert place_unseen([B, C], {}, ["left"], nobody) == {
        "left": UnseenTopic((B, C), guessed=True, unregistered=True)
    }
    # with no nsqd down nothing can hold it: a healthy cluster shows a leftover nowhere
    assert place_unseen([], {}, ["left"], nobody) == {}
    # a topic nsqlookupd no longer knows (deleted between /topics and /lookup) is gone
    assert place_unseen([B], {}, ["gone"], {"gone": UnseenTopic()}) == {}


def test_a_topic_whose_lookup_was_not_answered_is_on_the_nsqds_down() -> None:
    assert place_unseen([B], {}, ["t"], {}) == {"t": UnseenTopic((B,))}
    assert place_unseen([B, C], {}, ["t"], {}) == {"t": UnseenTopic((B, C), guessed=True)}


def test_the_holders_named_are_the_holders() -> None:
    remembered = {"kept": UnseenTopic((B,), ("c",))}
    looked_up = {"hung": UnseenTopic((C,), ("d",)), "kept": UnseenTopic((), ("e",))}
    assert place_unseen([B, C], remembered, ["hung", "kept"], looked_up) == {
        "kept": UnseenTopic((B,), ("c", "e")),
        "hung": UnseenTopic((C,), ("d",)),
    }
    # what the nsqd down listed when it last answered stands without nsqlookupd, and
    # over nsqlookupd's empty answer: that nsqd named it, so it is no guess
    assert place_unseen([B], remembered, [], {}) == remembered
    empty = {"kept": UnseenTopic((), ("e",), unregistered=True)}
    assert place_unseen([B, C], remembered, ["kept"], empty) == {
        "kept": UnseenTopic((B,), ("c", "e"))
    }
