"""The cluster model as Prometheus metrics, through ``prometheus_client``'s collector API.

Series (labels as Prometheus conventions want: one name per quantity, the subject in
labels; ``partition`` is empty on the original family, ``node`` the nsqd's HTTP address):

* ``nsq_lookupd_up{node}`` (the nsqlookupd's HTTP address; one that answers but cannot
  reach etcd is a warning of ``nsqctl_check_status{rule="node-down",node}``);
  ``nsq_node_up{node}``; ``nsq_topic_depth`` and ``nsq_topic_messages_total``
  ``{topic,partition,node}`` (not served for a partition no answering nsqd holds: its
  counters are unknown); on the redesign ``nsq_partition_writable`` (0 for a partition
  with no leader, one with no live copy included), ``nsq_partition_copies`` (copies on
  nsqds that answered), ``nsq_partition_replicas`` (copies configured, when nsqlookupd
  gave the meta) and, when the ISR was asked, ``nsq_partition_isr`` ``{topic,partition}``:
  ``nsq_partition_isr < nsq_partition_replicas`` is a partition short of copies; and
  ``nsq_partition_leader{topic,partition,node}`` 1 for each partition's leader.
  A redesign partition known to exist with no live copy (its only nsqds dead) is served,
  never dropped, as a Prometheus exporter serves a target it cannot reach (``up`` 0, not
  no series): ``nsq_partition_writable`` 0 and ``nsq_partition_copies`` 0, no leader
  series, no depth or message count (unknown, as for an nsqd that is down). Known from
  nsqlookupd's meta, kept from its last answer while every nsqlookupd is down, or, when
  none answered since the exporter started, from the partitions an nsqd now down held
  when it last answered (so one whose nsqd never answered this exporter cannot be known:
  ``nsqctl_check_status{rule="no-leader"}`` is then 3, not judged);
* ``nsq_channel_depth``, ``nsq_channel_in_flight``, ``nsq_channel_deferred``,
  ``nsq_channel_clients`` and the counters ``nsq_channel_messages_total``,
  ``nsq_channel_requeued_total``, ``nsq_channel_timed_out_total``
  ``{topic,channel,partition,node}``;
* ``nsq_channel_time_to_drain_seconds{topic,channel}``: the channel (all its partitions)
  empties in this many seconds at the pace of the last minute of polls, the estimate of
  ``nsqctl check``'s time-to-drain rule (:mod:`nsqctl.health.time_to_drain`;
  :func:`time_to_drain_gauge` says what is served when it does not drain);
* ``nsq_client_ready``, ``nsq_client_in_flight`` and the counters
  ``nsq_client_messages_total``, ``nsq_client_finished_total``,
  ``nsq_client_requeued_total``
  ``{topic,channel,partition,node,client_id,hostname,user_agent}``: the consumer as it
  names itself in IDENTIFY (nsqd's /stats ``client_id``, ``hostname``, ``user_agent``),
  never its connection's ephemeral port, so a consumer that reconnects keeps its series
  instead of leaving one behind per connection (a cardinality leak). Connections of one
  identity on one channel, partition and nsqd are summed into one series; a counter
  drops when one of them reconnects (its connection's counts start again at 0), which
  Prometheus's ``rate()`` takes as a counter reset;
* ``nsqctl_check_status{rule,topic,channel,partition,node}``: 0 ok, 1 warning,
  2 critical, 3 unknown, the exit codes of ``nsqctl check``. A redesign topic an nsqd
  holds while nsqlookupd has no meta for it (data a deleted topic left behind) has one
  ``rule="leftover"`` series for the topic (1 by default, partition empty) and no
  ``no-leader`` series for its partitions; their partition series say what they are
  (``nsq_partition_writable`` 0: its copies take no writes; no ``nsq_partition_replicas``:
  there is no meta), so an alert on ``nsq_partition_writable == 0`` tells them apart with
  ``unless on(topic) nsqctl_check_status{rule="leftover"}``;
* ``nsqctl_up`` (the last poll reached the cluster), ``nsqctl_poll_duration_seconds``,
  ``nsqctl_last_poll_timestamp_seconds`` and ``nsqctl_scrape_duration_seconds`` (the time
  this scrape took to build).

Values are those of the last poll of a :class:`~nsqctl.health.monitor.HealthMonitor`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from nsqctl.health.findings import EXIT_CODES
from nsqctl.health.monitor import Latest
from nsqctl.health.time_to_drain import DrainEstimate, depth_points, estimate
from nsqctl.stats.model import ClientStats
from nsqctl.stats.view import ClusterView

_TOPIC = ["topic", "partition", "node"]
_CHANNEL = ["topic", "channel", "partition", "node"]
_CLIENT = [*_CHANNEL, "client_id", "hostname", "user_agent"]
_CHECK = ["rule", "topic", "channel", "partition", "node"]


def _label(value: object) -> str:
    return "" if value is None else str(value)


_PARTITION_GAUGES = (
    ("nsq_partition_writable", "1 when the redesign partition has a writable leader."),
    ("nsq_partition_isr", "nsqds in the redesign partition's ISR (in sync with its leader)."),
    (
        "nsq_partition_replicas",
        "Copies the redesign topic was created with per partition (nsqlookupd's meta).",
    ),
    (
        "nsq_partition_copies",
        "Copies of the redesign partition on nsqds that answered /stats (leader included).",
    ),
)


def _lookupd_metric(view: ClusterView) -> Metric:
    up = GaugeMetricFamily(
        "nsq_lookupd_up",
        "1 when the nsqlookupd answered /ping.",
        labels=["node"],
    )
    for lk in view.lookupds:
        up.add_metric([lk.address], 1 if lk.ok else 0)
    return up


def _topic_metrics(view: ClusterView) -> Iterator[Metric]:
    up = GaugeMetricFamily("nsq_node_up", "1 when the nsqd answered /stats.", labels=["node"])
    for node in view.nodes:
        up.add_metric([node.address], 0 if node.stats.state == "down" else 1)
    yield up
    depth = GaugeMetricFamily(
        "nsq_topic_depth",
        "Messages of the topic partition not yet confirmed by every channel (or held).",
        labels=_TOPIC,
    )
    messages = CounterMetricFamily(
        "nsq_topic_messages", "Messages published to the topic partition.", labels=_TOPIC
    )
    writable, isr, replicas, copies = (
        GaugeMetricFamily(name, doc, labels=["topic", "partition"])
        for name, doc in _PARTITION_GAUGES
    )
    leader = GaugeMetricFamily(
        "nsq_partition_leader",
        "1 for the nsqd leading the redesign partition (none when it has no leader).",
        labels=_TOPIC,
    )
    for topic in view.topics:
        for p in topic.partitions:
            labels = [topic.name, _label(p.partition), _label(p.leader)]
            if p.live:  # a partition no answering nsqd holds has no counters to report
                depth.add_metric(labels, p.depth)
                messages.add_metric(labels, p.messages)
            if topic.is_redesign:
                part = [topic.name, p.label]
                writable.add_metric(part, 1 if p.write_enabled else 0)
                copies.add_metric(part, p.copies)
                if p.leader is not None:
                    leader.add_metric(labels, 1)
                if p.isr is not None:
                    isr.add_metric(part, len(p.isr))
                if topic.replicas_configured is not None:
                    replicas.add_metric(part, topic.replicas_configured)
    yield from (depth, messages, writable, isr, replicas, copies, leader)


_CHANNEL_GAUGES: tuple[tuple[str, str, Callable[..., int]], ...] = (
    ("nsq_channel_depth", "Messages waiting on the channel.", lambda s: s.depth),
    ("nsq_channel_in_flight", "Messages sent and not yet answered.", lambda s: s.in_flight_count),
    (
        "nsq_channel_deferred",
        "Messages deferred (requeued with a delay).",
        lambda s: s.deferred_count,
    ),
    ("nsq_channel_clients", "Consumers connected to the channel.", lambda s: s.client_count),
)
_CHANNEL_COUNTERS: tuple[tuple[str, str, Callable[..., int]], ...] = (
    ("nsq_channel_messages", "Messages the channel received.", lambda s: s.message_count),
    ("nsq_channel_requeued", "Messages requeued by consumers.", lambda s: s.requeue_count),
    ("nsq_channel_timed_out", "Messages that timed out in flight.", lambda s: s.timeout_count),
)
_CLIENT_GAUGES: tuple[tuple[str, str, Callable[..., int]], ...] = (
    ("nsq_client_ready", "The consumer's RDY count.", lambda c: c.ready_count),
    ("nsq_client_in_flight", "Messages in flight to the consumer.", lambda c: c.in_flight_count),
)
_CLIENT_COUNTERS: tuple[tuple[str, str, Callable[..., int]], ...] = (
    ("nsq_client_messages", "Messages sent to the consumer.", lambda c: c.message_count),
    ("nsq_client_finished", "Messages the consumer finished.", lambda c: c.finish_count),
    ("nsq_client_requeued", "Messages the consumer requeued.", lambda c: c.requeue_count),
)


def client_identity(client: ClientStats) -> tuple[str, str, str]:
    """The labels of a consumer's series: what it names itself, stable across reconnects."""
    return (client.client_id, client.hostname, client.user_agent)


