"""``nsqctl dash`` (nsqctl.tui.app.DashApp): snapshots of payloads recorded from real servers of
both families (deterministic), and pilot runs against live clusters: a known consumer's
RDY and a dead nsqd on the original family; leaders, replicas, ISR, RDY and in-flight of a
partitioned, replicated topic on the redesign. On both, the dashboard polls each nsqd
without clients and the open topic with them: the topics list is checked before a topic is
opened (client counts without the clients), the channel screen after."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from nsqctl import admin
from nsqctl.consumer import Consumer, ConsumerOptions
from nsqctl.lookup.client import ACCEPT_V1
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers import cluster, process
from nsqctl.stats.model import ChannelStats
from nsqctl.stats.offline import snapshot_from_files
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.read import fetch_nsqd_stats, stats_params
from nsqctl.stats.recording import RecordingTransport, play_back
from nsqctl.stats.sources import StaticSource, StatsSession
from nsqctl.tui import rows
from nsqctl.tui.app import DashApp
from nsqctl.tui.modals import HelpScreen
from nsqctl.tui.rowtable import RowTable
from nsqctl.tui.screens import ChannelScreen, MainScreen, TopicScreen
from tests.conftest import StartCluster
from tests.helpers.names import unique

DATA = Path(__file__).resolve().parent.parent / "data" / "stats"
A, B = "127.0.0.1:4151", "127.0.0.1:4251"
RECORDED_AT = 1795292700.0  # just after the recording's connect_ts, so ages are small and fixed
SIZE = (180, 40)


def recorded_original_app() -> DashApp:
    snaps = [
        snapshot_from_files(
            {A: DATA / f"original_nsqd_a_t{k}.json", B: DATA / f"original_nsqd_b_t{k}.json"},
            taken_at=RECORDED_AT + 2 * k,
        )
        for k in (0, 1)
    ]
    return DashApp(StaticSource(snaps), interval=3600)


def recorded_redesign_app() -> DashApp:
    """The recorded t0/t1 polls of a 4-nsqd youzan cluster, every topic's ISR asked."""
    snaps = asyncio.run(play_back(DATA / "redesign_manifest.json", ["t0", "t1"], focus=None))
    return DashApp(StaticSource(snaps), interval=3600)


async def first_poll(pilot: Pilot[None]) -> None:
    await until(pilot, lambda: pilot.app.polls >= 1, "the first poll")  # type: ignore[attr-defined]


async def until(
    pilot: Pilot[None],
    cond: Callable[[], bool],
    what: str | Callable[[], str],
    tries: int = 150,
    timeout: float | None = None,
) -> None:
    """Let the app run until ``cond`` holds: bounded by a try count (not a timing claim) and
    by ``timeout`` seconds (by default half a second a try), because each pause first waits
    for the screen to catch up, which on a loaded machine can take seconds: a count alone
    then outlasts the test's timeout, which says nothing of what was waited for. ``what``
    may be a callable, asked at the end (the last state seen)."""
    bound = tries * 0.5 if timeout is None else timeout
    start = time.monotonic()
    for _ in range(tries):
        if cond():
            return
        if time.monotonic() - start > bound:
            break
        await pilot.pause(0.1)
    said = what if isinstance(what, str) else what()
    raise AssertionError(
        f"the dashboard never showed {said} (waited {time.monotonic() - start:.0f}s)"
    )


async def open_topic_once_in_flight(
    pilot: Pilot[None],
    app: DashApp,
    topic: str,
    channel: str,
    in_flight: int,
    listed: dict[str, str],
) -> None:
    """Wait until the channel shows ``in_flight`` messages; check the topics list shows
    the topic's ``listed`` columns and that the channel's consumers (``listed["clients"]``)
    were counted though none was listed (the dashboard asks nsqd for the clients of the
    open topic only); then filter to the topic and open it."""

    def held() -> bool:
        t = app.view.topic(topic) if app.view else None
        ch = t.channel(channel) if t else None
        return bool(ch and ch.in_flight == in_flight)

    await until(pilot, held, f"{in_flight} messages in flight")
    row = {r[0]: r for r in cells(app, "topics")}[topic]
    col = {name: i for i, name in enumerate(rows.TOPIC_COLUMNS)}
    assert {k: row[col[k]] for k in listed if k != "clients"} == {
        k: v for k, v in listed.items() if k != "clients"
    }
    lean = app.view.topic(topic).channel(channel)  # type: ignore[union-attr]
    assert lean is not None and not lean.clients_listed and lean.ready is None
    assert str(lean.client_count) == listed["clients"]
    title = app.screen.query_one("#topics-title", Static).content
    assert rows.CLIENTS_NOTE in str(title)
    await pilot.press("slash", *topic, "enter", "enter")
    assert isinstance(app.screen, TopicScreen) and app.screen.topic == topic


