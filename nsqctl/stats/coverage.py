"""What a view could not see: nsqds that did not answer, partitions (redesign) and topics
(original) no answering nsqd holds, lookupds down, and lookupds that cannot reach etcd
(their topology may be old).

A redesign lookupd's "cluster not stable" is not among them: it also reads unstable for
a minute after any topic is created or a node joins (until its next full topic check), so
it would cry wolf on every healthy new cluster; the dashboard shows it as it is.

One-shot views (``topic list``, ``channel list``, ``lookup``) read the cluster once; when
part of it is down, an empty or short answer is not the truth, and these say so instead of
reporting emptiness (or advising to create what exists). The words are the same in every
view: :meth:`Coverage.warnings`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nsqctl.stats.poller import DEFAULT_TIMEOUT, StatsPoller
from nsqctl.stats.view import ClusterView, build_view

#: What nsqlookupd says of a topic on a killed nsqd and of a registration left behind
#: alike (see :class:`nsqctl.stats.model.UnseenTopic`): every view's words for the guess.
UNREGISTERED = "nsqlookupd lists it with no producer"


def not_seen_words(
    held_by: Sequence[str], guessed: bool = False, unregistered: bool = False
) -> str:
    """How a row marks a topic (or channel) no answering nsqd holds, naming its nsqds."""
    return f"NOT SEEN ({unseen_where(held_by, guessed, unregistered)})"


def holders_words(held_by: Sequence[str], guessed: bool = False) -> str:
    """The nsqds holding a topic no answering nsqd holds: ``nsqd A, B``, or ``one of nsqd
    A, B`` when they are only the nsqds that did not answer (see ``guessed``)."""
    return ("one of " if guessed and len(held_by) > 1 else "") + "nsqd " + ", ".join(held_by)


def unseen_where(held_by: Sequence[str], guessed: bool = False, unregistered: bool = False) -> str:
    """Where a topic no answering nsqd holds is: ``nsqd B down``; for one nsqlookupd lists
    with no producer (see :class:`nsqctl.stats.model.UnseenTopic`), both things that may
    be, since nothing tells them apart."""
    holders = holders_words(held_by, guessed)
    return guessed_where(holders) if unregistered else f"{holders} down"


def guessed_where(holders: str) -> str:
    """Where a topic nsqlookupd lists with no producer may be, ``holders`` in words (the
    nsqds down, or "an nsqd" where several topics are counted together)."""
    return f"{UNREGISTERED}: on {holders} (down), or left behind"


def leader_silent_words(leader: str) -> str:
    """A partition whose leader nsqlookupd lists does not answer (hung, or gone since
    nsqlookupd last heard of it): not "no live copy", which that copy may still be."""
    return f"its leader {leader} does not answer"


@dataclass(frozen=True)
class Coverage:
    """The blind spots of one view."""

    nsqds: int
    """nsqds known (configured, or listed by a lookupd)."""
    not_answering: tuple[tuple[str, str], ...] = ()
    """``(nsqd, why)`` for each known nsqd that did not answer ``/stats``."""
    unseen: tuple[tuple[str, int], ...] = ()
    """``(topic, partition)`` the meta counts that no answering nsqd holds."""
    unseen_topics: tuple[tuple[str, tuple[str, ...], bool, bool], ...] = ()
    """``(topic, holders, guessed, unregistered)`` for each original topic no answering
    nsqd holds (see :attr:`nsqctl.stats.view.TopicView.held_by`)."""
    lookupds_down: tuple[str, ...] = ()
    lookupds_without_etcd: tuple[tuple[str, str], ...] = ()
    """``(lookupd, why)`` for each redesign lookupd that answers but cannot reach etcd."""
    lookupds_asked: int = 0

    @property
    def complete(self) -> bool:
        return not (
            self.not_answering
            or self.unseen
            or self.unseen_topics
            or self.lookupds_down
            or self.lookupds_without_etcd
        )

    @property
    def searched(self) -> str:
        """Where a view that found nothing looked: "any nsqd" only when it saw them all,
        so that an empty answer is not taken for the truth about nsqds it could not ask."""
        return "any nsqd" if self.complete else "the nsqds that answered"

    def warnings(self, what: str) -> list[str]:
        """One line per blind spot, each saying ``what`` may be incomplete."""
        return [*self.nsqd_warnings(what), *self.lookupd_warnings(what)]

    def lookupd_warnings(self, what: str) -> list[str]:
        """The lines about the nsqlookupds: those down, those that cannot reach etcd."""
        out = []
        if self.lookupds_down:
            every = len(self.lookupds_down) == self.lookupds_asked
            source = "only the nsqds were asked" if every else "the other nsqlookupds were asked"
            out.append(
                f"nsqlookupd {', '.join(self.lookupds_down)} not answering: {source}; "
                f"{what} may be incomplete"
            )
        for address, why in self.lookupds_without_etcd:
            out.append(
                f"nsqlookupd {address} cannot reach etcd ({why}): it serves the topology "
                "it last knew; no partition can get a new leader, and no topic can be "
                f"created or deleted, until etcd answers; {what} may be out of date"
            )
        return out

    def nsqd_warnings(self, what: str) -> list[str]:
        """The lines about nsqds not answering and partitions without a live copy."""
        return [*self.not_answering_warnings(what), *self.unseen_warnings(what)]

    def not_answering_warnings(self, what: str) -> list[str]:
        """The line about nsqds not answering, if any."""
        if not self.not_answering:
            return []
        names = "; ".join(f"{a}: {why}" for a, why in self.not_answering)
        return [
            f"{len(self.not_answering)} of {self.nsqds} nsqd not answering ({names}): "
            f"{what} may be incomplete"
        ]

    def absent_topic_warnings(self, what: str) -> list[str]:
        """Why a topic nobody that answered knows may still exist: only what could hide
        it (an nsqd not answering, an nsqlookupd down or cut off from etcd). Another
        topic's partition without a live copy cannot: nsqlookupd would still list the
        topic asked for (the redesign's meta is in etcd, and the original keeps a topic
        listed after its nsqd is gone), so naming it would be about what was not asked."""
        return [*self.not_answering_warnings(what), *self.lookupd_warnings(what)]

    def unseen_warnings(self, what: str) -> list[str]:
        """The lines about partitions (redesign) and topics (original) without a live
        copy: what a view that names the nsqds down elsewhere still has to say."""
        out = []
        by_topic: dict[str, list[int]] = {}
        for topic, partition in self.unseen:
            by_topic.setdefault(topic, []).append(partition)
        for topic, parts in by_topic.items():
            listed = ("partition " if len(parts) == 1 else "partitions ") + ", ".join(
                str(p) for p in parts
            )
            out.append(
                f"topic {topic} {listed}: no leader and no live copy (every nsqd "
                f"holding it is down or not answering): {what} may be incomplete"
            )
        for topic, holders, guessed, unregistered in self.unseen_topics:
            where = (
                unseen_where(holders, guessed, unregistered)
                if unregistered
                else "no live copy (every nsqd holding it is down or not answering: "
                f"{holders_words(holders, guessed)})"
            )
            out.append(f"topic {topic}: not seen this poll: {where}: {what} may be incomplete")
        return out


def coverage(view: ClusterView, topic: str | None = None) -> Coverage:
    """The blind spots of ``view`` (of ``topic``'s partitions only, when given)."""
    down = tuple(
        (n.address, n.stats.error or "down") for n in view.nodes if n.stats.state == "down"
    )
    unseen = tuple(
        (t.name, p.partition)
        for t in view.topics
        if topic is None or t.name == topic
        for p in t.partitions
        if not p.live and p.partition is not None
    )
    return Coverage(
        nsqds=len(view.nodes),
        not_answering=down,
        unseen=unseen,
        unseen_topics=tuple(
            (t.name, t.held_by, t.held_by_guessed, t.unregistered)
            for t in view.topics
            if t.not_seen and (topic is None or t.name == topic)
        ),
        lookupds_down=tuple(lk.address for lk in view.lookupds if not lk.ok),
        lookupds_without_etcd=tuple(
            (lk.address, lk.etcd_error) for lk in view.lookupds if lk.etcd_error
        ),
        lookupds_asked=len(view.lookupds),
    )


async def not_seen_warnings(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> list[str]:
    """Why a topic nobody that answered knows may still exist (see
    :meth:`Coverage.absent_topic_warnings`), [] when nothing could hide it. Asked only on
    the way to a "not found", so a view never advises creating a topic that lives on
    nsqds it could not see."""
    view = await look_once(lookupd_http, nsqd_http, timeout=timeout)
    return coverage(view).absent_topic_warnings("what was seen")


async def look_once(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    *,
    topic: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> ClusterView:
    """One poll of the cluster (of ``topic`` only, when given), without client connections:
    what a one-shot view checks its answer against. An nsqd that does not answer within
    ``timeout`` (a hung one too) is down for it, so the view is bounded in time."""
    async with StatsPoller(
        lookupd_http,
        nsqd_http,
        topic=topic,
        focus=[topic] if topic else (),
        clients=(),
        timeout=timeout,
    ) as poller:
        return build_view(await poller.snapshot())
