"""The text sparkline the widgets draw from a :class:`nsqctl.stats.history.Series`."""

from __future__ import annotations

from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"
GAP = " "
"""A sample that is not known (a failed poll, an nsqd not answering): not drawn as zero."""


def sparkline(values: Sequence[float | None], width: int = 16) -> str:
    """The last ``width`` values as bars scaled from their minimum to their maximum, so a
    change shows whatever the level (the range is printed beside it: see
    :func:`nsqctl.tui.format.trend_cell`); a flat series is a flat line, at the bottom
    when it is zero, halfway otherwise; a gap is a blank."""
    tail = values[-width:] if width > 0 else values[:0]
    known = [v for v in tail if v is not None]
    if not known:
        return GAP * len(tail)
    low, top = min(known), max(known)
    last = len(BARS) - 1
    if top == low:
        flat = BARS[0] if top <= 0 else BARS[last // 2]
        return "".join(GAP if v is None else flat for v in tail)
    scale = last / (top - low)
    return "".join(GAP if v is None else BARS[round((v - low) * scale)] for v in tail)
