"""What a check found: one :class:`Finding` per rule and subject, and the Nagios verdict.

Exit codes follow the Nagios plugin convention (0 ok, 1 warning, 2 critical, 3 unknown).
When findings disagree the verdict is the most urgent: critical, then warning, then
unknown (a rule that could not be judged), then ok, so a known outage is never hidden
behind a rule that lacked history.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["ok", "warn", "crit", "unknown"]

EXIT_CODES: dict[Status, int] = {"ok": 0, "warn": 1, "crit": 2, "unknown": 3}
LABELS: dict[Status, str] = {
    "ok": "OK",
    "warn": "WARNING",
    "crit": "CRITICAL",
    "unknown": "UNKNOWN",
}
_URGENCY: dict[Status, int] = {"ok": 0, "unknown": 1, "warn": 2, "crit": 3}


@dataclass(frozen=True)
class Finding:
    """One rule judged on one subject (a channel, a partition or a node)."""

    status: Status
    rule: str
    message: str
    topic: str | None = None
    channel: str | None = None
    partition: int | None = None
    node: str | None = None
    value: float | None = None
    threshold: float | None = None

    @property
    def subject(self) -> str:
        """``topic/channel``, ``topic#partition`` or the node address."""
        if self.topic is None:
            return self.node or "cluster"
        if self.channel is not None:
            return f"{self.topic}/{self.channel}"
        if self.partition is not None:
            return f"{self.topic}#{self.partition}"
        return self.topic

    def line(self) -> str:
        """The one line a check prints for it."""
        return f"{LABELS[self.status]}: {self.rule} {self.subject}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "rule": self.rule,
            "topic": self.topic,
            "channel": self.channel,
            "partition": self.partition,
            "node": self.node,
            "value": self.value,
            "threshold": self.threshold,
            "message": self.message,
        }


def overall(statuses: Iterable[Status]) -> Status:
    """The verdict of several findings (see the module docstring)."""
    return max(statuses, key=_URGENCY.__getitem__, default="ok")


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    """Most urgent first, then by rule and subject: the order lines are printed in."""
    return sorted(findings, key=lambda f: (-_URGENCY[f.status], f.rule, f.subject))
