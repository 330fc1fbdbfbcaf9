"""One-node operations, the blast radius shown before a destructive command asks, and
``nsqctl peek``, on real servers of both families.

The session clusters (2 nsqd each) are shared: every test has its own topic. Counters are
read through the one ``/stats`` reader (:func:`nsqctl.stats.read_nsqd_stats`).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest

from nsqctl.consumer import Consumer
from nsqctl.errors import ConfigError
from nsqctl.message import Message
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from nsqctl.stats.model import ChannelStats
from tests.helpers.cli import assert_one_line_error, cli, invoke
from tests.helpers.redesign import (
    TopicSpec,
    channel_depths,
    channel_stats,
    create_topics,
    eventually,
    leader_stats,
)
from tests.helpers.wait import wait_for


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def lk(c: Cluster) -> list[str]:
    return ["--lookupd", c.lookupd_http[0]]


def ok(*args: str, input: str | None = None) -> str:
    result = invoke(*args, input=input)
    assert result.exit_code == 0, (args, result.output, result.exception)
    return str(result.stdout)


def channel_on(address: str, topic: str, channel: str) -> ChannelStats:
    found = read_nsqd_stats(address, topic=topic, channel=channel).channel(topic, channel)
    assert found is not None, f"{address} has no {topic}/{channel}"
    return found


def topic_depth_on(address: str, topic: str) -> int:
    found = read_nsqd_stats(address, topic=topic).topic(topic)
    assert found is not None, f"{address} has no {topic}"
    return found.depth


async def publish_each(c: Cluster, topic: str, count: int) -> None:
    """``count`` messages to every nsqd of the original cluster."""
    for address in c.nsqd_tcp:
        async with Producer(nsqd_tcp=[address]) as p:
            for i in range(count):
                await p.publish(topic, f"{address} {i}".encode())


def original_topic(c: Cluster, prefix: str, per_node: int, channel: str | None = "c") -> str:
    """A topic on both nsqds (with ``channel``) holding ``per_node`` messages on each."""
    topic = name(prefix)
    ok("topic", "create", topic, *lk(c))
    if channel is not None:
        ok("channel", "create", topic, channel, *lk(c))
    asyncio.run(publish_each(c, topic, per_node))
    return topic


@pytest.fixture
def tty(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Commands see a terminal on stdin, so they ask (answers come from CliRunner input)."""
    from nsqctl.cli import admin_actions

    monkeypatch.setattr(admin_actions, "stdin_is_tty", lambda: True)
    yield


# ----------------------------------------------------------------- --node (original)


def test_pause_on_one_node_leaves_the_other_delivering(original_cluster: Cluster) -> None:
    c = original_cluster
    topic = original_topic(c, "nodeops-pause", 3)
    paused, running = c.nsqd_http
    ok("channel", "pause", topic, "c", "--node", paused, *lk(c))
    assert channel_on(paused, topic, "c").paused
    assert not channel_on(running, topic, "c").paused
    # stat's one row for the channel says it is paused on one of its two nsqds, not all
    where = ["--nsqd-http", paused, "--nsqd-http", running, "-n", "1"]
    [line] = [r for r in ok("stat", topic, "c", *where).splitlines() if f"{topic}/c" in r]
    assert line.endswith(" PAUSED 1/2"), line
    [row] = json.loads(ok("stat", topic, "c", "--json", *where))["rows"]
    assert (row["paused"], row["paused_copies"], row["copies"]) == (True, 1, 2), row

    got: list[Message] = []

    async def consume() -> None:
        consumer = Consumer(topic, "c", got.append, lookupd_http=c.lookupd_http)
        await consumer.start()
        try:
            await wait_for(lambda: len(got) >= 3, 30, "the running node's 3 messages")
        finally:
            await consumer.stop()

    asyncio.run(consume())
    assert {m.body.split()[0].decode() for m in got} == {c.nsqd_tcp[1]}
    assert channel_on(paused, topic, "c").depth == 3
    ok("channel", "unpause", topic, "c", "--node", paused, *lk(c))
    assert not channel_on(paused, topic, "c").paused


