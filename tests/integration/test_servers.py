"""The real servers, the cluster launcher and its failure paths."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from nsqctl import admin
from nsqctl.errors import ServerSetupError
from nsqctl.servers import cluster, process
from nsqctl.servers.catalog import Flavor
from nsqctl.stats import read_nsqd_stats
from tests.conftest import StartCluster
from tests.helpers.wait import eventually


def _stats_message_count(nsqd_http: str, topic: str) -> int:
    node = read_nsqd_stats(nsqd_http, topic=topic, timeout=5)
    return sum(t.message_count for t in node.topics if t.topic == topic)


def test_http_publish_shows_in_stats(any_cluster: cluster.Cluster) -> None:
    """Publish over HTTP to every nsqd and read the count back from /stats."""
    topic = f"stats_{any_cluster.flavor}_{int(time.time() * 1000)}"
    if any_cluster.flavor == "redesign":
        admin.create_topic(any_cluster.lookupd_http, topic, partitions=2, replicas=1)
        lookup = httpx.get(
            f"http://{any_cluster.lookupd_http[0]}/lookup?topic={topic}&access=w&metainfo=true",
            timeout=5,
        ).json()
        lookup = lookup.get("data", lookup)
        assert len(lookup["partitions"]) == 2
        targets = sorted(
            {
                (f"{p['broadcast_address']}:{p['http_port']}", int(part))
                for part, p in lookup["partitions"].items()
            }
        )
        for http, part in targets:
            r = httpx.post(f"http://{http}/pub?topic={topic}&partition={part}", content=b"x")
            assert r.status_code == 200, r.text
        total = sum(_stats_message_count(h, topic) for h in {t[0] for t in targets})
        assert total == len(targets)
    else:
        for http in any_cluster.nsqd_http:
            for body in (b"a", b"bb", b"ccc"):
                r = httpx.post(f"http://{http}/pub?topic={topic}", content=body, timeout=5)
                assert r.status_code == 200 and r.text == "OK"
        for http in any_cluster.nsqd_http:
            assert _stats_message_count(http, topic) == 3


def test_original_lookupd_sees_both_nsqd(original_cluster: cluster.Cluster) -> None:
    topic = f"reg_{int(time.time() * 1000)}"
    for http in original_cluster.nsqd_http:
        httpx.post(f"http://{http}/topic/create?topic={topic}", timeout=5).raise_for_status()
    ports: set[int] = set()

    def both_listed() -> bool:
        nonlocal ports
        body = httpx.get(
            f"http://{original_cluster.lookupd_http[0]}/lookup?topic={topic}", timeout=5
        ).json()
        ports = {p["tcp_port"] for p in body.get("producers", [])}
        return len(ports) == 2

    eventually(both_listed, 10, "nsqlookupd to list both nsqd", step=0.2)
    assert ports == {n.tcp_port for n in original_cluster.nsqds}


def test_redesign_topic_create_lists_partitions(redesign_cluster: cluster.Cluster) -> None:
    topic = f"parts_{int(time.time() * 1000)}"
    made = admin.create_topic(redesign_cluster.lookupd_http, topic, partitions=2, replicas=1)
    assert made.flavor == "redesign" and made.partitions == 2
    body = httpx.get(
        f"http://{redesign_cluster.lookupd_http[0]}/lookup?topic={topic}&access=w&metainfo=true",
        timeout=5,
    ).json()
    body = body.get("data", body)
    assert sorted(body["partitions"]) == ["0", "1"]
    assert body["meta"]["partition_num"] == 2


def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    with pytest.raises(ServerSetupError, match="nsqlookupd binary not found"):
        cluster.start("original", tmp_path / "c", bin_dir=empty)
    state = cluster.Cluster.load(tmp_path / "c")
    assert not any(state.running().values())
    assert state.became_healthy is False  # its etcd (if any) holds no topic


@pytest.mark.parametrize("flavor", ["original", "redesign"])
def test_planned_nsqd_addresses_are_the_ones_a_start_lays_out(
    tmp_path: Path, flavor: Flavor
) -> None:
    """``sandbox up`` compares an old sandbox's nsqds with the ones a start from --port-base
    would have: the plan must be the layout. A start with no nsqlookupd binary fails after
    laying every node out (redesign: after its etcd ran) and saves them."""
    empty = tmp_path / "bin"
    empty.mkdir()
    count = 2 + 3 * 2 + 4 * 2
    base = process.free_ports(count)[0]
    with pytest.raises(ServerSetupError, match="nsqlookupd binary not found"):
        cluster.start(flavor, tmp_path / "c", nsqd=2, lookupd=2, bin_dir=empty, port_base=base)
    laid_out = [
        (n.host, n.tcp_port, n.http_port) for n in cluster.Cluster.load(tmp_path / "c").nsqds
    ]
    assert laid_out == cluster.planned_nsqd_addresses(flavor, 2, 2, base, False)


def test_port_in_use_is_a_clear_error(tmp_path: Path, original_bins: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ServerSetupError, match=f"port 127.0.0.1:{port} is already in use"):
            cluster.start("original", tmp_path / "c", bin_dir=original_bins, port_base=port)
    assert not (tmp_path / "c" / cluster.STATE_FILE).exists()


def test_server_exiting_at_start_names_its_log(
    tmp_path: Path, original_bins: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real nsqd that cannot bind its port exits at once; we report it and its log,
    and stop the lookupd we had already started."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    real_free_ports = process.free_ports

    def ports_with_a_taken_one(count: int, base: int | None = None) -> list[int]:
        ports = real_free_ports(count, base)
        ports[2] = taken  # the nsqd TCP port
        return ports

    monkeypatch.setattr(process, "free_ports", ports_with_a_taken_one)
    try:
        with pytest.raises(ServerSetupError, match=r"nsqd0 exited at start .*nsqd0\.log"):
            cluster.start("original", tmp_path / "c", bin_dir=original_bins)
    finally:
        holder.close()
    state = cluster.Cluster.load(tmp_path / "c")
    assert state.running() == {"nsqlookupd0": False, "nsqd0": False}
    assert "address already in use" in Path(state.nsqds[0].log).read_text()


def test_stop_leaves_no_process(start_cluster: StartCluster) -> None:
    c = start_cluster("original", nsqd=2)
    pids = [n.pid for n in c.nodes]
    assert all(c.running().values())
    assert sorted(c.stop()) == ["nsqd0", "nsqd1", "nsqlookupd0"]
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
