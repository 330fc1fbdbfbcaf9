"""One health check: poll a cluster a few times, judge the rules, give a verdict.

Rates, time to drain and orphan need change between polls, so a check takes ``samples``
polls ``interval`` seconds apart (the defaults see three steps in about three seconds:
enough for the orphan rule's growth test). An unreachable cluster is one ``unknown``
verdict with its reason, after the first poll.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nsqctl.errors import ConfigError
from nsqctl.health.evaluate import evaluate, isr_focus, unreachable
from nsqctl.health.findings import EXIT_CODES, LABELS, Finding, Status, overall, ranked
from nsqctl.health.perfdata import PerfDatum, perf_data, perf_text
from nsqctl.health.spec import RuleSet
from nsqctl.stats.poller import DEFAULT_TIMEOUT, StatsPoller
from nsqctl.stats.sources import StatsSession, ViewSource
from nsqctl.stats.view import ClusterView

DEFAULT_SAMPLES = 4
DEFAULT_INTERVAL = 1.0


@dataclass(frozen=True)
class CheckResult:
    """The verdict; ``findings`` holds every judged rule and subject, ok ones included;
    ``perfdata`` what the threshold rules measured (:mod:`nsqctl.health.perfdata`)."""

    status: Status
    findings: tuple[Finding, ...]
    samples: int
    error: str | None = None
    topics: int = 0
    channels: int = 0
    nodes: int = 0
    rules: tuple[str, ...] = field(default_factory=tuple)
    perfdata: tuple[PerfDatum, ...] = ()
    answering: int | None = None
    """nsqds that answered the last poll (None: all of :attr:`nodes`)."""
    lookupds_down: tuple[str, ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def problems(self) -> list[Finding]:
        """The findings that are not ok, most urgent first."""
        return ranked(f for f in self.findings if f.status != "ok")

    def summary(self) -> str:
        """The line printed when nothing is wrong (or the unreachable cluster's line)."""
        if self.error is not None:
            return f"{LABELS['unknown']}: cluster: {self.error}"
        # with node-down turned off an OK can stand on part of the cluster: it says so
        nodes = f"{self.nodes} nsqd"
        if self.answering is not None and self.answering < self.nodes:
            nodes = f"{self.answering} of {self.nodes} nsqd answering"
        if self.lookupds_down:
            nodes += f" (nsqlookupd {', '.join(self.lookupds_down)} not answering)"
        return (
            f"{LABELS[self.status]}: {len(self.findings)} checks on {nodes}, "
            f"{self.topics} topics, {self.channels} channels over {self.samples} polls"
        )

    def lines(self) -> list[str]:
        """One line per finding that is not ok; the summary alone when there is none. The
        first is Nagios's status line: the performance data follow its ``|``."""
        if self.error is not None:
            return [self.summary()]
        out = [f.line() for f in self.problems] or [self.summary()]
        if self.perfdata:
            out[0] += " | " + perf_text(self.perfdata)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "error": self.error,
            "samples": self.samples,
            "checked": len(self.findings),
            "nodes": self.nodes,
            "nodes_answering": self.nodes if self.answering is None else self.answering,
            "lookupds_down": list(self.lookupds_down),
            "topics": self.topics,
            "channels": self.channels,
            "rules": list(self.rules),
            "findings": [f.to_json() for f in self.problems],
        }


def judge(views: Sequence[ClusterView], rules: RuleSet, *, polls: int | None = None) -> CheckResult:
    """The verdict of a window of views (oldest first); ``polls`` as in :func:`evaluate`."""
    view = views[-1]
    seen = len(views) if polls is None else min(len(views), polls)
    reason = unreachable(view)
    if reason is not None:
        return CheckResult("unknown", (), seen, error=reason, rules=_texts(rules))
    findings = tuple(evaluate(views, rules, polls=polls))
    return CheckResult(
        overall(f.status for f in findings),
        findings,
        seen,
        topics=len(view.topics),
        channels=sum(len(t.channels) for t in view.topics),
        nodes=len(view.nodes),
        rules=_texts(rules),
        perfdata=perf_data(findings, rules),
        answering=sum(1 for n in view.nodes if n.stats.state != "down"),
        lookupds_down=tuple(lk.address for lk in view.lookupds if not lk.ok),
    )


def _texts(rules: RuleSet) -> tuple[str, ...]:
    return tuple(str(r) for r in rules)


async def collect(source: ViewSource, samples: int, interval: float) -> list[ClusterView]:
    """``samples`` views ``interval`` seconds apart (fewer when the first is unusable)."""
    views: list[ClusterView] = []
    for n in range(samples):
        started = time.monotonic()
        views.append(await source.refresh())
        if n == 0 and unreachable(views[0]) is not None:
            break
        if n + 1 < samples:
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
    return views


def session_for(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    rules: RuleSet,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    history: int = 120,
) -> StatsSession:
    """A polling session that asks what ``rules`` need (the ISR only of the topics an
    ``isr`` rule can cover: see :func:`~nsqctl.health.evaluate.isr_focus`)."""
    poller = StatsPoller(lookupd_http, nsqd_http, focus=isr_focus(rules), timeout=timeout)
    return StatsSession(poller, history_length=history)


async def check_cluster(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    rules: RuleSet,
    *,
    samples: int = DEFAULT_SAMPLES,
    interval: float = DEFAULT_INTERVAL,
    timeout: float = DEFAULT_TIMEOUT,
) -> CheckResult:
    """Poll the cluster ``samples`` times and judge ``rules`` (the library's check)."""
    if samples < 1:
        raise ConfigError(f"samples must be >= 1, not {samples}", setting="samples")
    if interval <= 0:
        raise ConfigError(f"interval must be > 0 seconds, not {interval}", setting="interval")
    session = session_for(lookupd_http, nsqd_http, rules, timeout=timeout, history=samples)
    try:
        views = await collect(session, samples, interval)
    finally:
        await session.aclose()
    return judge(views, rules)
