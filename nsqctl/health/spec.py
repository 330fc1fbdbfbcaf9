"""Health rules as an operator writes them: ``KIND[:TOPIC[/CHANNEL]][=VALUE]``.

``KIND`` is one of :data:`THRESHOLD_KINDS` (``VALUE`` is ``CRIT`` or ``WARN,CRIT``: a
finding is critical above ``CRIT``, a warning above ``WARN``) or :data:`FLAG_KINDS`
(``VALUE`` is the severity a hit gets: ``warn``, ``crit``, or ``off`` to silence it).
``TOPIC`` and ``CHANNEL`` are shell globs (``fnmatch``), ``*`` when left out.

Examples: ``max-depth=1000`` (every channel), ``max-depth:orders*/archive=500,1000``,
``orphan:tmp-*=off``, ``no-leader=warn``.

The same rule string is used by the CLI (``--rule``), a profile's ``check`` list and the
library; for each subject the *last* matching rule of a kind decides, so later, narrower
rules refine earlier, broader ones (the defaults come first, then the profile, then flags).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from nsqctl.errors import ConfigError
from nsqctl.stats.rules import Severity

ThresholdKind = Literal["max-depth", "max-time-to-drain", "max-requeue-rate", "max-timeout-rate"]
FlagKind = Literal["orphan", "poison", "node-down", "no-leader", "isr", "not-seen", "leftover"]
Kind = ThresholdKind | FlagKind

THRESHOLD_KINDS: dict[str, str] = {
    "max-depth": "messages waiting on a channel",
    "max-time-to-drain": "seconds until a channel's depth reaches zero at its current pace",
    "max-requeue-rate": "messages a channel requeues per second",
    "max-timeout-rate": "messages per second that time out on a channel",
}
FLAG_KINDS: dict[str, str] = {
    "orphan": "a channel's depth keeps growing and no client is connected",
    "poison": "a few messages requeued over and over (more requeues than twice what it holds)",
    "node-down": "an nsqd does not answer /stats",
    "no-leader": "a redesign partition has no writable leader",
    "isr": "a copy of a redesign partition is not in its ISR (fewer in sync than replicas)",
    "not-seen": "no nsqd that answered holds an original topic (every nsqd holding it is down)",
    "leftover": (
        "an nsqd holds a copy of a redesign topic nsqlookupd has no meta for: data a deleted "
        "topic left behind on an nsqd that was down during the delete"
    ),
}
KINDS: tuple[str, ...] = (*THRESHOLD_KINDS, *FLAG_KINDS)

#: The rules every check starts from (those that need no threshold). ``poison`` is not
#: one: whether a few messages going round is a fault depends on the consumer's retry
#: policy, so a check that was OK does not start warning unless the operator asks.
#: ``leftover`` warns: a deleted topic's data is to be removed, nothing is down (its
#: partitions are judged by it instead of ``no-leader``, which would page for them).
DEFAULT_RULES: tuple[str, ...] = (
    "node-down=crit",
    "no-leader=crit",
    "isr=warn",
    "not-seen=crit",
    "leftover=warn",
    "orphan=warn",
)

FlagLevel = Severity | Literal["off"]
_FLAG_LEVELS: tuple[FlagLevel, ...] = ("warn", "crit", "off")
_RULE = re.compile(r"^(?P<kind>[a-z-]+)(?::(?P<scope>[^=]*))?(?:=(?P<value>.*))?$")


@dataclass(frozen=True)
class Threshold:
    """Warning above ``warn`` (None: no warning level), critical above ``crit``."""

    warn: float | None
    crit: float

    def severity(self, value: float) -> Severity:
        if value > self.crit:
            return "crit"
        if self.warn is not None and value > self.warn:
            return "warn"
        return "ok"

    def limit(self, level: Severity) -> float | None:
        """The bound ``level`` was reached by going above."""
        return self.crit if level == "crit" else self.warn if level == "warn" else None

    def __str__(self) -> str:
        crit = _number(self.crit)
        return crit if self.warn is None else f"{_number(self.warn)},{crit}"


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


@dataclass(frozen=True)
class Rule:
    """One parsed rule; exactly one of ``threshold`` (threshold kinds) and ``level``
    (flag kinds) is set."""

    kind: Kind
    topic: str = "*"
    channel: str = "*"
    threshold: Threshold | None = None
    level: FlagLevel | None = None
    source: str = ""

    @property
    def enabled(self) -> bool:
        return self.level != "off"

    @property
    def hit(self) -> Severity:
        """The severity of a subject a flag rule catches."""
        return "warn" if self.level == "warn" else "crit"

    def matches(self, topic: str | None, channel: str | None) -> bool:
        """Whether the rule covers this subject (``None``: not a topic/channel subject,
        such as a node, which only an unscoped rule covers)."""
        if topic is None:
            return self.topic == "*"
        if not fnmatchcase(topic, self.topic):
            return False
        return channel is None or fnmatchcase(channel, self.channel)

    def __str__(self) -> str:
        scope = "" if (self.topic, self.channel) == ("*", "*") else f":{self.topic}"
        if scope and self.channel != "*":
            scope += f"/{self.channel}"
        value = str(self.threshold) if self.threshold is not None else str(self.level)
        return f"{self.kind}{scope}={value}"


def parse_threshold(text: str, what: str = "threshold") -> Threshold:
    """``CRIT`` or ``WARN,CRIT`` (non-negative numbers, WARN below CRIT)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if not 1 <= len(parts) <= 2 or len(values) != len(parts):
        raise ConfigError(f"bad {what} {text!r}: give CRIT or WARN,CRIT (numbers)")
    if any(v < 0 or not math.isfinite(v) for v in values):
        raise ConfigError(f"bad {what} {text!r}: thresholds are finite numbers >= 0")
    if len(values) == 2 and values[0] >= values[1]:
        raise ConfigError(f"bad {what} {text!r}: the warning level must be below the critical")
    return Threshold(values[0] if len(values) == 2 else None, values[-1])


