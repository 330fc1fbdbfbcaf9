"""Operations against real servers: the sandbox's start over ports a moment ago used, and
the exporter's series for a partition with no live copy while every nsqlookupd is down."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import httpx
import pytest

from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.sources import StatsSession
from tests.conftest import StartCluster
from tests.helpers.cli import clean_env, run_cli
from tests.helpers.degraded import scrape
from tests.helpers.metrics import Series
from tests.helpers.redesign import (
    TopicSpec,
    create_topics,
    eventually,
    leader_stats,
    nsqd_stats,
    run_ok,
    unique,
)
from tests.helpers.sockets import tcp_table
from tests.helpers.wait import wait_for

TIME_WAIT = "06"  # the kernel's hex state in /proc/net/tcp


@pytest.mark.original
def test_sandbox_up_again_on_the_same_ports_while_they_sit_in_time_wait(
    tmp_path: Path, original_bins: Path
) -> None:
    """`sandbox down` then `sandbox up --port-base` on the same base within the minute a
    stopped server's connections stay in TIME-WAIT: the real servers bind those ports, so
    the start must not refuse them as in use."""
    directory = tmp_path / "sandbox"
    env = clean_env({"NSQCTL_SERVER_CACHE": str(original_bins.parents[1])})
    base = process.free_ports(4)[0]
    up = ["sandbox", "up", "--port-base", str(base), "--dir", str(directory), "--json"]
    first = run_cli(up, env=env)
    try:
        assert first.returncode == 0, first.stderr
        (nsqd,) = [n for n in json.loads(first.stdout)["nodes"] if n["role"] == "nsqd"]
        port = nsqd["tcp_port"]
        # A client connected across the stop: nsqd closes its end first, so that end
        # (local port = nsqd's port) stays in TIME-WAIT once the client closes too.
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"  V2")
            down = run_cli(["sandbox", "down", "--dir", str(directory)], env=env)
            assert down.returncode == 0, down.stderr
            assert client.recv(1) == b""
        assert any(r.local_port == port and r.state == TIME_WAIT for r in tcp_table())
        again = run_cli(up, env=env)
        assert again.returncode == 0, again.stderr
        (restarted,) = [n for n in json.loads(again.stdout)["nodes"] if n["role"] == "nsqd"]
        assert restarted["tcp_port"] == port and restarted["pid"] != nsqd["pid"]
        with socket.create_connection(("127.0.0.1", port)):
            pass  # the new nsqd listens on the very port
    finally:
        run_cli(["sandbox", "down", "--dir", str(directory)], env=env)


def _partition_series(scraped: Series, topic: str) -> dict[str, dict[str, float]]:
    """metric name → partition → value, for ``topic``'s partition-level series (the
    per-node ones keyed by partition too, their node left out)."""
    found: dict[str, dict[str, float]] = {}
    for (name, labels), value in scraped.items():
        label = dict(labels)
        if label.get("topic") == topic and "channel" not in label and name.startswith("nsq_"):
            found.setdefault(name, {})[label["partition"]] = value
    return found


def _meta_partitions(lookupd: str, topic: str) -> int:
    """The partition count nsqlookupd's meta gives ``topic`` (0: it does not know it)."""
    try:
        answer = httpx.get(
            f"http://{lookupd}/lookup",
            params={"topic": topic, "access": "r", "metainfo": "true"},
            timeout=5,
        ).json()
    except (httpx.HTTPError, ValueError):
        return 0
    return int(answer.get("data", {}).get("meta", {}).get("partition_num", 0))


def _at(c: Cluster) -> list[str]:
    return ["--lookupd", c.lookupd_http[0]]


