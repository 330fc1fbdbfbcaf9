"""`nsqctl pub` rides through a partition leader's kill -9 on real youzan servers.

The first test is the leader-kill scenario: a topic of 1 partition and 2 replicas, ``nsqctl
pub --rate 2000`` of 20,000 lines, kill -9 of the leader 4 s in. The issue ran it on 2
nsqd; there nsqlookupd never enables writes again without the killed node (writes need
more than replicas/2 nodes in the ISR), and when the node is started again within seconds
youzan's nsqd comes back as leader with a shorter commit log and truncates OK'd messages
away (seen here: 6,400 of 20,000 lost; bench/bench_faults.py ``quick-restart``). So the
test has a third nsqd, where nsqlookupd migrates the partition (about 105 s here); the
publish must wait, saying so, and finish with exit 0, every line stored.

The new leader does not carry the old one's channels, so stored messages are read back
on a fresh channel from the start of the partition (SUB_ADVANCED).

The second kills a leader of an ordered 2-partition topic (replicas 3 on 3 nsqd, so a
new leader is elected without the old one) while ``pub --shard-field`` sends 24 keys:
each key's messages must be stored in input order across the switch.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from nsqctl import protocol as p
from nsqctl.errors import NsqctlError
from nsqctl.message import Message
from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from tests.conftest import StartCluster
from tests.helpers.cli import NSQCTL, clean_env
from tests.helpers.failover import kill_leader, leader_of
from tests.helpers.redesign import (
    TopicSpec,
    by_partition,
    create_topics,
    eventually,
    message_counts,
    read_messages,
    unique,
)

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(420)]


def _pub(
    c: Cluster, topic: str, lines: list[bytes], tmp: Path, *args: str
) -> subprocess.Popen[bytes]:
    source = tmp / f"{topic}.txt"
    source.write_bytes(b"\n".join(lines) + b"\n")
    with source.open("rb") as stdin:
        return subprocess.Popen(
            [NSQCTL, "pub", topic, "--lookupd", c.lookupd_http[0], *args],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**clean_env(), "NSQCTL_LOG": "debug"},  # the failover decisions, on stderr
        )


def _mid_stream(c: Cluster, topic: str, proc: subprocess.Popen[bytes], stored: int) -> None:
    """Wait until ``stored`` messages are in ``topic`` with ``pub`` still going: the kill
    that follows lands mid-stream, however slowly the machine started ``pub``."""
    eventually(
        lambda: proc.poll() is not None or sum(message_counts(c, topic).values()) >= stored,
        120,
        f"{stored} messages published",
    )
    assert proc.poll() is None, proc.communicate()


def _stored(c: Cluster, topic: str, **kwargs: Any) -> list[bytes]:
    """Every message stored in ``topic``, in storage order per partition: on channel
    ``c`` (made before publishing), or from ``start`` on a fresh one."""
    total = sum(message_counts(c, topic).values())
    channel = "verify" if "start" in kwargs else "c"
    got = asyncio.run(read_messages(c.lookupd_http, topic, channel, total, timeout=120, **kwargs))
    assert len(got) == total, (len(got), total)
    return [m.body for part in by_partition(got).values() for m in part]


def test_pub_waits_for_the_leader_and_publishes_every_line(
    start_cluster: StartCluster, tmp_path: Path
) -> None:
    c = start_cluster("redesign", nsqd=3)
    topic = unique("ha")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(partitions=1, replicas=2)}))
    lines = [b"ha-%05d" % i for i in range(20_000)]
    proc = _pub(c, topic, lines, tmp_path, "--rate", "2000")
    _mid_stream(c, topic, proc, len(lines) // 5)
    killed = kill_leader(c, topic)
    _, err = proc.communicate(timeout=300)
    stderr = err.decode()
    assert proc.returncode == 0, stderr[-3000:]
    assert f"waiting for a leader for {topic}/0" in stderr
    assert f"published {len(lines)} message(s) to {topic}" in stderr
    assert leader_of(c, topic).tcp_port != killed.tcp_port
    stored = Counter(_stored(c, topic, start=p.start_msgcount(0)))
    assert set(stored) == set(lines)  # every line, nothing else
    duplicates = sum(stored.values()) - len(lines)
    print(f"stored {sum(stored.values())} for {len(lines)} lines: {duplicates} duplicate(s)")
    assert duplicates <= 400  # only what was in flight at the kill (2 batches of 200)


def test_sharded_pub_keeps_key_order_across_a_new_leader(
    start_cluster: StartCluster, tmp_path: Path
) -> None:
    c = start_cluster("redesign", nsqd=3)
    topic = unique("hakeys")
    spec = TopicSpec(partitions=2, replicas=3, ordered=True)
    asyncio.run(create_topics(c.lookupd_http, {topic: spec}))
    keys = [f"k{i:02d}" for i in range(24)]
    lines = [json.dumps({"k": keys[i % 24], "seq": i // 24}).encode() for i in range(12_000)]
    proc = _pub(c, topic, lines, tmp_path, "--shard-field", "k", "--rate", "3000")
    _mid_stream(c, topic, proc, len(lines) // 4)
    killed = kill_leader(c, topic, 0)
    _, err = proc.communicate(timeout=300)
    stderr = err.decode()
    assert proc.returncode == 0, stderr[-3000:]
    assert "waiting for a leader for " in stderr
    assert leader_of(c, topic, 0).tcp_port != killed.tcp_port
    total = sum(message_counts(c, topic).values())
    try:
        got = asyncio.run(
            read_messages(
                c.lookupd_http, topic, "c", total, timeout=120, ordered=True, max_in_flight=2
            )
        )
    except AssertionError as err:
        raise AssertionError(
            f"{err}; stored {message_counts(c, topic)}; channel c on "
            f"each node: {_channel_everywhere(c, topic)}"
        ) from None
    assert len(got) == total, (len(got), total)
    # storage order is the queue offset an ordered subscription delivers by
    stored = [m for part in by_partition(got).values() for m in sorted(part, key=_offset)]
    assert {m.body for m in stored} == set(lines)
    seqs: dict[str, list[int]] = defaultdict(list)
    where: dict[str, list[tuple[int, int, int, int]]] = defaultdict(list)
    seen: set[bytes] = set()
    for msg in stored:  # storage order; a resent batch's second copy is a duplicate
        if msg.body in seen:
            continue
        seen.add(msg.body)
        record = json.loads(msg.body)
        seqs[record["k"]].append(record["seq"])
        where[record["k"]].append(
            (record["seq"], msg.partition or 0, msg.internal_id or 0, msg.offset or 0)
        )
    for key in keys:
        assert seqs[key] == list(range(500)), (
            f"key {key} out of order across the failover (killed {killed.tcp_port}): "
            f"{_runs(where[key])}; the producer's ticket log:\n{_ticket_log(stderr)}"
        )


def _ticket_log(stderr: str) -> str:
    """The producer's debug lines on keyed-publish order (NSQCTL_LOG=debug), shortened."""
    lines = [ln for ln in stderr.splitlines() if " ticket " in ln and "retry" not in ln]
    return "\n".join(lines[:150])


