"""Nagios performance data: what each threshold rule measured, for graphs next to alerts.

The Nagios plugin guidelines put performance data after a ``|`` on the status line (the
first line of output), one datum per quantity: ``'label'=value[UOM];[warn];[crit];[min];[max]``.
A threshold rule (``max-depth``, ``max-time-to-drain``, ``max-requeue-rate``,
``max-timeout-rate``) gives one datum per channel it judged, labelled
``'TOPIC/CHANNEL QUANTITY'``, with the rule's own warning and critical levels (our "above
CRIT is critical" is Nagios's plain ``CRIT`` range). Flag rules (``orphan``, ``poison``,
``node-down``, ...) measure nothing to draw against a level: they add none. A value that
could not be measured (fewer polls than the rule needs, or a channel that does not drain,
whose time to drain is unbounded) is ``U``, as the guidelines say.

Data come in the order of the findings (most urgent first), so that a monitoring system
that cuts long plugin output keeps the data of what is wrong; scope the threshold flags
with ``--topic``/``--channel`` to keep a large cluster's line short.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from nsqctl.health.findings import Finding, ranked
from nsqctl.health.spec import RuleSet

#: What each threshold rule measures: the label's quantity and its unit of measure.
QUANTITIES: dict[str, tuple[str, str]] = {
    "max-depth": ("depth", ""),
    "max-time-to-drain": ("time_to_drain", "s"),
    "max-requeue-rate": ("requeue_rate", ""),
    "max-timeout-rate": ("timeout_rate", ""),
}


def _number(value: float | None) -> str:
    """Plain decimals: the guidelines allow no exponent (``1e+07`` would not parse)."""
    if value is None:
        return ""
    if value == int(value):
        return str(int(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class PerfDatum:
    """One ``'label'=value[UOM];warn;crit;min`` item; ``value`` None is printed ``U``."""

    label: str
    value: float | None
    uom: str = ""
    warn: float | None = None
    crit: float | None = None
    minimum: float | None = 0.0

    def __str__(self) -> str:
        label = self.label.replace("'", "''")  # the guidelines' escape for a quote
        value = "U" if self.value is None else _number(self.value) + self.uom
        fields = [f"'{label}'={value}", _number(self.warn), _number(self.crit)]
        fields.append(_number(self.minimum))
        while fields[-1] == "":
            fields.pop()
        return ";".join(fields)


def perf_data(findings: Iterable[Finding], rules: RuleSet) -> tuple[PerfDatum, ...]:
    """The data of every threshold rule's finding on a channel (see the module doc)."""
    out: list[PerfDatum] = []
    for f in ranked(findings):
        what = QUANTITIES.get(f.rule)
        if what is None or f.topic is None or f.channel is None:
            continue
        rule = rules.rule_for(f.rule, f.topic, f.channel)
        if rule is None or rule.threshold is None:
            continue
        quantity, uom = what
        out.append(
            PerfDatum(
                f"{f.subject} {quantity}",
                f.value,
                uom,
                rule.threshold.warn,
                rule.threshold.crit,
            )
        )
    return tuple(out)


def perf_text(data: Iterable[PerfDatum]) -> str:
    """The data as they follow the ``|`` of the status line."""
    return " ".join(str(d) for d in data)
