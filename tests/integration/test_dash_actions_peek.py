"""``v`` on a channel: its next messages, driven with Textual's pilot on the session clusters.

Redesign: read in place as ``nsqctl peek`` reads them, so nothing is asked, read-only
allows it, and the channel holds as many as before. Original: borrowed as ``peek
--borrow`` does, so the CLI's warning is asked first (a no takes nothing), the borrowed
messages are given back, and read-only refuses it; the borrow connects with the TLS and
AUTH the dashboard was started with. ``m`` (a leader move) is refused under read-only too.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
from textual.widgets import Label, Static

from nsqctl.connection import ConnectionConfig, TLSSettings
from nsqctl.producer import Producer
from nsqctl.secrets import Secret
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.read import fetch_nsqd_stats
from nsqctl.tui.app import DashApp
from nsqctl.tui.peekscreen import PEEK_COLUMNS
from nsqctl.tui.rowtable import RowTable
from nsqctl.tui.screens import TopicScreen
from tests.conftest import StartCluster
from tests.helpers.auth_server import AuthServer
from tests.helpers.certs import make_tls_files, nsqd_tls_args
from tests.helpers.redesign import TopicSpec, channel_depths, create_topics, unique
from tests.integration.test_dash import SIZE, cells, first_poll, recorded_redesign_app, until
from tests.integration.test_dash_actions import NotedApp, record_notes, shown

BODIES = [b"peek-%d" % i for i in range(5)]
BODY = PEEK_COLUMNS.index("body")


def summary(app: DashApp) -> str:
    return str(app.screen.query_one("#peek-summary", Static).render())


def bodies(app: DashApp) -> list[str]:
    table = app.screen.query_one("#peek-messages", RowTable)
    return sorted(str(table.get_row_at(i)[BODY]) for i in range(table.row_count))


async def open_channel(app: DashApp, pilot, topic: str) -> None:  # type: ignore[no-untyped-def]
    await first_poll(pilot)
    await pilot.press("colon", *topic, "enter")
    assert isinstance(app.screen, TopicScreen)
    await until(pilot, lambda: bool(cells(app, "channels")), "the channel row")


async def test_peek_a_redesign_channel_in_place_under_read_only(redesign_cluster: Cluster) -> None:
    c = redesign_cluster
    topic = unique("dpeek")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2)}, channels=("held",))
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        await producer.publish_many(topic, BODIES)
    before = await asyncio.to_thread(channel_depths, c, topic, "held")
    assert sum(before.values()) == len(BODIES)
    app = NotedApp(c)
    app.read_only = "--read-only"  # a peek only reads: allowed
    async with app.run_test(size=(200, 50)) as pilot:
        await open_channel(app, pilot, topic)
        await pilot.press("v")
        assert shown(app, "PeekScreen")
        await until(pilot, lambda: "nothing was consumed" in summary(app), "the messages")
        assert bodies(app) == [b.decode() for b in BODIES]
        assert f"the next {len(BODIES)} message(s) of {topic}/held" in summary(app)
        await pilot.press("escape")
        assert isinstance(app.screen, TopicScreen)
    assert await asyncio.to_thread(channel_depths, c, topic, "held") == before


async def held(c: Cluster, topic: str) -> tuple[int, int]:
    """(depth, in flight) of channel ``held`` on the first nsqd."""
    async with httpx.AsyncClient(timeout=5) as http:
        node = await fetch_nsqd_stats(http, c.nsqd_http[0], topic=topic)
    ch = node.channel(topic, "held")
    assert ch is not None
    return ch.depth, ch.in_flight_count


async def test_borrow_from_an_original_channel_asks_first(original_cluster: Cluster) -> None:
    c = original_cluster
    topic, nsqd, other = unique("dborrow"), c.nsqd_http[0], c.nsqd_http[1]
    async with httpx.AsyncClient(timeout=5) as http:
        for path in (f"topic/create?topic={topic}", f"channel/create?topic={topic}&channel=held"):
            assert (await http.post(f"http://{nsqd}/{path}")).status_code == 200
        resp = await http.post(f"http://{nsqd}/mpub?topic={topic}", content=b"\n".join(BODIES))
        assert resp.status_code == 200
        # one more message on the other nsqd, where the channel is paused: out of reach
        for path in (
            f"topic/create?topic={topic}",
            f"channel/create?topic={topic}&channel=held",
            f"pub?topic={topic}",
            f"channel/pause?topic={topic}&channel=held",
        ):
            assert (await http.post(f"http://{other}/{path}", content=b"far")).status_code == 200
    app = NotedApp(c)
    async with app.run_test(size=(200, 50)) as pilot:
        await open_channel(app, pilot, topic)
        await pilot.press("v")
        await until(pilot, lambda: shown(app, "ConfirmScreen"), "the borrow's question")
        question = str(app.screen.query_one("#question", Label).render())
        assert f"About to borrow up to 10 message(s) from {topic}/held" in question
        assert "its attempts rise by one and it may now come after newer messages" in question
        await pilot.press("n")
        assert shown(app, "PeekScreen") and "nothing borrowed" in summary(app)
        assert await held(c, topic) == (len(BODIES), 0)

        await pilot.press("r")
        await until(pilot, lambda: shown(app, "ConfirmScreen"), "the borrow's question")
        await pilot.press("y")
        await until(pilot, lambda: "borrowed and given back" in summary(app), "the borrowed", 300)
        assert bodies(app) == [b.decode() for b in BODIES]
        assert f"paused on nsqd {other} (1 waiting): not borrowed" in summary(app)

        await pilot.press("escape")
        app.read_only = "NSQCTL_READ_ONLY"
        told = record_notes(app)
        await pilot.press("v")
        assert shown(app, "PeekScreen") and not app.screen.query("ConfirmScreen")
        assert "borrowing is refused under read-only" in summary(app)
        assert told == [
            f"read-only (from NSQCTL_READ_ONLY): borrow messages from {topic}/held changes "
            "the cluster; not sent"
        ]
    assert await held(c, topic) == (len(BODIES), 0)  # every one given back


async def backlog_over_http(c: Cluster, topic: str) -> None:
    """:data:`BODIES` waiting in channel ``held`` of the first nsqd."""
    nsqd = c.nsqd_http[0]
    async with httpx.AsyncClient(timeout=5) as http:
        for path in (f"topic/create?topic={topic}", f"channel/create?topic={topic}&channel=held"):
            assert (await http.post(f"http://{nsqd}/{path}")).status_code == 200
        resp = await http.post(f"http://{nsqd}/mpub?topic={topic}", content=b"\n".join(BODIES))
        assert resp.status_code == 200


async def test_borrow_connects_with_the_dashboards_tls_and_auth(
    start_cluster: StartCluster, tmp_path: Path
) -> None:
    """An nsqd that takes TCP clients only over TLS and with an AUTH secret: the dashboard
    started with them borrows through them, as ``peek --borrow`` does with the same
    settings (its HTTP polls need neither)."""
    secret = f"dash-s3cret-{uuid.uuid4().hex}"
    tls = make_tls_files(tmp_path / "tls")
    with AuthServer(secret) as auth:
        args = [*nsqd_tls_args(tls), "--tls-required=tcp-https"]
        c = start_cluster(
            "original", nsqd=1, nsqd_args=[*args, f"--auth-http-address={auth.address}"]
        )
        topic = unique("dborrowtls")
        await backlog_over_http(c, topic)
        app = NotedApp(c)
        app.connection = ConnectionConfig(
            tls=TLSSettings(ca_file=str(tls.ca_cert)), auth_secret=Secret(secret)
        )
        async with app.run_test(size=(200, 50)) as pilot:
            await open_channel(app, pilot, topic)
            await pilot.press("v")
            await until(pilot, lambda: shown(app, "ConfirmScreen"), "the borrow's question")
            await pilot.press("y")
            ends = ("borrowed and given back", f"borrow from {topic}/held:")  # or an error
            await until(pilot, lambda: any(e in summary(app) for e in ends), "an end", 300)
            assert ends[0] in summary(app), summary(app)
            assert bodies(app) == [b.decode() for b in BODIES]
            assert secret not in summary(app) and not any(secret in n for n in app.notes)
        assert [(q["secret"], q["tls"]) for q in auth.queries] == [(secret, "true")]
        assert await held(c, topic) == (len(BODIES), 0)  # every one given back


def test_leader_move_refused_under_read_only() -> None:
    app = recorded_redesign_app()
    app.read_only = "a profile"

    async def drive() -> list[str]:
        async with app.run_test(size=SIZE) as pilot:
            await first_poll(pilot)
            await pilot.press("down", "enter")
            assert isinstance(app.screen, TopicScreen) and app.screen.topic == "orders"
            told = record_notes(app)
            await pilot.press("m")
            assert isinstance(app.screen, TopicScreen)  # no nsqd to pick, no question
            return told

    assert asyncio.run(drive()) == [
        "read-only (from a profile): move the leader of orders partition 0 changes the "
        "cluster; not sent"
    ]
