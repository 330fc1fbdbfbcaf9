"""The accepted values of numeric library settings, declared once per setting and checked
when the setting's object is built.

A value no server takes (a negative heartbeat, a NaN timeout) would otherwise travel
until nsqd answers it with an error that names neither the setting nor the range, or
until a timer silently never fires. Each setting declares one :class:`Bound`;
:func:`check_bounds` walks the declarations, so the range in the error message and the
range enforced cannot drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import NamedTuple, TypeVar

from nsqctl.errors import ConfigError

T = TypeVar("T")

__all__ = ["Bound", "check_at_least", "check_bound", "check_bounds", "options_or_default"]


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class Bound(NamedTuple):
    """``minimum``..``maximum`` (``maximum`` None: no upper bound), plus ``special`` values
    outside that range which mean something (``-1``: off, ``0``: the server's default),
    each described in ``special``'s text."""

    minimum: float
    maximum: float | None = None
    integer: bool = True
    #: the minimum itself is refused (a timeout of 0 seconds waits for nothing)
    above: bool = False
    unit: str = ""
    special: tuple[tuple[int, str], ...] = ()
    #: who sets the real maximum, when ``maximum`` only stops what no server could take
    #: (nsqd's flag that configures it)
    up_to: str = ""
    #: None is accepted: the setting is unset (nothing is sent, the server decides)
    optional: bool = False

    def describe(self) -> str:
        """The accepted values, as an error message names them."""
        unit = f" {self.unit}" if self.unit else ""
        low = f"{self.minimum:g}"
        if self.up_to:
            span = f"{low}{unit} or more (up to {self.up_to})"
        elif self.maximum is None:
            span = f"> {low}{unit}" if self.above else f"{low}{unit} or more"
        else:
            span = f"{low}..{self.maximum:g}{unit}"
        kind = "a whole number" if self.integer else "a finite number"
        options = [f"{value} ({meaning})" for value, meaning in self.special]
        return f"{kind}: " + ", ".join([*options, span]) if options else f"{kind} {span}"

    def accepts(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.integer and not isinstance(value, int):
            return False
        if not math.isfinite(value):
            return False
        if any(value == special for special, _ in self.special):
            return True
        low = value > self.minimum if self.above else value >= self.minimum
        return low and (self.maximum is None or value <= self.maximum)


def check_bound(name: str, value: object, bound: Bound) -> None:
    """Raise :class:`ConfigError` (``setting`` = ``name``) when ``value`` is outside ``bound``."""
    if value is None and bound.optional:
        return
    if not bound.accepts(value):
        raise ConfigError(f"bad {name} {value!r}: give {bound.describe()}", setting=name)


def check_bounds(settings: object, bounds: Mapping[str, Bound]) -> None:
    """Raise :class:`ConfigError` (``setting`` = the attribute) for the first attribute of
    ``settings`` outside its bound."""
    for name, bound in bounds.items():
        check_bound(name, getattr(settings, name), bound)


def check_at_least(settings: object, name: str, floor: str) -> None:
    """Raise :class:`ConfigError` (``setting`` = ``name``) when the seconds ``name`` are
    fewer than the seconds ``floor`` (a maximum backoff below its first step)."""
    value, least = getattr(settings, name), getattr(settings, floor)
    if value < least:
        raise ConfigError(
            f"bad {name} {value!r}: give at least {floor} ({least!r} seconds)", setting=name
        )


def options_or_default(options: T | None, kind: type[T], example: str) -> T:
    """A client's ``options=``: the defaults when None; a :class:`ConfigError` naming
    ``options`` for anything but a ``kind`` (a dict of settings, the class itself)."""
    if options is None:
        return kind()
    if not isinstance(options, kind):
        raise ConfigError(
            f"options must be a {kind.__name__}, got {type(options).__name__}: e.g. "
            f"options={kind.__name__}({example})",
            setting="options",
        )
    return options
