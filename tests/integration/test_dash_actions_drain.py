"""The node screen's drain and restore, driven with Textual's pilot against real servers.

``d`` shows the drain's plan in the dry run's words and asks; a no changes nothing, a
yes runs the library drain in a thread while the screen shows its progress; ``u`` shows
what a restore undoes and undoes it; ``c`` cancels a running drain, which is then recorded
as given up, as ``nsqctl node list`` (another process, reading the state directory) says.
A drain that would leave a partition unwritable is refused before anything is asked.

The redesign drain moves leaders, and the original one tombstones the node's topics: each
runs on a private cluster (3 nsqd redesign: a leader has in-sync copies to go to; 1 nsqd
original). The refusal needs no change and uses the session cluster: on 2 nsqds a topic
of 2 replicas cannot lose either copy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.widgets import Label, Static

from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.sources import StaticSource
from nsqctl.tui.app import DashApp
from tests.conftest import StartCluster
from tests.helpers.cli import clean_env, run_cli
from tests.helpers.clusters import running_cluster
from tests.helpers.failover import leader_of
from tests.helpers.redesign import TopicSpec, create_topics, unique
from tests.helpers.stats import recorded_original
from tests.integration.test_dash import RECORDED_AT, SIZE, first_poll, until
from tests.integration.test_dash_actions import NotedApp, record_notes, shown

LONG = 600  # tries of 0.1 s: a drain or restore waits on youzan's elections


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The state directory the dashboard's drains record in (and `node list` reads)."""
    path = tmp_path / "state"
    monkeypatch.setenv("NSQCTL_STATE_DIR", str(path))
    return path


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from running_cluster("redesign", tmp_path_factory.mktemp("dashdrain"), nsqd=3)


def node_list(c: Cluster, state: Path) -> str:
    """``nsqctl node list``'s line for each nsqd, from another process."""
    env = clean_env({"NSQCTL_STATE_DIR": str(state)})
    proc = run_cli(["node", "list", "--lookupd", c.lookupd_http[0]], env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def job_text(app: DashApp) -> str:
    return str(app.screen.query_one("#node-job", Static).render())


def dialog(app: DashApp, label: str = "question") -> str:
    return str(app.screen.query_one(f"#{label}", Label).render())


def recorded(state: Path, node: str) -> dict[str, Any]:
    return json.loads((state / "drains.json").read_text())["drains"][node]  # type: ignore[no-any-return]


@pytest.mark.redesign
@pytest.mark.timeout(300)
async def test_drain_and_restore_a_redesign_nsqd_from_its_screen(
    three: Cluster, state: Path
) -> None:
    c = three
    topic = unique("ddrain")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=3)})
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        await producer.publish_many(topic, [b"m"] * 20)
    node = leader_of(c, topic).http_address
    app = NotedApp(c)
    async with app.run_test(size=(200, 50)) as pilot:
        await first_poll(pilot)
        await pilot.press("colon", *node, "enter")
        assert shown(app, "NsqdScreen")

        await pilot.press("d")
        await until(pilot, lambda: shown(app, "ConfirmScreen"), "the drain's plan", LONG)
        question = dialog(app)
        assert f"About to drain nsqd {node}:" in question
        assert f"drain {node} (redesign): " in question  # the dry run's words
        assert f"move {topic} partition 0 leader {node} -> " in question
        assert question.rstrip().endswith("proceed? (y/N)")
        await pilot.press("n")
        assert shown(app, "NsqdScreen")
        assert leader_of(c, topic).http_address == node  # a no moved nothing
        assert not (state / "drains.json").exists()

        await pilot.press("d")
        await until(pilot, lambda: shown(app, "ConfirmScreen"), "the drain's plan", LONG)
        await pilot.press("y")
        await until(pilot, lambda: "drain of" in job_text(app), "the drain's progress")
        await until(pilot, lambda: "safe to stop" in job_text(app), "the drain done", LONG)
        text = job_text(app)
        assert f"{node} drained in" in text and f"moved {topic} partition 0 leader to" in text
        assert leader_of(c, topic).http_address != node
        assert recorded(state, node)["state"] == "drained"
        listed = next(line for line in node_list(c, state).splitlines() if line.startswith(node))
        assert listed.split()[-1] == "drained", listed
        await until(pilot, lambda: any("safe to stop" in n for n in app.notes), "the end said")

        await pilot.press("u")
        await until(pilot, lambda: shown(app, "ConfirmScreen"), "the restore's plan")
        question = dialog(app)
        assert f"About to restore nsqd {node} (redesign, drain drained):" in question
        assert f"move {topic} partition 0 leader " in question and f" -> {node}" in question
        await pilot.press("y")
        await until(pilot, lambda: f"{node} restored" in job_text(app), "the restore done", LONG)
        assert leader_of(c, topic).http_address == node
        assert recorded(state, node)["state"] == "restored"