def test_empty_on_one_node_keeps_the_others_depth(original_cluster: Cluster) -> None:
    c = original_cluster
    topic = original_topic(c, "nodeops-empty", 3)
    emptied, kept = c.nsqd_http
    out = ok("channel", "empty", topic, "c", "--node", emptied, "--yes", *lk(c))
    assert f"nsqd {kept}" not in out
    assert channel_on(emptied, topic, "c").depth == 0
    assert channel_on(kept, topic, "c").depth == 3

    ok("topic", "empty", topic, "--node", kept, "--yes", *lk(c))
    assert channel_on(kept, topic, "c").depth == 3  # topic empty leaves channels alone


def test_topic_empty_on_one_node(original_cluster: Cluster) -> None:
    c = original_cluster
    topic = original_topic(c, "nodeops-tempty", 2, channel=None)
    kept, emptied = c.nsqd_http
    # the node named by its TCP address, as `nsqctl lookup` shows it
    ok("topic", "empty", topic, "--node", c.nsqd_tcp[1], "--yes", *lk(c))
    assert topic_depth_on(emptied, topic) == 0
    assert topic_depth_on(kept, topic) == 2


def test_unknown_node_names_the_known_ones(original_cluster: Cluster) -> None:
    c = original_cluster
    topic = original_topic(c, "nodeops-unknown", 0)
    line = assert_one_line_error(
        cli("channel", "pause", topic, "c", "--node", "127.0.0.1:1", *lk(c)), 2
    )
    assert "127.0.0.1:1" in line and all(a in line for a in c.nsqd_http)
    assert not any(channel_on(a, topic, "c").paused for a in c.nsqd_http)


# ----------------------------------------------------------------- blast radius


def test_blast_radius_is_shown_then_the_topic_name_must_be_typed(
    original_cluster: Cluster, tty: None
) -> None:
    c = original_cluster
    topic = original_topic(c, "nodeops-blast", 3)
    args = ("channel", "empty", topic, "c", "--confirm-above", "5", *lk(c))

    wrong = invoke(*args, input="y\n")
    assert wrong.exit_code == 1
    assert "not typed back" in str(wrong.exception)
    err = wrong.stderr
    for address in c.nsqd_http:
        assert f"{address}  channel c: 3 messages" in err
    assert "total: 6 messages" in err
    assert err.index("would lose") < err.index("type the topic name")
    assert [channel_on(a, topic, "c").depth for a in c.nsqd_http] == [3, 3]

    ok(*args, input=f"{topic}\n")
    assert [channel_on(a, topic, "c").depth for a in c.nsqd_http] == [0, 0]


def test_below_the_threshold_a_yes_will_do(original_cluster: Cluster, tty: None) -> None:
    c = original_cluster
    topic = original_topic(c, "nodeops-small", 1)
    result = invoke("channel", "empty", topic, "c", "--node", c.nsqd_http[0], *lk(c), input="y\n")
    assert result.exit_code == 0, result.output
    assert "total: 1 messages" in result.stderr and "proceed?" in result.stderr
    assert channel_on(c.nsqd_http[0], topic, "c").depth == 0
    assert channel_on(c.nsqd_http[1], topic, "c").depth == 1


def test_json_carries_the_blast_radius(original_cluster: Cluster) -> None:
    c = original_cluster
    topic = original_topic(c, "nodeops-json", 2)
    eventually(
        lambda: all(topic_depth_on(a, topic) == 0 for a in c.nsqd_http),
        30,
        "the topic queues handing their messages to the channel",
    )
    report = json.loads(ok("topic", "delete", topic, "--yes", "--json", *lk(c)))
    blast = report["blast_radius"]
    assert blast["complete"] is True
    # each nsqd: its channel's 2 messages (the topic queue handed them over already)
    per_channel = {(x["node"], x["channel"]): x["messages"] for x in blast["losses"]}
    expected: dict[tuple[str, str | None], int] = {(a, "c"): 2 for a in c.nsqd_http}
    expected.update({(a, None): 0 for a in c.nsqd_http})
    assert per_channel == expected
    assert blast["messages"] == 4


