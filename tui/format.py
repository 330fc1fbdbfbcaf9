"""Cell formatting for the dashboard: numbers, rates, ages, severity colours."""

from __future__ import annotations

from rich.text import Text

from nsqctl.stats.history import Series
from nsqctl.stats.rules import Severity
from nsqctl.stats.series import sparkline

SEVERITY_STYLE: dict[str, str] = {"ok": "", "warn": "bold yellow", "crit": "bold red"}
STATE_STYLE: dict[str, str] = {
    "up": "green",
    "slow": "yellow",
    "unhealthy": "bold yellow",
    "down": "bold red",
}


def num(value: int | None) -> str:
    """Compact counts: 950, 12.3k, 4.1M."""
    if value is None:
        return "-"
    for limit, unit, suffix in (
        (1_000_000_000, 1_000_000_000, "G"),
        (1_000_000, 1_000_000, "M"),
        (10_000, 1_000, "k"),  # 9999 stays exact; 12,345 is 12.3k
    ):
        if abs(value) >= limit:
            return f"{value / unit:.1f}{suffix}"
    return str(value)


def size(value: int | None) -> str:
    """Bytes, always with a unit, so a byte count is never read as a message count."""
    if value is None:
        return "-"
    for limit, unit in ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(value) >= limit:
            return f"{value / limit:.1f} {unit}"
    return f"{value} B"


def per_sec(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 10_000:
        return f"{value / 1000:.1f}k"
    return f"{value:.1f}"


def age(seconds: float) -> str:
    """How long ago, coarse: 42s, 7m03s, 5h12m, 3d04h."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def severity_text(text: str, severity: Severity) -> Text:
    return Text(text, style=SEVERITY_STYLE[severity])


def styled(text: str, style: str) -> Text:
    return Text(text, style=style)


TREND_WIDTH = 16
"""Samples a trend cell draws (32 s at the default 2 s poll); the history view has more."""


def amount(value: float, unit: str) -> str:
    """One sample of a series in the table's words: a count, or a rate for ``…/s``."""
    return per_sec(value) if unit.endswith("/s") else num(round(value))


def span_text(series: Series) -> str:
    """The range of ``series``' known samples with its unit: ``1.2k–4.5k msgs``; one
    value when flat; ``-`` when every sample is a gap (or there is none yet)."""
    span = series.span
    if span is None:
        return "-"
    low, top = amount(span[0], series.unit), amount(span[1], series.unit)
    return f"{top} {series.unit}" if low == top else f"{low}–{top} {series.unit}"


def trend_cell(series: Series, width: int = TREND_WIDTH) -> Text:
    """A trend column's cell: the last ``width`` samples as a sparkline scaled to their
    own range, then that range (what the bars' bottom and top stand for)."""
    shown = series.tail(width)
    text = Text(sparkline(shown.values, width).ljust(width), style="cyan")
    text.append(" " + span_text(shown), style="dim")
    return text