def _post(url: str) -> None:
    resp = httpx.post(url, timeout=10)
    assert resp.status_code == 200, (url, resp.text)


def _listed(c: Cluster, topic: str) -> bool:
    resp = httpx.get(f"http://{c.lookupd_http[0]}/lookup", params={"topic": topic}, timeout=10)
    return resp.status_code == 200 and bool(resp.json().get("producers"))


@pytest.mark.original
@pytest.mark.timeout(180)
async def test_cancel_an_original_drain_then_restore(
    start_cluster: StartCluster, state: Path
) -> None:
    """A channel nobody consumes keeps the drain running; c cancels it: the record says it
    gave up, interrupted, for `nsqctl node list` too; u has nsqlookupd list the nsqd again.
    A drain still running when the dashboard is left is cancelled and recorded alike."""
    c = start_cluster("original", nsqd=1)
    node, topic = c.nsqd_http[0], unique("dcancel")
    _post(f"http://{node}/topic/create?topic={topic}")
    _post(f"http://{node}/channel/create?topic={topic}&channel=idle")
    async with Producer(nsqd_tcp=[c.nsqd_tcp[0]]) as producer:
        await producer.publish_many(topic, [b"i"] * 7)
    app = NotedApp(c)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: _listed(c, topic), "nsqlookupd to list the nsqd")
        await first_poll(pilot)
        await pilot.press("colon", *node, "enter", "d")
        await until(pilot, lambda: shown(app, "ConfirmScreen"), "the drain's plan", LONG)
        question = dialog(app)
        assert f"drain {node} (original): 7 messages on it now" in question
        assert f"topic={topic}" in question and "/topic/tombstone" in question
        await pilot.press("y")
        await until(pilot, lambda: "7 messages left" in job_text(app), "the progress", LONG)
        await until(pilot, lambda: not _listed(c, topic), "the topic tombstoned")
        assert recorded(state, node)["state"] == "draining"
        await pilot.press("c")
        await until(pilot, lambda: "was cancelled" in job_text(app), "the drain cancelled", LONG)
        assert recorded(state, node)["state"] == "stopped"
        listed = next(line for line in node_list(c, state).splitlines() if line.startswith(node))
        assert "gave up: interrupted after" in listed, listed

        await pilot.press("u")
        await until(pilot, lambda: shown(app, "ConfirmScreen"), "the restore's plan")
        assert "reconnect to its nsqlookupds" in dialog(app)
        await pilot.press("y")
        await until(pilot, lambda: f"{node} restored" in job_text(app), "the restore", LONG)
        assert _listed(c, topic)
        assert recorded(state, node)["state"] == "restored"

        await pilot.press("d")  # then leave the dashboard while it drains
        await until(pilot, lambda: shown(app, "ConfirmScreen"), "the drain's plan", LONG)
        await pilot.press("y")
        await until(pilot, lambda: "7 messages left" in job_text(app), "the progress", LONG)
    # leaving cancelled it, and it recorded that before the app ended
    assert recorded(state, node)["state"] == "stopped"
    assert recorded(state, node)["detail"].startswith("interrupted after")


@pytest.mark.redesign
async def test_a_drain_that_would_leave_a_partition_unwritable_is_refused(
    redesign_cluster: Cluster, state: Path
) -> None:
    c = redesign_cluster
    topic = unique("drefuse")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=2)})
    node = leader_of(c, topic).http_address
    app = NotedApp(c)
    async with app.run_test(size=(200, 50)) as pilot:
        await first_poll(pilot)
        await pilot.press("colon", *node, "enter", "d")
        await until(pilot, lambda: shown(app, "NoticeScreen"), "the refusal", LONG)
        notice = dialog(app, "notice")
        assert f"{node} cannot be drained now:" in notice and "do not stop it" in notice
        assert f"  {topic}/0: stopping {node} leaves 1 in-sync copy" in notice
        await pilot.press("escape")
        assert shown(app, "NsqdScreen")
    assert leader_of(c, topic).http_address == node
    assert not (state / "drains.json").exists()  # nothing was asked, nothing recorded


async def test_drain_restore_and_cancel_refused_under_read_only(state: Path) -> None:
    source = StaticSource([recorded_original(k, RECORDED_AT + 2 * k) for k in (0, 1)])
    app = DashApp(source, interval=3600, read_only="--read-only")
    told = record_notes(app)
    async with app.run_test(size=SIZE) as pilot:
        await first_poll(pilot)
        assert app.view is not None
        node = app.view.nodes[0].address
        await pilot.press("colon", *node, "enter", "d", "u", "c")
        assert shown(app, "NsqdScreen")
        await pilot.pause()
    assert told == [
        f"read-only (from --read-only): drain nsqd {node} changes the cluster; not sent",
        f"read-only (from --read-only): restore nsqd {node} changes the cluster; not sent",
        f"no drain or restore of {node} runs here",
    ], told
    assert not (state / "drains.json").exists()