# ----------------------------------------------------------------- peek (original)


def test_peek_without_borrow_says_why_not(original_cluster: Cluster) -> None:
    c = original_cluster
    topic = original_topic(c, "nodeops-nopeek", 1)
    line = assert_one_line_error(cli("peek", topic, "c", *lk(c)), 2)
    assert "no API to read a message without consuming" in line


def test_borrow_gives_back_every_message_once(original_cluster: Cluster) -> None:
    c = original_cluster
    topic = name("nodeops-borrow")
    ok("topic", "create", topic, "--nsqd-http", c.nsqd_http[0])
    ok("channel", "create", topic, "c", "--nsqd-http", c.nsqd_http[0])

    async def publish() -> None:
        async with Producer(nsqd_tcp=[c.nsqd_tcp[0]]) as p:
            for i in range(3):
                await p.publish(topic, f"m{i}".encode())

    asyncio.run(publish())
    proc = cli("peek", topic, "c", "--borrow", "2", "--format", "json", *lk(c))
    assert proc.returncode == 0, proc.stderr
    assert "attempts rise by one" in proc.stderr
    shown = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(shown) == 2 and all(m["attempts"] == 1 for m in shown)

    def restored() -> bool:
        ch = channel_on(c.nsqd_http[0], topic, "c")
        return ch.depth == 3 and ch.in_flight_count == 0 and ch.deferred_count == 0

    eventually(restored, 30, "the borrowed messages back in the queue")
    assert channel_on(c.nsqd_http[0], topic, "c").requeue_count == 2

    got: list[Message] = []

    async def consume() -> None:
        consumer = Consumer(topic, "c", got.append, nsqd_tcp=[c.nsqd_tcp[0]])
        await consumer.start()
        try:
            await wait_for(lambda: len(got) >= 3, 30, "all 3 messages")
        finally:
            await consumer.stop()

    asyncio.run(consume())
    attempts = {m.body.decode(): m.attempts for m in got}
    borrowed = {m["body"] for m in shown}
    assert len(got) == 3
    assert {b: attempts[b] for b in borrowed} == dict.fromkeys(borrowed, 2)
    assert [a for b, a in attempts.items() if b not in borrowed] == [1]


# ----------------------------------------------------------------- redesign


@pytest.fixture(scope="module")
def redesign_topics(redesign_cluster: Cluster) -> dict[str, str]:
    """Made together (nsqlookupd enables writes on new topics in one check), each with
    channel c, before anything is published: "parts" (2 partitions, 10 messages) and
    "peek" (1 partition, m0..m4)."""
    topics = {"parts": name("nodeops-rparts"), "peek": name("nodeops-rpeek")}
    specs = {topics["parts"]: TopicSpec(partitions=2), topics["peek"]: TopicSpec(partitions=1)}

    async def setup() -> None:
        await create_topics(redesign_cluster.lookupd_http, specs)
        async with Producer(lookupd_http=redesign_cluster.lookupd_http) as p:
            for i in range(10):
                await p.publish(topics["parts"], f"p{i}".encode())
            for i in range(5):
                await p.publish(topics["peek"], f"m{i}".encode())

    asyncio.run(setup())
    return topics


