"""When ``nsqctl tail`` stops by itself: ``--until-empty`` (kcat ``-e``) and ``--until TIME``.

"Caught up" is read from nsqd, not guessed from a quiet moment: a message nsqd has sent
to tail stays in its channel's in-flight count until tail's FIN arrives, so when every
partition's copy of the channel shows no depth, nothing in flight and nothing deferred,
and tail itself holds nothing unprinted, no message published before that ``/stats``
read can still be on its way. The numbers come from the one ``/stats`` reader
(:class:`~nsqctl.stats.poller.StatsPoller`) through the stats view, so tail counts depth
as ``nsqctl stat`` and the dashboard do (the original family's topic-level depth
included). A check that cannot see every copy (an nsqd down, a partition without a
leader, the channel not yet on a partition) is "not yet", never "empty".
"""

from __future__ import annotations

import sys
import time
from collections.abc import Collection
from typing import TYPE_CHECKING

from nsqctl.errors import TransportError
from nsqctl.message import Message

if TYPE_CHECKING:  # the stats stack (httpx, msgspec) loads only when a check is made
    from nsqctl.stats.view import ClusterView, PartitionView

__all__ = ["CaughtUpCheck", "UnansweredWait", "UntilTime", "caught_up"]


class UntilTime:
    """``--until``: per partition, the first message published after ``until_ns`` ends that
    partition. It and every later message of the partition are held, unanswered, and
    given back once when tail stops (never FINed: tail did not print them).

    A plain class, not a dataclass: Python 3.11 compiles a dataclass's methods as its
    module loads, and tail loads this module with or without ``--until``."""

    __slots__ = ("held", "reached", "until_ns")

    def __init__(self, until_ns: int) -> None:
        self.until_ns = until_ns
        self.reached: set[int | None] = set()
        self.held: list[Message] = []

    def holds(self, msg: Message) -> bool:
        """True when ``msg`` is past the end of its partition (and is now held)."""
        part = msg.partition
        if part in self.reached or msg.timestamp > self.until_ns:
            self.reached.add(part)
            self.held.append(msg)
            return True
        return False

    def past(self) -> bool:
        """The wall clock is past the end: a partition that is caught up has reached it."""
        return time.time_ns() > self.until_ns

    def give_back(self) -> None:
        """REQ every held message once (call after RDY 0, or nsqd resends them at once)."""
        for msg in self.held:
            if not msg.has_responded:
                msg.requeue(delay=0, backoff=False)
        self.held.clear()


def _drained(part: PartitionView, channel: str) -> bool:
    ch = next((c for c in part.channels if c.name == channel), None)
    if ch is None:
        # Not subscribed there (yet): caught up only if that copy holds nothing at all (a
        # redesign partition with an empty log refuses a start position until it has one).
        if part.stored_bytes is not None:
            return part.stored_bytes == 0
        return part.depth == 0
    return part.depth == 0 and ch.in_flight_count == 0 and ch.deferred_count == 0


def caught_up(
    view: ClusterView,
    topic: str,
    channel: str,
    partitions: Collection[int] | None = None,
    done: Collection[int | None] = (),
    only_done: bool = False,
    ignore_down: bool = False,
) -> bool:
    """Every copy of ``topic``/``channel`` (only ``partitions`` when given) is in ``done``
    or has nothing left to deliver, as far as ``view`` can tell; with ``only_done`` every
    copy must be in ``done``. An nsqd that did not answer makes it False, unless
    ``ignore_down`` (then: every copy that can be seen)."""
    if not ignore_down and unanswered(view):
        return False
    found = view.topic(topic)
    if found is None:
        return False
    for part in found.partitions:
        if partitions is not None and part.partition not in partitions:
            continue
        if part.partition is not None and part.partition in done:
            continue
        if only_done:
            return False
        if found.is_redesign and part.leader is None:
            return False
        if not _drained(part, channel):
            return False
    return True


def unanswered(view: ClusterView) -> tuple[str, ...]:
    """The nsqd addresses that did not answer ``/stats`` (with why, when known)."""
    return tuple(
        f"{node.address} ({node.stats.error})" if node.stats.error else node.address
        for node in view.nodes
        if node.stats.state == "down"
    )


class UnansweredWait:
    """How long tail waits, once everything it can see is caught up, for nsqds that do not
    answer ``/stats``: ``window`` seconds, then it stops with an error naming them (None:
    for ever, saying once on stderr what it waits for)."""

    def __init__(self, window: float | None) -> None:
        self.window = window
        self._since: float | None = None

    def update(self, down: tuple[str, ...], now: float) -> None:
        if not down:
            self._since = None
            return
        if self._since is None:
            self._since = now
            if self.window is None:
                print(
                    f"nsqctl tail: everything else is caught up; waiting for nsqd "
                    f"{', '.join(down)} to answer /stats",
                    file=sys.stderr,
                    flush=True,
                )
            return
        if self.window is not None and now - self._since >= self.window:
            # a TransportError: an nsqd that does not answer is the library's kind for it
            raise TransportError(
                f"nsqd {', '.join(down)} did not answer /stats for {self.window:g}s, so "
                "tail cannot tell whether the channel is caught up there; everything "
                "received was printed and acknowledged",
                setting="connect_timeout",
            )


class CaughtUpCheck:
    """Reads the channel's numbers from every nsqd (lookupd or ``nsqd_http`` addresses)."""

    def __init__(
        self,
        lookupd_http: list[str],
        nsqd_http: list[str],
        topic: str,
        channel: str,
        partitions: Collection[int] | None,
    ) -> None:
        self.topic = topic
        self.channel = channel
        self.partitions = partitions
        from nsqctl.stats.poller import StatsPoller

        self._poller = StatsPoller(lookupd_http, nsqd_http, topic=topic, channel=channel)
        # The nsqds that did not answer the last check when every other copy was caught
        # up: all that stands between tail and its end.
        self.unanswered: tuple[str, ...] = ()

    async def caught_up(self, done: Collection[int | None] = (), only_done: bool = False) -> bool:
        from nsqctl.stats.view import build_view

        view = build_view(await self._poller.snapshot())
        down = unanswered(view)
        rest = caught_up(
            view, self.topic, self.channel, self.partitions, done, only_done, ignore_down=True
        )
        self.unanswered = down if rest else ()
        return rest and not down

    async def aclose(self) -> None:
        await self._poller.aclose()
