"""Health checks on the cluster model: rules in, findings and a Nagios verdict out.

``spec`` parses rules (``max-depth:orders*/archive=500,1000``), ``evaluate`` judges a
window of :class:`~nsqctl.stats.view.ClusterView` polls with the operator definitions of
:mod:`nsqctl.stats.rules`, ``check`` polls and gives the verdict (``nsqctl check``),
``monitor`` keeps polling and ``metrics`` serves it to Prometheus (``nsqctl exporter``;
imported on its own, since it needs ``prometheus_client``).
"""

from nsqctl.health.check import CheckResult, check_cluster, judge
from nsqctl.health.evaluate import evaluate
from nsqctl.health.findings import EXIT_CODES, Finding, Status
from nsqctl.health.monitor import HealthMonitor, Latest
from nsqctl.health.spec import DEFAULT_RULES, Rule, RuleSet, Threshold, parse_rule

__all__ = [
    "DEFAULT_RULES",
    "EXIT_CODES",
    "CheckResult",
    "Finding",
    "HealthMonitor",
    "Latest",
    "Rule",
    "RuleSet",
    "Status",
    "Threshold",
    "check_cluster",
    "evaluate",
    "judge",
    "parse_rule",
]
