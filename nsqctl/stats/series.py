"""Recent samples per key (a bounded series each) for the session, and the text sparkline
the widgets draw."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence

BARS = "▁▂▃▄▅▆▇█"
DEFAULT_LENGTH = 120


class KeyedSeries:
    """Bounded series keyed by e.g. ``("channel", topic, channel, "depth")``.

    Keys not pushed to in a round are kept (a topic can come back); the session decides
    when to forget them with :meth:`retain`.
    """

    def __init__(self, length: int = DEFAULT_LENGTH) -> None:
        self.length = length
        self._series: dict[Hashable, deque[float]] = {}

    def push(self, key: Hashable, value: float) -> tuple[float, ...]:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = deque(maxlen=self.length)
        series.append(value)
        return tuple(series)

    def get(self, key: Hashable) -> tuple[float, ...]:
        return tuple(self._series.get(key, ()))

    def retain(self, keys: set[Hashable]) -> None:
        for key in [k for k in self._series if k not in keys]:
            del self._series[key]

    def __len__(self) -> int:
        return len(self._series)


def sparkline(values: Sequence[float], width: int = 16) -> str:
    """The last ``width`` values as bars scaled 0..max (a flat zero series is all ``▁``)."""
    tail = list(values)[-width:]
    if not tail:
        return ""
    top = max(tail)
    if top <= 0:
        return BARS[0] * len(tail)
    last = len(BARS) - 1
    return "".join(BARS[min(last, max(0, round(v / top * last)))] for v in tail)