def _client_sums(clients: Iterable[ClientStats]) -> dict[tuple[str, str, str], list[int]]:
    """Each identity's values in the order of ``_CLIENT_GAUGES`` then ``_CLIENT_COUNTERS``,
    summed over its connections."""
    getters = [get for _, _, get in (*_CLIENT_GAUGES, *_CLIENT_COUNTERS)]
    sums: dict[tuple[str, str, str], list[int]] = {}
    for client in clients:
        total = sums.setdefault(client_identity(client), [0] * len(getters))
        for i, get in enumerate(getters):
            total[i] += get(client)
    return sums


def _channel_metrics(view: ClusterView, window: Sequence[ClusterView]) -> Iterator[Metric]:
    families: list[tuple[GaugeMetricFamily | CounterMetricFamily, Callable[..., int]]] = [
        (GaugeMetricFamily(name, doc, labels=_CHANNEL), get) for name, doc, get in _CHANNEL_GAUGES
    ]
    families += [
        (CounterMetricFamily(name, doc, labels=_CHANNEL), get)
        for name, doc, get in _CHANNEL_COUNTERS
    ]
    clients: list[tuple[GaugeMetricFamily | CounterMetricFamily, Callable[..., int]]] = [
        (GaugeMetricFamily(name, doc, labels=_CLIENT), get) for name, doc, get in _CLIENT_GAUGES
    ]
    clients += [
        (CounterMetricFamily(name, doc, labels=_CLIENT), get) for name, doc, get in _CLIENT_COUNTERS
    ]
    drain = GaugeMetricFamily(
        "nsq_channel_time_to_drain_seconds",
        "Seconds until the channel is empty at its recent pace; +Inf when it does not drain.",
        labels=["topic", "channel"],
    )
    points = depth_points(window)
    for topic in view.topics:
        for ch in topic.channels:
            left = time_to_drain_gauge(estimate(points.get((topic.name, ch.name), ())))
            if left is not None:
                drain.add_metric([topic.name, ch.name], left)
            for part in ch.parts:
                labels = [topic.name, ch.name, _label(part.partition), part.node]
                for family, get in families:
                    family.add_metric(labels, get(part.stats))
                for identity, values in _client_sums(part.stats.clients).items():
                    for (family, _), value in zip(clients, values, strict=True):
                        family.add_metric([*labels, *identity], value)
    for family, _ in (*families, *clients):
        yield family
    yield drain


