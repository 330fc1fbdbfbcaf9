"""Where an original topic no answering nsqd holds lives: the poller's decision, apart
from its requests (see :mod:`nsqctl.stats.poller` for the sources and their cost).

nsqlookupd answers ``/lookup`` with no producer for two different things: a topic on an
nsqd that was killed (it drops the nsqd's producers the moment its connection closes,
yet keeps the topic), and a registration it kept after the last producer left (a topic
created on nsqlookupd alone, deleted directly on its nsqd, or left by an nsqd
decommissioned long ago). Nothing nsqlookupd says tells them apart. Dropping such a topic
would hide a killed nsqd's topics from a first poll; putting it on the nsqds down as a
fact would make a false outage of every registration left behind. So it is put on the
nsqds down as what it is, a guess that may also be a leftover (``unregistered``), and
only while an nsqd is down: in a healthy cluster nothing can hold it, and it shows
nowhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from nsqctl.stats.model import UnseenTopic


def place_unseen(
    down: Sequence[str],
    remembered: Mapping[str, UnseenTopic],
    listed: Sequence[str],
    looked_up: Mapping[str, UnseenTopic],
) -> dict[str, UnseenTopic]:
    """The unseen topics and their holders.

    ``down``: the nsqds that did not answer. ``remembered``: the topics they held when
    they last answered (a fact: that nsqd named them). ``listed``: the topics
    nsqlookupd's ``/topics`` lists that no answering nsqd holds. ``looked_up``: each topic
    whose ``/lookup`` was answered, with the producers it named; ``unregistered`` when it
    named none, and neither when nsqlookupd no longer knows the topic (gone). A listed
    topic missing from it could not be asked, so it is on one of ``down`` (a guess when
    there are several).
    """
    placed: dict[str, UnseenTopic] = {}
    if not down:
        return placed
    for topic in dict.fromkeys([*remembered, *listed]):
        answer = looked_up.get(topic)
        sources = [s for s in (remembered.get(topic), answer) if s is not None]
        holders = tuple(dict.fromkeys(h for s in sources for h in s.holders))
        channels = tuple(dict.fromkeys(c for s in sources for c in s.channels))
        if holders:
            placed[topic] = UnseenTopic(holders, channels)
        elif answer is None:
            placed[topic] = UnseenTopic(tuple(down), channels, len(down) > 1)
        elif answer.unregistered:
            placed[topic] = UnseenTopic(tuple(down), channels, guessed=True, unregistered=True)
        # else nsqlookupd no longer knows the topic: it is gone
    return placed