def _offset(msg: Message) -> int:
    assert msg.offset is not None
    return msg.offset


def _runs(placed: list[tuple[int, int, int, int]]) -> list[str]:
    """(seq, partition, internal id, offset) in storage order, as runs of consecutive seqs."""
    runs: list[list[tuple[int, int, int, int]]] = []
    for item in placed:
        if runs and item[0] == runs[-1][-1][0] + 1 and item[1] == runs[-1][-1][1]:
            runs[-1].append(item)
        else:
            runs.append([item])
    return [
        f"p{r[0][1]} seq {r[0][0]}-{r[-1][0]} id {r[0][2]}-{r[-1][2]} offset {r[0][3]}-{r[-1][3]}"
        for r in runs
    ]


def _channel_everywhere(c: Cluster, topic: str) -> dict[str, object]:
    """Every live nsqd's view of channel c of ``topic`` (a failure report)."""
    out: dict[str, object] = {}
    for node in c.nsqds:
        try:
            stats = read_nsqd_stats(node.http_address, topic=topic, timeout=5)
        except NsqctlError as err:
            out[str(node.tcp_port)] = str(err)
            continue
        out[str(node.tcp_port)] = [
            (
                t.partition,
                t.is_leader,
                t.message_count,
                [(ch.name, ch.depth, ch.in_flight_count) for ch in t.channels],
            )
            for t in stats.topics
            if t.topic == topic
        ]
    return out
