"""How fast each channel drains, over a window of polls: the time-to-drain rule and gauge.

The fall is measured from the first to the last poll of the last :data:`DRAIN_WINDOW`
seconds, not between two consecutive polls: a consumer that drains in bursts shows no
fall in a quiet interval, and a rate over one interval flips its channel between "never
drains" and "drains" from one poll to the next. Over a window longer than its pauses the
fall counts the bursts in it, so the verdict holds still. ``nsqctl check`` sees only its
own polls (``samples`` x ``interval``); the exporter's monitor keeps the whole window.
The arithmetic is :mod:`nsqctl.stats.rules`' (:func:`drain_rate`, :func:`time_to_drain`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nsqctl.stats.rules import drain_rate, time_to_drain
from nsqctl.stats.view import ClusterView

DRAIN_WINDOW = 60.0
"""Seconds of depth the drain estimate looks back over (as far as the polls reach)."""

ChannelKey = tuple[str, str]


@dataclass(frozen=True)
class DrainEstimate:
    """A channel's fall over ``seconds`` and ``polls``; ``rate`` None when it did not fall,
    ``time_to_drain`` None when it holds messages and does not drain (0 when empty)."""

    depth: int
    rate: float | None
    time_to_drain: float | None
    seconds: float
    polls: int

    @property
    def window(self) -> str:
        """What the estimate saw, for the finding that reports it."""
        return f"over the last {self.seconds:.1f}s ({self.polls} polls)"


def depth_points(
    views: Sequence[ClusterView], window: float = DRAIN_WINDOW
) -> dict[ChannelKey, list[tuple[float, int]]]:
    """Each channel's ``(taken_at, depth)`` in the polls of the last ``window`` seconds of
    ``views`` (oldest first), built once for every channel (one lookup per poll)."""
    points: dict[ChannelKey, list[tuple[float, int]]] = {}
    if not views:
        return points
    since = views[-1].taken_at - window
    for view in views:
        if view.taken_at < since:
            continue
        for topic in view.topics:
            for ch in topic.channels:
                points.setdefault((topic.name, ch.name), []).append((view.taken_at, ch.depth))
    return points


def estimate(points: Sequence[tuple[float, int]]) -> DrainEstimate | None:
    """The drain of one channel from its :func:`depth_points`; None before two polls."""
    if len(points) < 2:
        return None
    span = points[-1][0] - points[0][0]
    if span <= 0:
        return None
    depth = points[-1][1]
    fall = drain_rate([float(d) for _, d in points], span / (len(points) - 1))
    return DrainEstimate(depth, fall, time_to_drain(depth, fall), span, len(points))