@pytest.mark.redesign
async def test_exporter_serves_a_dead_partition_as_down_with_every_lookupd_down(
    start_cluster: StartCluster,
) -> None:
    """A redesign partition whose only copy's nsqd is killed, with the only nsqlookupd
    down too, is served as a partition with no live copy (writable 0, 0 copies, no
    leader, no depth), never dropped: an alert on ``nsq_partition_writable == 0`` fires.
    Both ways the exporter can know it: the meta nsqlookupd gave before it went down
    (a session begun while it answered), and, in a session begun after, what the nsqd
    held when it last answered. Deleted then, while that nsqd is still dead, the topic
    leaves both: a partition is kept only while the cluster may still have it. Back, that
    nsqd holds the deleted topic's data: ``lookup`` says so and ``topic delete`` removes it."""
    c = start_cluster("redesign", nsqd=2)
    topic = unique("deadpart")
    await create_topics(c.lookupd_http, {topic: TopicSpec(partitions=2, replicas=1)})
    leaders = leader_stats(c, topic)
    assert leaders[0].node != leaders[1].node, "the two partitions on one nsqd"
    victim = next(n for n in c.nsqds if n.http_address == leaders[1].node)
    with_meta = StatsSession(StatsPoller(c.lookupd_http, c.nsqd_http, focus=None))
    blind = StatsSession(StatsPoller(c.lookupd_http, c.nsqd_http, focus=None))
    try:
        assert _partition_series(scrape(await with_meta.refresh()), topic)[
            "nsq_partition_replicas"
        ] == {"0": 1.0, "1": 1.0}
        process.kill_hard(c.lookupds[0])
        seen = _partition_series(scrape(await blind.refresh()), topic)
        assert seen["nsq_partition_writable"] == {"0": 1.0, "1": 1.0}
        assert "nsq_partition_replicas" not in seen  # no meta: no lookupd ever answered
        process.kill_hard(victim)
        for session in (with_meta, blind):
            scraped = scrape(await session.refresh())
            series = _partition_series(scraped, topic)
            assert series["nsq_partition_writable"] == {"0": 1.0, "1": 0.0}
            assert series["nsq_partition_copies"] == {"0": 1.0, "1": 0.0}
            assert series["nsq_partition_leader"] == {"0": 1.0}  # none for partition 1
            assert series["nsq_topic_depth"] == {"0": 0.0}  # its depth is unknown
            assert scraped[("nsq_node_up", frozenset({("node", victim.http_address)}))] == 0.0
            verdict = frozenset(
                {
                    ("rule", "no-leader"),
                    ("topic", topic),
                    ("partition", "1"),
                    ("channel", ""),
                    ("node", ""),
                }
            )
            assert scraped[("nsqctl_check_status", verdict)] == 2.0
        assert _partition_series(scrape(await with_meta.refresh()), topic)[
            "nsq_partition_replicas"
        ] == {"0": 1.0, "1": 1.0}  # the last meta nsqlookupd gave
        # Deleted while that nsqd is still dead: gone from both, not kept as a partition
        # with no live copy (nsqlookupd answers a deleted topic's meta with 0 partitions).
        lookupd = c.lookupds[0]
        c.restart(lookupd)
        eventually(
            lambda: _meta_partitions(lookupd.http_address, topic) == 2,
            60,
            "the restarted nsqlookupd to know the topic's meta again",
        )
        await asyncio.to_thread(run_ok, "topic", "delete", topic, "--yes", *_at(c))
        for session in (with_meta, blind):
            # the live nsqd drops its copy when nsqlookupd's delete reaches it: shown
            # until then, as it still holds it
            async def gone(session: StatsSession = session) -> bool:
                return (await session.refresh()).topic(topic) is None

            await wait_for(gone, 60, f"{topic} gone from the view after its delete", step=0.2)
        # Back, the nsqd keeps the deleted topic's data (youzan leaves it on disk while
        # etcd knows none of its topics): lookup says what it is, not that nsqlookupd
        # names a leader (it names none, and has no meta for the topic).
        c.restart(victim)
        eventually(
            lambda: bool(nsqd_stats(victim.http_address, topic)),
            60,
            "the restarted nsqd to report the deleted topic's data",
        )
        shown = await asyncio.to_thread(run_cli, ["lookup", topic, *_at(c)])
        said = (shown.stdout + shown.stderr).decode()
        assert "nsqlookupd names a leader" not in said, said
        assert (
            "partition 1: nsqlookupd names no leader and has no meta for the topic (deleted?); "
            f"the copy on {victim.http_address} takes no writes (no writable leader): "
            f"`nsqctl topic delete {topic}` removes it"
        ) in " ".join(said.split()), said
        # check, the exporter, stat: data a deleted topic left behind, a warning (Nagios 1)
        # saying what it is and what removes it, not a partition with no leader paging
        left = (
            f"topic {topic} was deleted (nsqlookupd has no meta for it) but "
            f"{victim.http_address} still holds partition 1"
        )
        checked = await asyncio.to_thread(run_cli, ["check", "-n", "2", "-i", "0.2", *_at(c)])
        said = checked.stdout.decode()
        assert checked.returncode == 1, said
        assert said.splitlines() == [
            f"WARNING: leftover {topic}: {left}: `nsqctl topic delete {topic}` removes it"
        ], said
        leftover = frozenset(
            {
                ("rule", "leftover"),
                ("topic", topic),
                ("partition", ""),
                ("channel", ""),
                ("node", ""),
            }
        )
        for session in (with_meta, blind):
            shown_view = await session.refresh()
            held = shown_view.topic(topic)
            assert held is not None and held.deleted and held.severity == "warn", held
            scraped = scrape(shown_view)
            assert scraped[("nsqctl_check_status", leftover)] == 1.0
            assert not [
                k for k in scraped if ("rule", "no-leader") in k[1] and ("topic", topic) in k[1]
            ]
            assert _partition_series(scraped, topic)["nsq_partition_writable"] == {"1": 0.0}
        stat = await asyncio.to_thread(run_cli, ["stat", topic, "-n", "1", *_at(c)])
        assert stat.returncode == 0 and f"{left}: `nsqctl topic delete {topic}` removes it" in (
            " ".join(stat.stderr.decode().split())
        ), stat.stderr
        assert "has no leader" not in stat.stderr.decode() and "DELETED" in stat.stdout.decode()
        # and it does: nsqlookupd's delete, forced, reaches every nsqd it lists
        removed = await asyncio.to_thread(run_cli, ["topic", "delete", topic, "--yes", *_at(c)])
        said = (removed.stdout + removed.stderr).decode()
        assert removed.returncode == 0, said
        assert "force=true" in said and (
            f"nsqlookupd no longer knows topic {topic} (deleted), but {victim.http_address} "
            "still holds partition 1"
        ) in " ".join(said.split()), said
        assert nsqd_stats(victim.http_address, topic) == []
        checked = await asyncio.to_thread(run_cli, ["check", "-n", "2", "-i", "0.2", *_at(c)])
        assert checked.returncode == 0 and b"leftover" not in checked.stdout, checked.stdout
        for session in (with_meta, blind):
            assert (await session.refresh()).topic(topic) is None
        again = await asyncio.to_thread(run_cli, ["topic", "delete", topic, "--yes", *_at(c)])
        assert again.returncode == 1 and b"not found" in again.stderr, again.stderr
    finally:
        await with_meta.aclose()
        await blind.aclose()