def parse_rule(text: str) -> Rule:
    """One rule string (see the module docstring)."""
    m = _RULE.match(text.strip())
    kind = m.group("kind") if m else ""
    if m is None or kind not in KINDS:
        raise ConfigError(
            f"bad rule {text!r}: write KIND[:TOPIC[/CHANNEL]][=VALUE] with KIND one of "
            f"{', '.join(KINDS)}"
        )
    scope = (m.group("scope") or "").strip()
    topic, _, channel = scope.partition("/")
    topic, channel = topic or "*", channel or "*"
    value = m.group("value")
    if kind in THRESHOLD_KINDS:
        if not value:
            raise ConfigError(f"bad rule {text!r}: {kind} needs a threshold (={kind.upper()})")
        return Rule(kind, topic, channel, threshold=parse_threshold(value), source=text)  # type: ignore[arg-type]
    if kind == "node-down" and scope:
        raise ConfigError(f"bad rule {text!r}: node-down is about nsqds, it takes no TOPIC")
    if kind in ("no-leader", "isr", "not-seen", "leftover") and channel != "*":
        what = "topics" if kind in ("not-seen", "leftover") else "partitions"
        raise ConfigError(f"bad rule {text!r}: {kind} is about {what}, it takes no CHANNEL")
    level = (value or "crit").strip().lower()
    if level not in _FLAG_LEVELS:
        raise ConfigError(f"bad rule {text!r}: {kind} takes warn, crit or off")
    return Rule(kind, topic, channel, level=level, source=text)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RuleSet:
    """Rules in order of precedence (last wins per kind and subject)."""

    rules: tuple[Rule, ...]

    @classmethod
    def parse(cls, texts: Iterable[str], *, defaults: bool = True) -> RuleSet:
        head = DEFAULT_RULES if defaults else ()
        return cls(tuple(parse_rule(t) for t in (*head, *texts)))

    def of(self, kind: str) -> tuple[Rule, ...]:
        return tuple(r for r in self.rules if r.kind == kind)

    def active(self, kind: str) -> bool:
        """Some rule of ``kind`` is on for some subject."""
        return any(r.enabled for r in self.of(kind))

    def rule_for(self, kind: str, topic: str | None, channel: str | None) -> Rule | None:
        """The rule of ``kind`` that decides for this subject, None when none (or ``off``)."""
        found = None
        for rule in self.rules:
            if rule.kind == kind and rule.matches(topic, channel):
                found = rule
        return found if found is not None and found.enabled else None

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)


def scoped(kind: str, value: str, topics: Sequence[str], channels: Sequence[str]) -> list[str]:
    """Rule strings for a shortcut flag (``max-depth`` = ``100``) over every combination of
    topic and channel globs given (``*`` when none)."""
    return [f"{kind}:{t}/{c}={value}" for t in topics or ("*",) for c in channels or ("*",)]
