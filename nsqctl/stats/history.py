"""A rolling window of depth and rate per topic and channel, for the trend columns and the
history view of the dashboard (and anything else polling a :class:`StatsSession`).

Every series is sampled at the session's polls, so one ring of poll times serves them all:
a key recorded in some poll is given a sample in every later poll, ``None`` when it has
no value then. ``None`` is a gap, never a zero: a poll that failed, a node that did not
answer holding a copy of the topic, a rate unknown for want of a previous poll or because
a counter went back (an nsqd restarted: :func:`nsqctl.stats.rules.rate` gives no rate
then, so no negative rate is ever recorded).

Memory is bounded: each ring keeps the last ``length`` samples (a fixed window at a
fixed poll interval), and a key whose samples are all gaps (a topic deleted a window
ago) is forgotten.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from functools import partial
from operator import is_not

from nsqctl.stats.model import NodeStats

_not_none = partial(is_not, None)

DEFAULT_LENGTH = 300
"""Samples kept per key: ten minutes at the dashboard's default poll every 2 s."""


@dataclass(frozen=True, slots=True)
class Series:
    """One quantity at the poll times ``times`` (oldest first); ``None`` is a gap."""

    times: tuple[float, ...]
    values: tuple[float | None, ...]
    unit: str

    def known(self) -> tuple[float, ...]:
        """The samples that are not gaps, oldest first (filtered in C: every topic and
        channel of a big cluster asks this of its window every poll)."""
        return tuple(filter(_not_none, self.values))  # type: ignore[arg-type]

    @property
    def span(self) -> tuple[float, float] | None:
        """``(min, max)`` of the known samples; None when every one is a gap."""
        known = self.known()
        return (min(known), max(known)) if known else None

    @property
    def seconds(self) -> float:
        """How long the series covers, first to last sample."""
        return self.times[-1] - self.times[0] if len(self.times) > 1 else 0.0

    @property
    def last(self) -> float | None:
        return self.values[-1] if self.values else None

    def tail(self, count: int) -> Series:
        """The last ``count`` samples."""
        if count >= len(self.values):
            return self
        start = len(self.values) - count
        return Series(self.times[start:], self.values[start:], self.unit)


EMPTY_DEPTH = Series((), (), "msgs")
EMPTY_RATE = Series((), (), "msg/s")


class History:
    """The rings of one session. One poll is :meth:`begin`, :meth:`record` per key, then
    :meth:`end`; :meth:`gap` stands for a poll that brought nothing."""

    def __init__(self, length: int = DEFAULT_LENGTH) -> None:
        if length < 1:  # one is a check's single poll
            raise ValueError(f"a history keeps at least 1 sample, got {length}")
        self.length = length
        self._times: deque[float] = deque(maxlen=length)
        self._now: tuple[float, ...] = ()  # the poll times as a tuple, made once a poll
        self._rings: dict[Hashable, deque[float | None]] = {}
        self._recorded: set[Hashable] = set()
        self.led: dict[str, frozenset[str]] = {}
        """The topics each nsqd led a copy of when it last answered: a node that stops
        answering leaves a gap in those topics, not a dip."""

    def begin(self, taken_at: float) -> None:
        if self._times and taken_at <= self._times[-1]:
            taken_at = self._times[-1] + 1e-6  # times stay increasing (a clock step back)
        self._times.append(taken_at)
        self._now = tuple(self._times)
        self._recorded = set()

    def record(self, key: Hashable, value: float | None, unit: str) -> Series:
        """``value`` as this poll's sample of ``key`` (None: a gap); the key's series."""
        ring = self._rings.get(key)
        if ring is None:
            ring = self._rings[key] = deque(maxlen=self.length)
        ring.append(value)
        self._recorded.add(key)
        return self._series(ring, unit)

    def _series(self, ring: deque[float | None], unit: str) -> Series:
        # every ring ends at the newest poll
        return Series(self._now[len(self._now) - len(ring) :], tuple(ring), unit)

    def end(self) -> None:
        """Gaps for the keys not recorded in this poll; a key left with gaps only goes."""
        for key in [k for k in self._rings if k not in self._recorded]:
            ring = self._rings[key]
            ring.append(None)
            if ring.count(None) == len(ring):
                del self._rings[key]

    def gap(self, taken_at: float) -> None:
        """A poll that brought nothing (it failed): a gap in every series."""
        self.begin(taken_at)
        self.end()

    def series(self, key: Hashable, unit: str) -> Series:
        """``key``'s series as of the last poll (empty when unknown)."""
        ring = self._rings.get(key)
        return Series((), (), unit) if ring is None else self._series(ring, unit)

    def unanswered(self, nodes: Iterable[NodeStats]) -> set[str]:
        """The topics led (when they last answered) by the nodes of this poll that did
        not answer; the topics the others lead are noted for a later poll."""
        out: set[str] = set()
        for node in nodes:
            if node.state == "down":
                out.update(self.led.get(node.address, ()))
            else:
                self.led[node.address] = frozenset([t.topic for t in node.topics if t.is_leader])
        return out

    def __len__(self) -> int:
        return len(self._rings)
