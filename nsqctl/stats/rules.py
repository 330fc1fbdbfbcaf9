"""The operator rules: rates between polls, starved/stalled consumers, severity.

Pure and tiny so the dashboard, ``nsqctl stat`` and the tests agree on one definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Literal

Severity = Literal["ok", "warn", "crit"]

STARVED_RATIO = 0.85
"""A client is starved when in-flight reaches this share of its RDY: it cannot take more."""

GROWING_SAMPLES = 3
"""Depth counts as growing after this many consecutive increases."""


def rate(current: int, previous: int | None, dt: float) -> float | None:
    """Per-second rate of a counter; None without a previous sample or after a reset
    (the counter went down: nsqd restarted or the topic was recreated)."""
    if previous is None or dt <= 0 or current < previous:
        return None
    return (current - previous) / dt


def delta(current: int, previous: int | None) -> int | None:
    """Counter increase since the previous poll; None when unknown or reset."""
    if previous is None or current < previous:
        return None
    return current - previous


def is_starved(ready_count: int, in_flight_count: int) -> bool:
    """The consumer holds as many messages as its RDY allows (within 85%): it is the bottleneck."""
    return ready_count > 0 and in_flight_count >= STARVED_RATIO * ready_count


def is_stalled(ready_count: int, channel_depth: int) -> bool:
    """RDY 0 while messages wait: nothing will be delivered (backoff, paused or a bug)."""
    return ready_count == 0 and channel_depth > 0


def is_growing(series: Sequence[float], samples: int = GROWING_SAMPLES) -> bool:
    """The last ``samples`` steps of ``series`` all went up."""
    if len(series) <= samples:
        return False
    tail = series[-(samples + 1) :]
    return all(b > a for a, b in pairwise(tail))


def worst(*levels: Severity) -> Severity:
    if "crit" in levels:
        return "crit"
    if "warn" in levels:
        return "warn"
    return "ok"


POISON_REQUEUES_PER_MESSAGE = 2
"""A channel looks poisoned when, between two polls, it requeued more than this many times
the messages it holds: the same few messages go round and round instead of draining."""

POISON_MAX_DEPTH = 100
"""Poison is about *a few* messages; a deep channel requeueing a lot is a consumer fault."""


def is_orphan(client_count: int, depth_growing: bool) -> bool:
    """Depth keeps growing and no client is connected: nothing will ever drain it (the
    channel an old consumer left behind, which fills nsqd's disk)."""
    return client_count == 0 and depth_growing


def is_poison(depth: int, requeue_delta: int | None) -> bool:
    """A few messages requeued over and over (a handler that fails on them every time)."""
    if requeue_delta is None or depth <= 0 or depth > POISON_MAX_DEPTH:
        return False
    return requeue_delta > POISON_REQUEUES_PER_MESSAGE * depth


def drain_rate(depths: Sequence[float], interval: float) -> float | None:
    """Messages per second the depth falls, from the first to the last sample of ``depths``
    taken ``interval`` seconds apart; None without two samples or when it is not falling."""
    if len(depths) < 2 or interval <= 0:
        return None
    fall = (depths[0] - depths[-1]) / (interval * (len(depths) - 1))
    return fall if fall > 0 else None


def time_to_drain(depth: int, rate_of_fall: float | None) -> float | None:
    """Seconds until ``depth`` reaches zero at ``rate_of_fall`` (see :func:`drain_rate`);
    0 when already empty, None when it is not draining (it never will at this pace)."""
    if depth <= 0:
        return 0.0
    if rate_of_fall is None or rate_of_fall <= 0:
        return None
    return depth / rate_of_fall
