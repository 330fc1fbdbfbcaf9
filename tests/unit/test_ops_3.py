"""The port check before a start asks what the servers' own bind would answer: a port
whose last connections sit in TIME-WAIT is free (the Go servers bind it with
SO_REUSEADDR), a port someone listens on is not (real loopback sockets, no server). And
the view of a redesign partition known only from what a dead nsqd last held."""

from __future__ import annotations

import socket

from nsqctl.servers import process
from nsqctl.stats.model import ClusterSnapshot, NodeStats
from nsqctl.stats.view import build_view
from tests.helpers.degraded import scrape
from tests.helpers.sockets import tcp_table
from tests.helpers.stats import RECORDED_A, RECORDED_B, topic_stats

TIME_WAIT = "06"  # the kernel's hex state in /proc/net/tcp


def _leave_in_time_wait() -> int:
    """A loopback port that nothing listens on any more, whose accepted connection the
    server side closed first: that side's end stays in TIME-WAIT on the port, as a
    stopped server's connections do."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go servers do
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port: int = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listener.accept()
            accepted.close()  # the server end closes first: it will hold TIME-WAIT
            assert client.recv(1) == b""  # the FIN arrived
    return port


def test_a_port_only_in_time_wait_is_free_and_a_listened_one_is_not() -> None:
    port = _leave_in_time_wait()
    assert any(r.local_port == port and r.state == TIME_WAIT for r in tcp_table())
    assert not process.port_in_use(port)
    assert process.free_ports(1, base=port) == [port]
    with socket.socket() as holder:  # listening, with the option the probe itself sets
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen()
        assert process.port_in_use(port)


def test_a_port_bound_without_the_option_is_in_use() -> None:
    """A socket bound (not listening) without SO_REUSEADDR refuses the servers' bind too."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        assert process.port_in_use(holder.getsockname()[1])


def test_partitions_a_dead_nsqd_held_are_served_as_down_not_dropped() -> None:
    """With no meta (no nsqlookupd answered), the partitions an nsqd now down held when it
    last answered are listed with no live copy, a topic wholly on it too; the exporter
    serves them as not writable with no copy, no leader and no depth."""
    up = NodeStats(
        RECORDED_A,
        100.0,
        "up",
        is_redesign=True,
        topics=(topic_stats(RECORDED_A, "split", partition=0),),
    )
    down = NodeStats(RECORDED_B, 100.0, "down", error="connection refused")
    snapshot = ClusterSnapshot(100.0, (up, down), unseen_partitions={"split": (1,), "only": (0, 1)})
    view = build_view(snapshot)
    for name, live in (("split", [True, False]), ("only", [False, False])):
        topic = view.topic(name)
        assert topic is not None and topic.is_redesign and topic.severity == "crit"
        assert [p.live for p in topic.partitions] == live
        assert [p.partition for p in topic.partitions] == [0, 1]
    scraped = scrape(view)

    def served(metric: str, topic: str) -> dict[str, float]:
        return {
            dict(labels)["partition"]: value
            for (name, labels), value in scraped.items()
            if name == metric and ("topic", topic) in labels
        }

    assert served("nsq_partition_writable", "split") == {"0": 1.0, "1": 0.0}
    assert served("nsq_partition_copies", "only") == {"0": 0.0, "1": 0.0}
    assert served("nsq_partition_leader", "split") == {"0": 1.0}
    assert served("nsq_topic_depth", "only") == {}
