"""LookupClient against a REAL original nsqlookupd + nsqd (v1.3.0), all on 127.0.0.1.

The servers are the project's own build, started (and stopped by PID) through the same
cluster code as ``nsqctl sandbox``; each test gets a private cluster because one of them
stops the lookupd.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from nsqctl.errors import LookupUnavailableError
from nsqctl.lookup import LookupClient
from nsqctl.servers import cluster as servers
from nsqctl.servers import process
from tests.conftest import StartCluster
from tests.helpers.wait import eventually

pytestmark = pytest.mark.original


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Cluster:
    lookupd_http: str
    nsqd_tcp: str
    nsqd_http: str
    lookupd: process.NodeRecord


@pytest.fixture
def cluster(start_cluster: StartCluster) -> Iterator[Cluster]:
    c: servers.Cluster = start_cluster("original", nsqd=1, lookupd=1)
    yield Cluster(c.lookupd_http[0], c.nsqd_tcp[0], c.nsqd_http[0], c.lookupds[0])


def publish_and_wait(c: Cluster, topic: str) -> None:
    """Publish once (creates + registers the topic) and wait until lookupd lists it."""
    r = httpx.post(f"http://{c.nsqd_http}/pub", params={"topic": topic}, content=b"hello")
    assert r.status_code == 200, r.text

    def listed() -> bool:
        r = httpx.get(f"http://{c.lookupd_http}/lookup", params={"topic": topic})
        return r.status_code == 200 and bool(r.json().get("producers"))

    eventually(listed, 10, f"lookupd to list a producer for {topic}", step=0.05)


async def test_lookup_returns_real_producer(cluster: Cluster) -> None:
    async with LookupClient([cluster.lookupd_http], timeout=2) as lc:
        missing = await lc.lookup("not_there")
        assert missing.topic_not_found and missing.is_empty and not missing.stale
        publish_and_wait(cluster, "t")
        topo = await lc.lookup("t", access="r")
        assert await lc.ping()
        assert (await lc.info())["version"] == "1.3.0"
        assert "t" in await lc.topics()
        assert await lc.listlookup() is None  # original answers 404
    assert [p.key for p in topo.producers] == [cluster.nsqd_tcp]
    assert topo.producers[0].http_key == cluster.nsqd_http
    assert topo.producers[0].version == "1.3.0"
    assert not topo.is_redesign and topo.partitions == {} and not topo.stale
    assert lc.health()[cluster.lookupd_http]["is_original"]


async def test_dead_lookupd_beside_live_one(cluster: Cluster) -> None:
    publish_and_wait(cluster, "t2")
    dead = f"127.0.0.1:{free_port()}"
    async with LookupClient([dead, cluster.lookupd_http], timeout=2) as lc:
        topo = await lc.lookup("t2")
    assert [p.key for p in topo.producers] == [cluster.nsqd_tcp]
    status = {s.address: s for s in topo.sources}
    assert status[cluster.lookupd_http].ok
    assert not status[dead].ok
    assert status[dead].error == "connection refused or host unreachable"
    assert not topo.stale


async def test_all_dead_after_success_returns_stale(cluster: Cluster) -> None:
    publish_and_wait(cluster, "t3")
    async with LookupClient([cluster.lookupd_http], timeout=1) as lc:
        fresh = await lc.lookup("t3")
        process.stop(cluster.lookupd)
        stale = await lc.lookup("t3")
        other = lc.lookup("never_seen")
        with pytest.raises(LookupUnavailableError, match=cluster.lookupd_http):
            await other
    assert not fresh.stale and stale.stale
    assert stale.producers == fresh.producers
    assert not stale.sources[0].ok
    assert stale.sources[0].error == "connection refused or host unreachable"
