"""LookupClient against a REAL original nsqlookupd + nsqd (v1.3.0), all on 127.0.0.1.

Binaries come from ``$NSQCTL_ORIGINAL_BIN`` (default ``/tmp/gobuild/orig2/bin``). The local
fixture here is deliberately small; shared session fixtures may replace it later.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from nsqctl.lookup import LookupClient, LookupUnavailableError

pytestmark = pytest.mark.original

BIN = Path(os.environ.get("NSQCTL_ORIGINAL_BIN", "/tmp/gobuild/orig2/bin"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, deadline: float = 10.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            if httpx.get(url, timeout=0.5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} did not come up within {deadline}s")


@dataclass
class Cluster:
    lookupd_http: str
    nsqd_tcp: str
    nsqd_http: str
    lookupd: subprocess.Popen[bytes]
    nsqd: subprocess.Popen[bytes]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    for name in ("nsqlookupd", "nsqd"):
        if not (BIN / name).exists():
            pytest.skip(f"{BIN / name} missing: build nsq v1.3.0 or set NSQCTL_ORIGINAL_BIN")
    lt, lh, nt, nh = (free_port() for _ in range(4))
    log = (tmp_path / "lookupd.log").open("wb")
    lookupd = subprocess.Popen(
        [
            str(BIN / "nsqlookupd"),
            f"--tcp-address=127.0.0.1:{lt}",
            f"--http-address=127.0.0.1:{lh}",
            "--broadcast-address=127.0.0.1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    procs = [lookupd]
    try:
        wait_http(f"http://127.0.0.1:{lh}/ping")
        data = tmp_path / "nsqd"
        data.mkdir()
        nsqd = subprocess.Popen(
            [
                str(BIN / "nsqd"),
                f"--tcp-address=127.0.0.1:{nt}",
                f"--http-address=127.0.0.1:{nh}",
                f"--lookupd-tcp-address=127.0.0.1:{lt}",
                "--broadcast-address=127.0.0.1",
                f"--data-path={data}",
            ],
            stdout=(tmp_path / "nsqd.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        procs.append(nsqd)
        wait_http(f"http://127.0.0.1:{nh}/ping")
        yield Cluster(f"127.0.0.1:{lh}", f"127.0.0.1:{nt}", f"127.0.0.1:{nh}", lookupd, nsqd)
    finally:
        for proc in reversed(procs):
            _stop(proc)


def publish_and_wait(c: Cluster, topic: str) -> None:
    """Publish once (creates + registers the topic) and wait until lookupd lists it."""
    r = httpx.post(f"http://{c.nsqd_http}/pub", params={"topic": topic}, content=b"hello")
    assert r.status_code == 200, r.text
    end = time.monotonic() + 10
    while time.monotonic() < end:
        r = httpx.get(f"http://{c.lookupd_http}/lookup", params={"topic": topic})
        if r.status_code == 200 and r.json().get("producers"):
            return
        time.sleep(0.05)
    raise AssertionError(f"lookupd never listed a producer for {topic}")


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
    assert not status[dead].ok and status[dead].error
    assert not topo.stale


async def test_all_dead_after_success_returns_stale(cluster: Cluster) -> None:
    publish_and_wait(cluster, "t3")
    async with LookupClient([cluster.lookupd_http], timeout=1) as lc:
        fresh = await lc.lookup("t3")
        _stop(cluster.lookupd)
        stale = await lc.lookup("t3")
        other = lc.lookup("never_seen")
        with pytest.raises(LookupUnavailableError, match=cluster.lookupd_http):
            await other
    assert not fresh.stale and stale.stale
    assert stale.producers == fresh.producers
    assert not stale.sources[0].ok
