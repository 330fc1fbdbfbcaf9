"""Where the poller puts an original topic no answering nsqd holds, from what its sources
answered (the decision alone: the real servers' cells are in
tests/integration/test_degraded_views_original.py)."""

from __future__ import annotations

from nsqctl.stats.model import UnseenTopic
from nsqctl.stats.unseen import place_unseen

A, B, C = "127.0.0.1:4251", "127.0.0.1:4351", "127.0.0.1:4451"


def test_a_topic_nsqlookupd_answers_with_no_producer_is_on_no_nsqd() -> None:
    """A registration nsqlookupd kept after its last producer left (created on nsqlookupd
    alone, deleted on its nsqd): never put on the nsqd that is down."""
    nobody = {"left": UnseenTopic(), "forgotten": UnseenTopic(channels=("c",))}
    assert place_unseen([B], {}, ["left", "forgotten"], nobody) == {}
    assert place_unseen([B, C], {}, ["left"], nobody) == {}


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
    # what the nsqd down listed when it last answered stands without nsqlookupd
    assert place_unseen([B], remembered, [], {}) == remembered
