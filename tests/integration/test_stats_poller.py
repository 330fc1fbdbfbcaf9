"""The stats poller against real clusters: one nsqlookupd frozen (SIGSTOP), which accepts
connections and never answers, the worst kind of dead node for a poller; a redesign
cluster polled without lookupd, where naming ISR members needs each nsqd's /info; and a
poll recorded through its httpx transport alone, lookupds' requests included, played
back."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from nsqctl import admin
from nsqctl.errors import TransportError
from nsqctl.producer import Producer
from nsqctl.servers import cluster
from nsqctl.stats import fetch_nsqd_stats, read_nsqd_stats
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.recording import RecordingTransport, play_back, write_recording
from nsqctl.stats.view import build_view
from tests.conftest import StartCluster
from tests.helpers.settled import copied_to_channel


async def test_a_frozen_lookupd_is_shown_down_while_the_rest_is_polled(
    start_cluster: StartCluster,
) -> None:
    c: cluster.Cluster = start_cluster("original", nsqd=1, lookupd=2)
    live, frozen = c.lookupds
    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        async with StatsPoller(c.lookupd_http, timeout=1.0) as poller:
            snap = await poller.snapshot()
            again = await poller.snapshot()
    finally:
        os.kill(frozen.pid, signal.SIGCONT)  # so that stopping it by PID works
    for shot in (snap, again):
        status = {s.address: s.ok for s in shot.lookupds}
        assert status == {
            f"127.0.0.1:{live.http_port}": True,
            f"127.0.0.1:{frozen.http_port}": False,
        }
        assert [n.address for n in shot.nodes] == c.nsqd_http
        assert [n.state for n in shot.nodes] == ["up"]


async def test_redesign_isr_without_lookupd_via_each_nsqd_info(
    redesign_cluster: cluster.Cluster,
) -> None:
    """Given nsqd addresses only, the poller learns each nsqd's TCP address from its /info
    (once) to name ISR members, and asks /coordinator/stats only for the topic in focus."""
    c: cluster.Cluster = redesign_cluster
    topic = f"pl_{uuid.uuid4().hex[:10]}"
    other = f"pl_{uuid.uuid4().hex[:10]}"
    for name in (topic, other):
        await asyncio.to_thread(admin.create_topic, c.lookupd_http, name, partitions=1, replicas=2)
    transport = RecordingTransport()
    async with StatsPoller([], c.nsqd_http, focus=[topic], transport=transport) as poller:
        await poller.snapshot()
        snap = await poller.snapshot()
    view = build_view(snap)
    [part] = view.topic(topic).partitions  # type: ignore[union-attr]
    assert part.leader in c.nsqd_http and sorted(part.isr or ()) == sorted(c.nsqd_http)
    assert [p.isr for p in view.topic(other).partitions] == [None]  # type: ignore[union-attr]
    paths = [urlsplit(ex.url) for ex in transport.exchanges]
    assert sorted(u.netloc for u in paths if u.path == "/info") == sorted(c.nsqd_http)  # once
    asked = {(u.netloc, u.query) for u in paths if u.path == "/coordinator/stats"}
    assert asked == {(part.leader, f"topic={topic}")}  # the leader only, both polls


async def test_a_poll_recorded_through_its_transport_plays_back_alike(
    original_cluster: cluster.Cluster, tmp_path: Path
) -> None:
    """Every request of a poll goes through the poller's one httpx client, the lookupds'
    too: what its transport recorded from a live cluster is the whole poll, and the real
    poller played back from it (nothing else answering) makes the same snapshot."""
    c = original_cluster
    transport = RecordingTransport()
    async with StatsPoller(c.lookupd_http, focus=None, transport=transport) as poller:
        live = await poller.snapshot()
    asked = {(u.netloc, u.path) for u in (urlsplit(ex.url) for ex in transport.exchanges)}
    assert {(c.lookupd_http[0], "/ping"), (c.lookupd_http[0], "/nodes")} <= asked
    manifest = tmp_path / "live_manifest.json"
    poll = {
        "name": "live",
        "taken_at": live.taken_at,
        "lookupd_http": c.lookupd_http,
        "nsqd_http": [],
        "topic": None,
        "channel": None,
        "elapsed": {n.address: n.elapsed for n in live.nodes},
        "exchanges": transport.exchanges,
    }
    write_recording(manifest, [poll], {}, {})
    [played] = await play_back(manifest, ["live"], focus=None)  # raises on a request missed
    assert played.lookupds == live.lookupds
    assert [(n.address, n.state, n.topics) for n in played.nodes] == [
        (n.address, n.state, n.topics) for n in live.nodes
    ]


async def test_one_nsqd_read_once_names_a_topic_and_its_channel(
    original_cluster: cluster.Cluster,
) -> None:
    """nsqctl.stats' one-shot reader (what tests and benchmarks check counters with): the
    sync and async forms agree with what was published; an absent channel is None; an
    nsqd that cannot be reached is a TransportError naming it."""
    c: cluster.Cluster = original_cluster
    http = c.nsqd_http[0]
    topic = f"read_{uuid.uuid4().hex[:10]}"
    async with httpx.AsyncClient() as client:
        for path, params in (
            ("topic/create", {"topic": topic}),
            ("channel/create", {"topic": topic, "channel": "c"}),
        ):
            (await client.post(f"http://{http}/{path}", params=params)).raise_for_status()
        async with Producer(nsqd_tcp=[c.nsqd_tcp[0]]) as producer:
            await producer.publish_many(topic, [b"a", b"bb", b"ccc"])
        await copied_to_channel(http, topic, "c", 3)  # then every read holds all 3
        fetched = await fetch_nsqd_stats(client, http, topic=topic, channel="c")
    node = await asyncio.to_thread(read_nsqd_stats, http, topic=topic, channel="c")
    for got in (node, fetched):
        assert got.address == http and got.state == "up" and not got.is_redesign
        copy = got.topic(topic)
        assert copy is not None and copy.message_count == 3 and copy.partition is None
        channel = got.channel(topic, "c")
        assert channel is not None and channel.message_count == 3
        assert (channel.depth, channel.in_flight_count, channel.client_count) == (3, 0, 0)
        assert got.channel(topic, "nope") is None and got.topic("nope") is None
    with pytest.raises(TransportError, match=r"127\.0\.0\.1:1 /stats"):
        read_nsqd_stats("127.0.0.1:1", topic=topic, timeout=2.0)