def stats_asked(transport: RecordingTransport) -> list[dict[str, str]]:
    """The query of every ``/stats`` request the dashboard made."""
    urls = [urlsplit(ex.url) for ex in transport.exchanges]
    return [dict(parse_qsl(u.query)) for u in urls if u.path == "/stats"]


def assert_clients_asked_for(transport: RecordingTransport, topic: str, channel: str) -> None:
    """Every nsqd was asked without clients, and with them for ``topic`` (the topic screen)
    and its ``channel`` (the channel screen) only, never another's."""
    asked = stats_asked(transport)
    assert stats_params(clients=False) in asked
    detailed = [q for q in asked if q.get("needClients") == "true"]
    assert {(q.get("topic"), q.get("channel")) for q in detailed} == {
        (topic, None),
        (topic, channel),
    }


def cells(app: DashApp, table_id: str) -> list[list[str]]:
    table = app.screen.query_one(f"#{table_id}", RowTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


# ------------------------------------------------------------------ snapshots (recorded data)


SCREENS: dict[str, tuple[Callable[[], DashApp], list[str]]] = {
    "original-main": (recorded_original_app, []),
    # topics sorted by name: events, orders → orders
    "original-topic": (recorded_original_app, ["down", "enter"]),
    # orders → channels audit, billing → billing
    "original-channel": (recorded_original_app, ["down", "enter", "down", "enter"]),
    "redesign-main": (recorded_redesign_app, []),
    # events, orders → orders: 2 partitions × 2 replicas, ISR, channels
    "redesign-topic": (recorded_redesign_app, ["down", "enter"]),
    # orders → audit, billing, slow → slow: RDY 1 on one partition, 0 (stalled) on the other
    "redesign-channel": (recorded_redesign_app, ["down", "enter", "down", "down", "enter"]),
}


@pytest.mark.parametrize("screen", list(SCREENS))
def test_snapshot(snap_compare: Callable[..., bool], screen: str) -> None:
    make, press = SCREENS[screen]
    assert snap_compare(make(), press=press, terminal_size=SIZE, run_before=first_poll)


async def test_filter_sort_help_and_open_on_recorded_data() -> None:
    app = recorded_original_app()
    async with app.run_test(size=SIZE) as pilot:
        await first_poll(pilot)
        assert [r[0] for r in cells(app, "topics")] == ["events", "orders"]
        await pilot.press("slash", "o", "r", "d")
        assert [r[0] for r in cells(app, "topics")] == ["orders"]
        await pilot.press("escape")
        assert len(cells(app, "topics")) == 2
        await pilot.press("s")  # sort by depth: orders is deeper
        assert [r[0] for r in cells(app, "topics")] == ["orders", "events"]
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        await pilot.press("enter")
        assert isinstance(app.screen, TopicScreen) and app.screen.topic == "orders"


async def test_channel_filter_on_recorded_data() -> None:
    """``/`` on a topic filters its channels by substring; escape clears the filter first,
    then leaves the topic."""
    app = recorded_original_app()
    async with app.run_test(size=SIZE) as pilot:
        await first_poll(pilot)
        await pilot.press("down", "enter")  # events, orders → orders
        assert isinstance(app.screen, TopicScreen) and app.screen.topic == "orders"
        assert [r[0] for r in cells(app, "channels")] == ["audit", "billing"]
        await pilot.press("slash", "B", "i", "l")
        assert [r[0] for r in cells(app, "channels")] == ["billing"]
        await pilot.press("enter", "escape")
        assert isinstance(app.screen, TopicScreen)
        assert [r[0] for r in cells(app, "channels")] == ["audit", "billing"]
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


# ------------------------------------------------------------------ live clusters


async def test_live_consumer_rdy_and_starvation_shown(original_cluster: cluster.Cluster) -> None:
    """A consumer with max_in_flight 5 that holds every message: the channel screen shows
    RDY 5, 5 in flight, starved; pausing it through the dashboard asks first (no: nothing
    changes) and, answered yes, reaches nsqd."""
    c = original_cluster
    topic = unique("rdy")
    async with Producer(nsqd_tcp=[c.nsqd_tcp[0]]) as producer:
        await producer.publish_many(topic, [f"m{i}".encode() for i in range(20)])
    release = asyncio.Event()

    async def hold(msg: Message) -> None:
        await release.wait()

    consumer = Consumer(
        topic, "held", hold, nsqd_tcp=[c.nsqd_tcp[0]], options=ConsumerOptions(max_in_flight=5)
    )
    await consumer.start()
    transport = RecordingTransport()
    poller = StatsPoller(c.lookupd_http, [], timeout=2.0, transport=transport)
    app = DashApp(StatsSession(poller), interval=0.3)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            listed = {"depth": "15", "msgs": "20", "channels": "1", "clients": "1"}
            await open_topic_once_in_flight(pilot, app, topic, "held", 5, listed)
            channels = cells(app, "channels")
            assert channels[0][0] == "held" and channels[0][1] == "15"  # depth 20 - 5
            await pilot.press("enter")
            assert isinstance(app.screen, ChannelScreen)
            await until(pilot, lambda: len(cells(app, "clients")) == 1, "one client row")
            row = cells(app, "clients")[0]
            assert row[4] == c.nsqd_http[0]  # nsqd
            assert (row[5], row[6]) == ("5", "5")  # rdy, in-flight
            assert row[12].startswith("nsqctl/")  # user agent
            assert row[14] == "starved"
            # planned afresh and checked as the CLI does before the question, in a worker
            await pilot.press("p")
            await until(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", "the question")
            await pilot.press("n")  # no: nothing sent
            assert isinstance(app.screen, ChannelScreen)
            assert app.view is not None and not app.view.topic(topic).channel("held").paused  # type: ignore[union-attr]
            await pilot.press("p")
            await until(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", "again")
            await pilot.press("y")
            await until(
                pilot,
                lambda: bool(app.view and app.view.topic(topic).channel("held").paused),  # type: ignore[union-attr]
                "the channel paused",
            )
    finally:
        release.set()
        await consumer.stop(timeout=5)
    assert_clients_asked_for(transport, topic, "held")


async def test_dead_nsqd_shown_down_while_the_rest_updates(start_cluster: StartCluster) -> None:
    c = start_cluster("original", nsqd=2)
    topic = unique("dead")
    for tcp in c.nsqd_tcp:
        async with Producer(nsqd_tcp=[tcp]) as producer:
            await producer.publish_many(topic, [b"x"] * 10)
    poller = StatsPoller(c.lookupd_http, [], timeout=1.0)
    app = DashApp(StatsSession(poller), interval=0.3)
    async with app.run_test(size=(200, 50)) as pilot:

        def partitions(n: int) -> Callable[[], bool]:
            def check() -> bool:
                t = app.view.topic(topic) if app.view else None
                return bool(t and len(t.partitions) == n)

            return check

        await until(pilot, partitions(2), "the topic on both nsqd")
        process.kill_hard(c.nsqds[1])
        async with Producer(nsqd_tcp=[c.nsqd_tcp[0]]) as producer:
            await producer.publish_many(topic, [b"y"] * 7)

        def updated() -> bool:
            rows = {r[0]: r for r in cells(app, "nodes")}
            dead = rows.get(c.nsqd_http[1])
            topic_rows = {r[0]: r for r in cells(app, "topics")}
            return bool(dead and dead[2] == "down" and topic_rows.get(topic, [""] * 3)[2] == "17")

        await until(pilot, updated, "nsqd 2 down and the topic depth from nsqd 1 (17)")
        live = {r[0]: r for r in cells(app, "nodes")}[c.nsqd_http[0]]
        assert live[2] == "up"
        await pilot.press("question_mark")  # still answering keys
        assert isinstance(app.screen, HelpScreen)


@dataclass
class RedesignTruth:
    """What the servers themselves say about a topic, read apart from the dashboard."""

    leaders: dict[int, str] = field(default_factory=dict)  # lookupd /lookup partitions
    replicas: dict[int, list[str]] = field(default_factory=dict)  # other nsqds holding it
    isr: dict[int, list[str]] = field(default_factory=dict)  # leader /coordinator/stats
    channel: dict[int, ChannelStats] = field(default_factory=dict)  # on each leader


async def redesign_truth(c: cluster.Cluster, topic: str, channel: str) -> RedesignTruth:
    truth = RedesignTruth()
    async with httpx.AsyncClient(timeout=5, headers={"Accept": ACCEPT_V1}) as http:
        lookupd = c.lookupd_http[0]
        found = (await http.get(f"http://{lookupd}/lookup?topic={topic}&access=r")).json()
        for part, peer in found["partitions"].items():
            truth.leaders[int(part)] = f"{peer['broadcast_address']}:{peer['http_port']}"
        nodes = (await http.get(f"http://{lookupd}/nodes")).json()["producers"]
        http_of = {}
        for n in nodes:
            host = n["broadcast_address"]
            http_of[f"{host}:{n['tcp_port']}"] = f"{host}:{n['http_port']}"
        for address in c.nsqd_http:
            node = await fetch_nsqd_stats(http, address, topic=topic)
            for t in node.topics:
                part = t.partition
                assert part is not None  # a redesign topic is partitioned
                if address != truth.leaders.get(part):
                    truth.replicas.setdefault(part, []).append(address)
                    continue
                found_channel = t.channel(channel)
                if found_channel is not None:
                    truth.channel[part] = found_channel
                coord = (await http.get(f"http://{address}/coordinator/stats?topic={topic}")).json()
                for item in coord["topic_coord_stats"]:
                    if item["partition"] == part:  # node id: ip:rpc_port:tcp_port:n
                        ids = [i["node_id"].split(":") for i in item["isr_stats"]]
                        truth.isr[part] = [http_of[f"{i[0]}:{i[2]}"] for i in ids]
    return truth


async def test_redesign_partitions_leaders_isr_rdy_in_flight_live(
    start_cluster: StartCluster,
) -> None:
    """A 2-partition, 2-replica topic on 4 youzan nsqd and a consumer holding what it gets
    (max_in_flight 4): the topic screen shows each partition's leader, replica and ISR as
    nsqlookupd and the nsqds report them, the channel screen each partition's RDY and
    in-flight; the redesign's channel depth counts the in-flight messages too."""
    c = start_cluster("redesign", nsqd=4)  # unordered 2 × 2 needs 4 nsqd
    topic = unique("isr")
    await asyncio.to_thread(admin.create_topic, c.lookupd_http, topic, partitions=2, replicas=2)
    release = asyncio.Event()

    async def hold(msg: Message) -> None:
        await release.wait()

    consumer = Consumer(
        topic, "held", hold, lookupd_http=c.lookupd_http, options=ConsumerOptions(max_in_flight=4)
    )
    await consumer.start()
    try:
        for _ in range(150):  # subscribed on both partitions before anything is published
            truth = await redesign_truth(c, topic, "held")
            if len(truth.channel) == 2 and all(ch.clients for ch in truth.channel.values()):
                break
            await asyncio.sleep(0.1)
        async with Producer(lookupd_http=c.lookupd_http) as producer:
            for part in (0, 1):
                await producer.publish_many(topic, [b"m"] * 10, partition=part)
        transport = RecordingTransport()
        poller = StatsPoller(c.lookupd_http, [], timeout=2.0, transport=transport)
        app = DashApp(StatsSession(poller), interval=0.3)
        async with app.run_test(size=(200, 50)) as pilot:
            # the redesign's channel depth counts the 4 in flight; 2 partitions, 1 consumer each
            listed = {"parts": "2", "depth": "20", "msgs": "20", "clients": "2"}
            await open_topic_once_in_flight(pilot, app, topic, "held", 4, listed)
            isr_col = rows.PARTITION_COLUMNS.index("isr")
            await until(
                pilot,
                lambda: all(r[isr_col] != rows.PENDING for r in cells(app, "partitions")),
                "the ISR of the open topic",
            )
            truth = await redesign_truth(c, topic, "held")
            assert sorted(truth.leaders) == [0, 1] and len(set(truth.leaders.values())) == 2
            shown = {int(r[0]): r for r in cells(app, "partitions")}
            assert sorted(shown) == [0, 1]
            for part, row in shown.items():
                assert row[1] == truth.leaders[part]
                assert row[2] == ", ".join(truth.replicas[part]) and len(truth.replicas[part]) == 1
                assert row[isr_col] == ", ".join(truth.isr[part])
                assert set(truth.isr[part]) == {truth.leaders[part], *truth.replicas[part]}
                assert row[isr_col + 1] == "-" and row[isr_col + 2] == "yes"  # catch-up, write
            channel = {r[0]: r for r in cells(app, "channels")}["held"]
            col = {name: i for i, name in enumerate(rows.CHANNEL_COLUMNS)}
            assert channel[col["in-flight"]] == "4" and channel[col["rdy"]] == "4"
            assert channel[col["depth"]] == "20"  # not confirmed yet: in flight included
            assert channel[col["depth"]] == str(sum(ch.depth for ch in truth.channel.values()))
            await pilot.press("t")  # no topic pause on the redesign: said, not asked
            assert isinstance(app.screen, TopicScreen)
            await pilot.press("enter")
            assert isinstance(app.screen, ChannelScreen)
            await until(pilot, lambda: len(cells(app, "clients")) == 2, "a client per partition")
            col = {name: i for i, name in enumerate(rows.CLIENT_COLUMNS)}
            for _ in range(50):  # the screen lags the servers by at most a poll
                shown_clients = sorted(
                    (r[col["part"]], r[col["nsqd"]], r[col["rdy"]], r[col["in-flight"]])
                    for r in cells(app, "clients")
                )
                truth = await redesign_truth(c, topic, "held")
                served = sorted(
                    (str(p), truth.leaders[p], str(cl.ready_count), str(cl.in_flight_count))
                    for p, ch in truth.channel.items()
                    for cl in ch.clients
                )
                if shown_clients == served:
                    break
                await pilot.pause(0.1)
            assert shown_clients == served
            assert sum(int(r[3]) for r in served) == 4 and {r[0] for r in served} == {"0", "1"}
        assert_clients_asked_for(transport, topic, "held")
    finally:
        release.set()
        await consumer.stop(timeout=5)
