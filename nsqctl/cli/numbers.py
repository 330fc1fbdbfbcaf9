"""The option types of every numeric option: durations, rates and counts.

``float()`` takes ``nan``, ``inf`` and ``1e999`` and click's ranges let them through
(``nan < 0`` is false), so a poll interval of ``nan`` polled without pause and a rate of
``inf`` reached arithmetic that raised. Each duration, rate or size option is declared
with one of these parsers (``typer.Option(..., parser=seconds())``): the value is finite
and within its bounds, or the parser says in one line what it must be, which click turns
into a usage error (exit 2) naming the option. It raises :class:`typer.BadParameter`:
click words a ValueError from a parser as the bare value, without the reason. A parser is
a plain callable, so the rules are testable without a command. Whole numbers need none of
this: ``int()`` takes no nan or inf, and ``min=`` bounds them.

No import of anything heavy: every command imports this at start-up.
"""

from __future__ import annotations

import math

import typer

#: the longest duration an option takes: longer waits overflow the timeouts of threads
#: and selectors (``threading.TIMEOUT_MAX``), and nobody means more than a year
MAX_SECONDS = 365 * 24 * 3600.0


class Number:
    """A parser of one kind of number: ``kind`` int or float, at least ``minimum`` (or
    above it when ``above`` is set), at most ``maximum``; ``unit`` and ``metavar`` are
    what the message and the help call it."""

    def __init__(
        self,
        kind: type[int] | type[float],
        *,
        minimum: float,
        above: bool = False,
        maximum: float | None = None,
        unit: str,
        metavar: str,
    ) -> None:
        self.kind = kind
        self.minimum = minimum
        self.above = above
        self.maximum = maximum
        self.unit = unit
        self.metavar = metavar
        # click names the value's type after the parser (FuncParamType uses __name__)
        self.__name__ = metavar.lower()

    def expected(self) -> str:
        """What a value must be, in words: ``a number of seconds > 0, at most 31536000``."""
        what = "a whole number" if self.kind is int else "a number"
        bound = f"{'>' if self.above else '>='} {self.minimum:.10g}"
        top = f", at most {self.maximum:.10g}" if self.maximum is not None else ""
        return f"{what} of {self.unit} {bound}{top}"

    def __call__(self, value: str | float | int) -> float | int:
        """The value, or :class:`typer.BadParameter` with a one-line message (click shows
        it as ``Invalid value for '--option': ...``)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number: float | int = value  # a default, already a number
        else:
            text = str(value)  # float()/int() take the spaces they take; str.strip() takes more
            try:
                number = self.kind(text)
            except ValueError:
                raise typer.BadParameter(f"{_shown(value)} is not {self.expected()}") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise typer.BadParameter(f"{_shown(value)} is not finite: give {self.expected()}")
        low = number <= self.minimum if self.above else number < self.minimum
        if low or (self.maximum is not None and number > self.maximum):
            raise typer.BadParameter(f"{_shown(value)} is out of range: give {self.expected()}")
        return number


def _shown(value: object) -> str:
    """The value as the message quotes it: one line, not endless."""
    text = repr(str(value))
    return text if len(text) <= 40 else text[:37] + "...'"


def seconds(*, zero: bool = False, minimum: float = 0.0, maximum: float = MAX_SECONDS) -> Number:
    """A duration: > 0 seconds, or >= 0 when ``zero`` means something (say what in the
    option's help), or at least ``minimum`` when that is above zero."""
    above = not zero and minimum == 0.0
    return Number(
        float, minimum=minimum, above=above, maximum=maximum, unit="seconds", metavar="SECONDS"
    )


#: The shortest time between two polls of a cluster: each asks every nsqd for its /stats,
#: and a shorter one only makes the poller hammer the nsqds it watches.
MIN_POLL_INTERVAL = 0.1


def poll_interval() -> Number:
    """The time between two polls of the cluster (``--interval`` of the views that poll):
    at least :data:`MIN_POLL_INTERVAL` seconds."""
    return seconds(minimum=MIN_POLL_INTERVAL)


def rate(unit: str = "messages per second") -> Number:
    """A rate: finite and > 0 (zero would never send)."""
    return Number(float, minimum=0.0, above=True, unit=unit, metavar="N")


def size(unit: str, *, minimum: float) -> Number:
    """A fractional quantity such as megabytes, at least ``minimum``."""
    return Number(float, minimum=minimum, unit=unit, metavar="N")
