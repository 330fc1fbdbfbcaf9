"""The history view of an open topic or channel: its depth and rate over the session's
window (:mod:`nsqctl.stats.history`), drawn as text charts with their scale.

Text, not Textual's ``Sparkline`` widget: block characters render alike in a terminal
and in a browser session (``textual serve``), the scale (the values the top and bottom
rows stand for) and the time span are printed with them, and a gap (a failed poll, an
nsqd not answering) is left blank instead of being drawn as a zero.
"""

from __future__ import annotations

import math

from rich.text import Text
from textual.widget import Widget

from nsqctl.stats.history import EMPTY_DEPTH, EMPTY_RATE, Series
from nsqctl.stats.series import BARS
from nsqctl.tui.format import age, amount, span_text

CHART_ROWS = 4
"""Rows of bars per chart: 32 levels."""
GAP_MARK = "·"
"""Under a column whose samples are all gaps, on the axis: nothing was known then."""


def columns(series: Series, width: int) -> list[float | None]:
    """``series`` in at most ``width`` columns, oldest first: each column the mean of its
    known samples (consecutive polls), None when all of them are gaps."""
    values = series.values
    if width <= 0 or not values:
        return []
    per = max(1, math.ceil(len(values) / width))
    # the newest column is always a whole bucket ending at the last poll
    start = len(values) - per * math.ceil(len(values) / per)
    out: list[float | None] = []
    for i in range(start, len(values), per):
        known = [v for v in values[max(0, i) : i + per] if v is not None]
        out.append(sum(known) / len(known) if known else None)
    return out


def _levels(cols: list[float | None], rows: int) -> list[int | None]:
    """Each column's height in eighths of a row (1..rows*8), scaled from the columns'
    minimum (one eighth) to their maximum (full); flat: halfway, or one eighth at zero."""
    known = [v for v in cols if v is not None]
    if not known:
        return [None] * len(cols)
    low, top = min(known), max(known)
    full = rows * 8
    if top == low:
        flat = 1 if top <= 0 else full // 2
        return [None if v is None else flat for v in cols]
    return [None if v is None else 1 + round((v - low) / (top - low) * (full - 1)) for v in cols]


def chart(title: str, series: Series, width: int, rows: int = CHART_ROWS) -> list[Text]:
    """A chart of ``series`` in ``width`` cells: a title line (now, range, span), ``rows``
    of bars with the scale on the left, and an axis marking gaps."""
    # the scale is the columns' (each the mean of its polls), which the bars are drawn to
    wide = max(len(amount(v, series.unit)) for v in series.known()) if series.known() else 1
    cols = columns(series, max(1, width - wide - 1))
    known = [v for v in cols if v is not None]
    label_top = amount(max(known), series.unit) if known else ""
    label_low = amount(min(known), series.unit) if known else ""
    pad = max(len(label_top), len(label_low), 1)
    levels = _levels(cols, rows)
    now = "-" if series.last is None else amount(series.last, series.unit)
    head = Text(f"{title} ({series.unit})", style="bold")
    head.append(f"  now {now}  range {span_text(series)}  last {age(series.seconds)}", "dim")
    lines = [head]
    for r in range(rows):
        base = (rows - 1 - r) * 8
        label = label_top if r == 0 else label_low if r == rows - 1 else ""
        line = Text(f"{label:>{pad}}" + ("┤" if label else "│"), style="dim")
        bars = []
        for level in levels:
            if level is None or level <= base:
                bars.append(" ")
            else:
                bars.append(BARS[min(7, level - base - 1)])
        line.append("".join(bars), style="cyan")
        lines.append(line)
    axis = "".join(GAP_MARK if level is None else "─" for level in levels)
    lines.append(Text(" " * pad + "└" + axis, style="dim"))
    return lines


SIDE_BY_SIDE = 110
"""From this width depth and rate are drawn side by side (each title fits its half)."""


def history_text(depth: Series, rate: Series, width: int) -> Text:
    """Depth and rate in ``width`` cells: side by side with :data:`CHART_ROWS` rows each,
    or, narrower, one above the other with half as many (a terminal of 80 columns keeps
    room for the tables). No line is longer than ``width``: none wraps."""
    if width >= SIDE_BY_SIDE:
        half = (width - 2) // 2
        pairs = zip(chart("depth", depth, half), chart("rate", rate, half), strict=True)
        lines = [Text.assemble(_fit(a, half, pad=True), "  ", _fit(b, half)) for a, b in pairs]
    else:
        rows = max(1, CHART_ROWS // 2)
        lines = [_fit(line, width) for line in chart("depth", depth, width, rows)]
        lines += [_fit(line, width) for line in chart("rate", rate, width, rows)]
    return Text("\n").join(lines)


def _fit(line: Text, width: int, pad: bool = False) -> Text:
    line = line.copy()
    line.truncate(max(1, width), overflow="ellipsis", pad=pad)
    return line


class HistoryPanel(Widget):
    """The history view: :meth:`show` the series of what the screen details."""

    DEFAULT_CSS = """
    HistoryPanel { height: auto; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.depth = EMPTY_DEPTH
        self.rate = EMPTY_RATE

    def show(self, depth: Series, rate: Series) -> None:
        if (depth, rate) != (self.depth, self.rate):
            self.depth, self.rate = depth, rate
            self.refresh(layout=True)

    def render(self) -> Text:
        width = self.content_region.width or self.app.size.width - 2
        return history_text(self.depth, self.rate, width)
