"""Where an original topic no answering nsqd holds lives: the poller's decision, apart
from its requests (see :mod:`nsqctl.stats.poller` for the sources and their cost).

nsqlookupd keeps a topic's registration after its last producer leaves: a topic created
on nsqlookupd alone, deleted directly on its nsqd, or left by an nsqd decommissioned long
ago stays in ``/topics``, and ``/lookup`` answers it with no producer. Such a topic is on
no nsqd, so it is never put on the nsqds that did not answer: with one of them down, that
guess would be a false outage for every registration left behind. A killed nsqd's topics
read the same (nsqlookupd drops its producers the moment its connection closes), so only
the last answer of that nsqd can still name them; its own down state, which every view
and the node-down rule report, says the rest.
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
    they last answered. ``listed``: the topics nsqlookupd's ``/topics`` lists that no
    answering nsqd holds. ``looked_up``: each topic whose ``/lookup`` was answered, with
    the producers it named (none: nobody holds it); a listed topic missing from it could
    not be asked, so it is on one of ``down`` (a guess when there are several).
    """
    placed: dict[str, UnseenTopic] = {}
    for topic in dict.fromkeys([*remembered, *listed]):
        sources = [s for s in (remembered.get(topic), looked_up.get(topic)) if s is not None]
        holders = tuple(dict.fromkeys(h for s in sources for h in s.holders))
        channels = tuple(dict.fromkeys(c for s in sources for c in s.channels))
        if holders:
            placed[topic] = UnseenTopic(holders, channels)
        elif topic not in looked_up:
            placed[topic] = UnseenTopic(tuple(down), channels, len(down) > 1)
        # else nsqlookupd answered that no nsqd holds it: a registration left behind
    return placed
