"""The cluster statistics model shared by ``nsqctl stat`` and ``nsqctl dash``.

``parse`` (payloads → typed records) and ``view``/``rules`` (rates, starvation, severity)
are pure; ``poller`` does the HTTP; ``sources`` ties polls together over time.
"""

from nsqctl.stats.history import History, Series
from nsqctl.stats.model import ClusterSnapshot, NodeStats
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.read import fetch_nsqd_stats, read_nsqd_stats
from nsqctl.stats.series import sparkline
from nsqctl.stats.sources import StaticSource, StatsSession, ViewSource
from nsqctl.stats.view import (
    ChannelView,
    ClientView,
    ClusterView,
    NodeView,
    PartitionView,
    TopicView,
    build_view,
)

__all__ = [
    "ChannelView",
    "ClientView",
    "ClusterSnapshot",
    "ClusterView",
    "History",
    "NodeStats",
    "NodeView",
    "PartitionView",
    "Series",
    "StaticSource",
    "StatsPoller",
    "StatsSession",
    "TopicView",
    "ViewSource",
    "build_view",
    "fetch_nsqd_stats",
    "read_nsqd_stats",
    "sparkline",
]