def time_to_drain_gauge(drain: DrainEstimate | None) -> float | None:
    """Seconds until the channel of ``drain`` is empty, ``+Inf`` when it holds messages
    and does not drain, None (no sample) before two polls of its depth.

    ``+Inf`` rather than NaN or no sample, because that is what an alert on this gauge
    needs: ``nsq_channel_time_to_drain_seconds > 600`` fires for a channel that never
    empties (the worst case, and what ``nsqctl check --max-time-to-drain`` calls
    critical), while NaN compares false with every number and a missing sample matches
    no comparison, so both would silence exactly that alert. It is also the honest
    value: depth over a drain rate of zero. Only before two polls, when the pace is not
    known, is the sample left out (``absent()`` finds those)."""
    if drain is None:
        return None
    return math.inf if drain.time_to_drain is None else drain.time_to_drain


class ClusterCollector(Collector):
    """Yields the metrics of ``latest()`` (a monitor's :attr:`HealthMonitor.latest`)."""

    def __init__(self, latest: Callable[[], Latest]) -> None:
        self._latest = latest

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        latest = self._latest()
        result = latest.result
        up = GaugeMetricFamily("nsqctl_up", "1 when the last poll reached the cluster.")
        up.add_metric([], 1 if result is not None and result.error is None else 0)
        yield up
        if latest.view is not None:  # a cluster that did not answer has lookupds to show
            yield _lookupd_metric(latest.view)
        if latest.view is not None and result is not None and result.error is None:
            yield from _topic_metrics(latest.view)
            yield from _channel_metrics(latest.view, latest.window or (latest.view,))
        status = GaugeMetricFamily(
            "nsqctl_check_status",
            "Health rule verdict: 0 ok, 1 warning, 2 critical, 3 unknown.",
            labels=_CHECK,
        )
        if result is not None:
            for f in result.findings:
                labels = [f.rule, f.topic, f.channel, f.partition, f.node]
                status.add_metric([_label(v) for v in labels], EXIT_CODES[f.status])
            if result.error is not None:
                status.add_metric(["cluster", "", "", "", ""], EXIT_CODES["unknown"])
        yield status
        poll = GaugeMetricFamily("nsqctl_poll_duration_seconds", "How long the last poll took.")
        poll.add_metric([], latest.poll_seconds)
        yield poll
        when = GaugeMetricFamily(
            "nsqctl_last_poll_timestamp_seconds", "When the last poll ended (Unix time)."
        )
        when.add_metric([], latest.polled_at)
        yield when
        took = GaugeMetricFamily(
            "nsqctl_scrape_duration_seconds", "How long this scrape took to build."
        )
        took.add_metric([], time.monotonic() - started)
        yield took

    def describe(self) -> list[Metric]:
        """Nothing up front: the series depend on the cluster (and registering must not poll)."""
        return []
