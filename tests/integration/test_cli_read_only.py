"""Under ``--read-only`` the reading commands still work against a real cluster: lookup,
stat, and tail on its own ephemeral channel (the writes are refused before connecting,
tests/unit/test_cli_readonly.py); the dashboard refuses its actions, with a notification
and without asking."""

from __future__ import annotations

import asyncio
import json
import subprocess

from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.sources import StaticSource
from nsqctl.tui.app import DashApp
from nsqctl.tui.screens import MainScreen, TopicScreen
from tests.helpers.cli import cli
from tests.helpers.redesign import unique
from tests.helpers.stats import recorded_original
from tests.integration.test_dash import RECORDED_AT, SIZE, first_poll
from tests.integration.test_dash_actions import record_notes


async def _publish(cluster: Cluster, topic: str, body: bytes) -> None:
    async with Producer(nsqd_tcp=[cluster.nsqd_tcp[0]]) as producer:
        await producer.publish(topic, body)


def _read_only(*args: str) -> subprocess.CompletedProcess[str]:
    return cli("--read-only", *args)


def test_lookup_stat_and_ephemeral_tail_work_under_read_only(original_cluster: Cluster) -> None:
    c = original_cluster
    topic = unique("ro")
    asyncio.run(_publish(c, topic, b"before"))

    looked = _read_only("lookup", topic, "--json", "--lookupd", c.lookupd_http[0])
    assert looked.returncode == 0, looked.stderr
    assert topic in json.dumps(json.loads(looked.stdout))

    stat = _read_only("stat", "--json", "-n", "1", "-i", "0.1", "--lookupd", c.lookupd_http[0])
    assert stat.returncode == 0, stat.stderr
    assert topic in stat.stdout

    # a topic's first channel gets what the topic held: tail's own ephemeral one here
    tail = _read_only("tail", topic, "-n", "1", "--nsqd", c.nsqd_tcp[0])
    assert tail.returncode == 0, tail.stderr
    assert tail.stdout == "before\n"


async def test_dashboard_actions_refused_under_read_only() -> None:
    """A topic pause, a channel unpause (the recorded channel is paused) and a channel
    empty: each refused with a notification naming the setting, and no confirmation asked,
    so nothing can be sent."""
    source = StaticSource([recorded_original(k, RECORDED_AT + 2 * k) for k in (0, 1)])
    app = DashApp(source, interval=3600, read_only="NSQCTL_READ_ONLY")
    told = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await first_poll(pilot)
        await pilot.press("t")  # pause the selected topic
        assert isinstance(app.screen, MainScreen)  # no ConfirmScreen on top
        await pilot.press("enter", "p", "e")
        assert isinstance(app.screen, TopicScreen)  # no ConfirmScreen on top
        assert not app.screen.query("ConfirmScreen")
    assert told == [
        "read-only (from NSQCTL_READ_ONLY): pause topic events changes the cluster; not sent",
        "read-only (from NSQCTL_READ_ONLY): unpause channel events/archive changes the cluster; "
        "not sent",
        "read-only (from NSQCTL_READ_ONLY): empty channel events/archive changes the cluster; "
        "not sent",
    ], told
