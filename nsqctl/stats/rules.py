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