def test_partition_and_node_narrow_channel_actions_on_the_redesign(
    redesign_cluster: Cluster, redesign_topics: dict[str, str]
) -> None:
    c, topic = redesign_cluster, redesign_topics["parts"]
    before = channel_depths(c, topic, "c")
    assert sorted(before) == [0, 1] and all(before.values()), before

    ok("channel", "pause", topic, "c", "--partition", "0", *lk(c))
    assert {p: ch.paused for p, ch in channel_stats(c, topic, "c").items()} == {0: True, 1: False}

    ok("channel", "empty", topic, "c", "--partition", "1", "--yes", *lk(c))
    assert channel_depths(c, topic, "c") == {0: before[0], 1: 0}

    leader_of_1 = leader_stats(c, topic)[1].node
    ok("channel", "unpause", topic, "c", "--node", leader_of_1, *lk(c))
    assert {p: ch.paused for p, ch in channel_stats(c, topic, "c").items()} == {0: True, 1: False}
    ok("channel", "unpause", topic, "c", "--partition", "0", *lk(c))
    assert not any(ch.paused for ch in channel_stats(c, topic, "c").values())

    line = assert_one_line_error(cli("channel", "pause", topic, "c", "--partition", "7", *lk(c)), 2)
    assert "no partition 7" in line and "[0, 1]" in line


def test_redesign_blast_radius_counts_bytes(
    redesign_cluster: Cluster, redesign_topics: dict[str, str]
) -> None:
    c, topic = redesign_cluster, redesign_topics["parts"]
    result = invoke("channel", "delete", topic, "c", "--json", "--confirm-above", "0", *lk(c))
    # no terminal: refused before anything was sent, whatever the size
    assert isinstance(result.exception, ConfigError) and "pass --yes" in str(result.exception)
    report = json.loads(
        ok("channel", "skip", topic, "c", "--partition", "0", "--yes", "--json", *lk(c))
    )
    (loss,) = report["blast_radius"]["losses"]
    assert loss["partition"] == 0 and loss["messages"] > 0 and loss["bytes"] > 0
    ok("channel", "unskip", topic, "c", "--partition", "0", *lk(c))


def test_peek_reads_without_consuming(
    redesign_cluster: Cluster, redesign_topics: dict[str, str]
) -> None:
    c, topic = redesign_cluster, redesign_topics["peek"]
    ok("channel", "setoffset", topic, "c", "--msgcount", "3", "--partition", "0", "--yes", *lk(c))
    before = channel_stats(c, topic, "c")[0]
    assert before.depth == 3

    shown = [
        json.loads(x)
        for x in ok("peek", topic, "c", "-n", "2", "--format", "json", *lk(c)).splitlines()
    ]
    assert [m["body"] for m in shown] == ["m2", "m3"]
    assert {m["partition"] for m in shown} == {0}
    raw = ok("peek", topic, "c", "-n", "9", "--format", "raw", *lk(c))
    assert raw.splitlines() == ["m2", "m3", "m4"]

    first = ok(
        "peek",
        topic,
        "--partition",
        "0",
        "--from-offset",
        "0",
        "-n",
        "1",
        "--format",
        "raw",
        *lk(c),
    )
    assert first == "m0\n"
    since = shown[1]["timestamp"] // 10**9  # m3's second: a binary search over m0..m4
    by_time = ok(
        "peek", topic, "--partition", "0", "--from-time", str(since), "--format", "raw", *lk(c)
    )
    assert by_time.splitlines()[-2:] == ["m3", "m4"]
    later = invoke("peek", topic, "--partition", "0", "--from-time", "2999-01-01", *lk(c))
    assert later.exit_code == 0 and later.stdout == "" and "no messages" in later.stderr

    after = channel_stats(c, topic, "c")[0]
    assert (after.depth, after.message_count, after.in_flight_count, after.client_count) == (
        before.depth,
        before.message_count,
        0,
        0,
    )


def test_borrow_on_the_redesign_is_refused(
    redesign_cluster: Cluster, redesign_topics: dict[str, str]
) -> None:
    result = invoke("peek", redesign_topics["peek"], "c", "--borrow", "1", *lk(redesign_cluster))
    assert isinstance(result.exception, ConfigError)
    assert "reads messages in place" in str(result.exception)
    assert channel_stats(redesign_cluster, redesign_topics["peek"], "c")[0].requeue_count == 0
