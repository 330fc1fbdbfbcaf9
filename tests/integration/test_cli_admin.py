"""``nsqctl topic|channel ...`` against real clusters; effects checked in nsqd ``/stats``.

Every test uses its own topic names (the session clusters are shared). Tests taking
``any_cluster`` run on both families; the redesign ones skip while its servers cannot be
built. Real subprocesses check exit codes and that errors are one stderr line.
"""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from typing import Any

import pytest

from nsqctl.cli import admin_actions
from nsqctl.errors import ConfigError
from nsqctl.producer import Producer
from nsqctl.servers.cluster import Cluster
from nsqctl.stats import read_nsqd_stats
from nsqctl.stats.model import ChannelStats, TopicPartitionStats
from tests.helpers.cli import assert_one_line_error, cli, invoke


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def lk(c: Cluster) -> list[str]:
    return ["--lookupd", c.lookupd_http[0]]


def ok(*args: str) -> Any:
    result = invoke(*args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def topics_on(address: str, topic: str) -> list[TopicPartitionStats]:
    """This nsqd's /stats entries for ``topic`` (one per partition on the redesign)."""
    node = read_nsqd_stats(address, topic=topic)
    return [t for t in node.topics if t.topic == topic and t.is_leader]


def all_entries(c: Cluster, topic: str) -> list[TopicPartitionStats]:
    return [t for a in c.nsqd_http for t in topics_on(a, topic)]


def channel_entries(c: Cluster, topic: str, channel: str) -> list[ChannelStats]:
    return [ch for t in all_entries(c, topic) if (ch := t.channel(channel)) is not None]


def create(c: Cluster, topic: str) -> None:
    extra = ["--partitions", "2", "--replicas", "1"] if c.flavor == "redesign" else []
    ok("topic", "create", topic, *extra, *lk(c))


async def publish(c: Cluster, topic: str, count: int) -> None:
    """``count`` messages to every nsqd (original) or spread over the partitions."""
    if c.flavor == "redesign":
        async with Producer(lookupd_http=c.lookupd_http) as p:
            for _ in range(count):
                await p.publish(topic, b"x")
        return
    for address in c.nsqd_tcp:
        async with Producer(nsqd_tcp=[address]) as p:
            for _ in range(count):
                await p.publish(topic, b"x")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# ----------------------------------------------------------------- topics


def test_topic_create_list_delete(any_cluster: Cluster) -> None:
    topic = name("adm-life")
    create(any_cluster, topic)
    assert all_entries(any_cluster, topic), "created topic missing from every nsqd"
    if any_cluster.flavor == "original":
        assert all(topics_on(a, topic) for a in any_cluster.nsqd_http)
    listed = ok("topic", "list", "--json", *lk(any_cluster))
    assert topic in json.loads(listed.stdout)["topics"]

    ok("topic", "delete", topic, "--yes", *lk(any_cluster))
    if any_cluster.flavor == "original":
        assert all_entries(any_cluster, topic) == []
        listed = ok("topic", "list", *lk(any_cluster))
        assert topic not in listed.stdout.split()


def test_topic_create_prints_what_it_did_per_node(original_cluster: Cluster) -> None:
    topic = name("adm-create")
    result = ok("topic", "create", topic, *lk(original_cluster))
    lines = result.stdout.splitlines()
    assert lines[0] == f"topic create {topic} (original)"
    assert (
        f"  ok       lookupd {original_cluster.lookupd_http[0]}  POST /topic/create?topic={topic}"
        in lines
    )
    for address in original_cluster.nsqd_http:
        assert f"  ok       nsqd {address}  POST /topic/create?topic={topic}" in lines


def test_topic_pause_and_unpause_on_every_nsqd(original_cluster: Cluster) -> None:
    topic = name("adm-pause")
    create(original_cluster, topic)
    result = ok("topic", "pause", topic, "--json", *lk(original_cluster))
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert {r["node"] for r in report["results"]} == set(original_cluster.nsqd_http)
    assert [t.paused for t in all_entries(original_cluster, topic)] == [True, True]
    ok("topic", "unpause", topic, *lk(original_cluster))
    assert [t.paused for t in all_entries(original_cluster, topic)] == [False, False]


def test_topic_empty_drops_queued_messages(original_cluster: Cluster) -> None:
    topic = name("adm-tempty")
    create(original_cluster, topic)
    asyncio.run(publish(original_cluster, topic, 3))
    assert [t.depth for t in all_entries(original_cluster, topic)] == [3, 3]
    ok("topic", "empty", topic, "--yes", *lk(original_cluster))
    assert [t.depth for t in all_entries(original_cluster, topic)] == [0, 0]


# ----------------------------------------------------------------- channels


def test_channel_create_list_delete(any_cluster: Cluster) -> None:
    topic, channel = name("adm-ch"), "c1"
    create(any_cluster, topic)
    ok("channel", "create", topic, channel, *lk(any_cluster))
    entries = all_entries(any_cluster, topic)
    assert entries and all(channel in [ch.name for ch in t.channels] for t in entries)
    listed = ok("channel", "list", topic, "--json", *lk(any_cluster))
    assert json.loads(listed.stdout)["channels"] == [channel]

    ok("channel", "delete", topic, channel, "--yes", *lk(any_cluster))
    assert channel_entries(any_cluster, topic, channel) == []


def test_channel_pause_and_unpause(any_cluster: Cluster) -> None:
    topic, channel = name("adm-chp"), "c1"
    create(any_cluster, topic)
    ok("channel", "create", topic, channel, *lk(any_cluster))
    ok("channel", "pause", topic, channel, *lk(any_cluster))
    paused = [ch.paused for ch in channel_entries(any_cluster, topic, channel)]
    assert paused and all(paused)
    ok("channel", "unpause", topic, channel, *lk(any_cluster))
    assert not any(ch.paused for ch in channel_entries(any_cluster, topic, channel))


def test_channel_empty_drops_queued_messages(any_cluster: Cluster) -> None:
    topic, channel = name("adm-che"), "c1"
    create(any_cluster, topic)
    ok("channel", "create", topic, channel, *lk(any_cluster))
    asyncio.run(publish(any_cluster, topic, 4))
    assert sum(ch.depth for ch in channel_entries(any_cluster, topic, channel)) > 0
    ok("channel", "empty", topic, channel, "--yes", *lk(any_cluster))
    depths = [ch.depth for ch in channel_entries(any_cluster, topic, channel)]
    assert depths and all(d == 0 for d in depths)


def test_skip_on_the_original_is_a_usage_error(original_cluster: Cluster) -> None:
    topic = name("adm-skip")
    create(original_cluster, topic)
    proc = cli("channel", "skip", topic, "c", "--yes", *lk(original_cluster))
    assert "only on the redesign" in assert_one_line_error(proc, 2)


# ----------------------------------------------------------------- confirmation


def test_destructive_without_a_terminal_refuses(original_cluster: Cluster) -> None:
    topic = name("adm-notty")
    create(original_cluster, topic)
    for args in (
        ["topic", "delete", topic],
        ["topic", "empty", topic],
        ["channel", "empty", topic, "c"],
        ["channel", "delete", topic, "c"],
    ):
        line = assert_one_line_error(cli(*args, *lk(original_cluster)), 2)
        assert "pass --yes" in line
    assert len(all_entries(original_cluster, topic)) == 2


def test_prompt_declined_changes_nothing_and_accepted_deletes(
    original_cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admin_actions, "stdin_is_tty", lambda: True)
    topic = name("adm-prompt")
    create(original_cluster, topic)
    declined = invoke("topic", "delete", topic, *lk(original_cluster), input="n\n")
    assert declined.exit_code == 1
    assert "aborted" in str(declined.exception)
    said = declined.stderr
    assert f"unregister topic {topic} on lookupd {original_cluster.lookupd_http[0]}" in said
    assert f"delete topic {topic} with its queued messages on nsqds" in said
    assert len(all_entries(original_cluster, topic)) == 2

    accepted = invoke("topic", "delete", topic, *lk(original_cluster), input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert all_entries(original_cluster, topic) == []


# ----------------------------------------------------------------- errors


def test_unknown_topic_is_one_line_with_a_hint(original_cluster: Cluster) -> None:
    line = assert_one_line_error(cli("topic", "pause", name("adm-nope"), *lk(original_cluster)), 1)
    assert "not found" in line and "nsqctl topic list" in line
    line = assert_one_line_error(cli("channel", "list", name("adm-nope"), *lk(original_cluster)), 1)
    assert "nsqctl topic create" in line


def test_a_failed_node_is_named_and_fails_the_command(original_cluster: Cluster) -> None:
    topic = name("adm-partial")
    create(original_cluster, topic)
    dead = f"127.0.0.1:{closed_port()}"
    nodes = [x for a in [*original_cluster.nsqd_http, dead] for x in ("--nsqd-http", a)]
    proc = cli("topic", "pause", topic, *nodes)
    line = assert_one_line_error(proc, 1)
    # known before anything is sent: refused whole, not paused on the nsqds that answer
    assert dead in line and "refused, nothing was changed" in line
    assert proc.stdout == ""
    assert [t.paused for t in all_entries(original_cluster, topic)] == [False, False]


def test_create_and_delete_with_a_lookupd_down_are_refused_whole(
    original_cluster: Cluster,
) -> None:
    """One create (or delete) per nsqlookupd and nsqd, none undone: one nsqlookupd given
    that does not answer refuses it before any is sent (it used to change everything else,
    then fail)."""
    c = original_cluster
    topic = name("adm-create-lkdown")
    dead = f"127.0.0.1:{closed_port()}"
    proc = cli("topic", "create", topic, *lk(c), "--lookupd", dead)
    line = assert_one_line_error(proc, 1)
    assert f"nsqlookupd {dead}" in line and "refused, nothing was changed" in line, line
    assert proc.stdout == ""
    assert all_entries(c, topic) == []
    assert topic not in ok("topic", "list", *lk(c)).stdout.split()
    create(c, topic)
    ok("channel", "create", topic, "c", *lk(c))
    for args in (("topic", "delete", topic), ("channel", "delete", topic, "c")):
        for how in ("--dry-run", "--yes"):
            proc = cli(*args, *lk(c), "--lookupd", dead, how)
            line = assert_one_line_error(proc, 1)
            assert f"nsqlookupd {dead}" in line and "nothing was changed" in line, line
    assert len(channel_entries(c, topic, "c")) == len(c.nsqd_http)
    assert topic in ok("topic", "list", *lk(c)).stdout.split()


def test_original_refuses_partition_options(original_cluster: Cluster) -> None:
    topic = name("adm-parts")
    line = assert_one_line_error(
        cli("topic", "create", topic, "--partitions", "3", *lk(original_cluster)), 2
    )
    assert "--partitions" in line
    assert all_entries(original_cluster, topic) == []


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["topic", "list", "--lookupd", "nope:nope"], 2, "bad address"),
        (["topic", "pause", "bad name!", "--lookupd", "127.0.0.1:4161"], 2, "topic name"),
        (["channel", "pause", "t", "bad/ch", "--lookupd", "127.0.0.1:4161"], 2, "channel name"),
        (["topic", "list"], 2, "--lookupd"),
    ],
)
def test_usage_errors_exit_2_with_one_line(args: list[str], code: int, words: str) -> None:
    assert words in assert_one_line_error(cli(*args), code)


def test_unreachable_lookupd_is_a_runtime_error() -> None:
    dead = f"127.0.0.1:{closed_port()}"
    for args in (["topic", "list"], ["topic", "pause", "t"], ["channel", "list", "t"]):
        line = assert_one_line_error(cli(*args, "--lookupd", dead), 1)
        assert dead in line and "4161" in line


def test_invalid_name_via_cli_runner_is_a_config_error() -> None:
    result = invoke("topic", "delete", "a b", "--yes", "--lookupd", "127.0.0.1:4161")
    assert isinstance(result.exception, ConfigError)


# ----------------------------------------------------------------- nsqd-only mode


def test_nsqd_http_only_lists_and_acts(original_cluster: Cluster) -> None:
    topic = name("adm-direct")
    nodes = [x for a in original_cluster.nsqd_http for x in ("--nsqd-http", a)]
    ok("topic", "create", topic, *nodes)
    assert len(all_entries(original_cluster, topic)) == 2
    ok("channel", "create", topic, "c", *nodes)
    assert topic in ok("topic", "list", *nodes).stdout.split()
    assert ok("channel", "list", topic, *nodes).stdout.split() == ["c"]
    ok("channel", "pause", topic, "c", *nodes)
    assert all(ch.paused for ch in channel_entries(original_cluster, topic, "c"))


# ----------------------------------------------------------------- all or nothing, dry runs


def partition_depths(c: Cluster, topic: str, channel: str) -> dict[int, int]:
    """partition → the channel's depth on its leader (redesign)."""
    out: dict[int, int] = {}
    for t in all_entries(c, topic):
        ch = t.channel(channel)
        if ch is not None and t.partition is not None:
            out[t.partition] = ch.depth
    return out


async def publish_to(c: Cluster, topic: str, partition: int, count: int) -> None:
    async with Producer(lookupd_http=c.lookupd_http) as p:
        await p.publish_many(topic, [b"x"] * count, partition=partition)


def test_setoffset_by_time_checks_every_partition_first(redesign_cluster: Cluster) -> None:
    """A time cannot be searched on a partition holding no messages (youzan: HTTP 500
    "commit log end of file"): the command is refused before any partition moves. Times
    are ISO 8601 or Unix seconds, as `tail --from-time` takes them."""
    c = redesign_cluster
    topic = name("adm-offset")
    create(c, topic)
    ok("channel", "create", topic, "c", *lk(c))
    asyncio.run(publish_to(c, topic, 0, 5))
    assert partition_depths(c, topic, "c") == {0: 5, 1: 0}
    later = "2099-01-01T00:00:00"  # after every message: the end of partition 0
    unix_later = "4070908800"  # the same, in Unix seconds
    line = assert_one_line_error(
        cli("channel", "setoffset", topic, "c", "--timestamp", unix_later, "--yes", *lk(c)), 1
    )
    assert "nothing was changed" in line and "partition 1 holds no messages" in line, line
    assert "--partition (0)" in line, line
    assert partition_depths(c, topic, "c") == {0: 5, 1: 0}  # partition 0 did not move

    def setoffset(when: str) -> None:
        offset = ["--partition", "0", "--timestamp", when]
        ok("channel", "setoffset", topic, "c", *offset, "--yes", *lk(c))

    setoffset(later)
    assert partition_depths(c, topic, "c") == {0: 0, 1: 0}
    setoffset("2000-01-01T00:00:00+00:00")
    assert partition_depths(c, topic, "c") == {0: 5, 1: 0}


def test_dry_runs_change_nothing_and_say_what_the_real_run_does(
    redesign_cluster: Cluster,
) -> None:
    c = redesign_cluster
    topic = name("adm-dry")
    create(c, topic)
    ok("channel", "create", topic, "c", *lk(c))
    asyncio.run(publish_to(c, topic, 0, 3))
    asyncio.run(publish_to(c, topic, 1, 4))
    before = partition_depths(c, topic, "c")
    assert before == {0: 3, 1: 4}
    leaders = {t.partition: t.node for t in all_entries(c, topic)}
    where = [f"{leaders[p]} (partition {p})" for p in (0, 1)]
    said: dict[str, str] = {}
    for args in (
        ["channel", "empty", topic, "c"],
        ["channel", "skip", topic, "c"],
        ["channel", "delete", topic, "c"],
        ["channel", "setoffset", topic, "c", "--end"],
        ["topic", "delete", topic],
    ):
        proc = cli(*args, "--dry-run", *lk(c))  # no terminal, no --yes: a dry run asks nothing
        assert proc.returncode == 0, (args, proc.stderr)
        out = proc.stdout
        assert out.startswith("dry run: would ") and "nothing was changed" in out, out
        assert "POST" not in out and "?" not in out, out  # words, not requests
        said[args[1]] = out
    for text in (said["empty"], said["skip"], said["setoffset"]):
        assert all(w in text for w in where), (text, where)
    assert "drop every queued message of channel" in said["empty"]
    assert "would lose:" in said["empty"] and "total: 7 messages" in said["empty"]
    assert f"delete topic {topic} on every partition" in said["delete"]
    assert partition_depths(c, topic, "c") == before
    assert not any(ch.skipped for ch in channel_entries(c, topic, "c"))
    real = json.loads(ok("channel", "empty", topic, "c", "--yes", "--json", *lk(c)).stdout)
    done = [f"{r['node']} (partition {r['partition']})" for r in real["results"]]
    assert sorted(done) == sorted(where) and all(w in said["empty"] for w in done)
    assert partition_depths(c, topic, "c") == {0: 0, 1: 0}
    # an action the family lacks is bad input for that cluster: exit 2, like `peek`
    for args in (["topic", "pause", topic], ["topic", "empty", topic, "--dry-run"]):
        line = assert_one_line_error(cli(*args, *lk(c)), 2)
        assert "the redesign nsqd has no topic" in line, line


def test_actions_with_a_lookupd_down_are_refused_as_create_is(original_cluster: Cluster) -> None:
    """An nsqd registers with the nsqlookupds it was told of: one that does not answer may
    be the only one knowing an nsqd that holds the topic, so a pause, unpause or empty
    found through the lookupds is refused whole, as a create is; naming the nsqds alone
    (--nsqd-http, no --lookupd) is the way through in an incident."""
    c = original_cluster
    topic = name("adm-act-lkdown")
    create(c, topic)
    ok("channel", "create", topic, "c", *lk(c))
    dead = f"127.0.0.1:{closed_port()}"
    actions = [
        (kind, action) for kind in ("topic", "channel") for action in ("pause", "unpause", "empty")
    ]
    for kind, action in actions:
        subject = (topic,) if kind == "topic" else (topic, "c")
        proc = cli(kind, action, *subject, *lk(c), "--lookupd", dead, "--yes")
        line = assert_one_line_error(proc, 1)
        assert f"nsqlookupd {dead}" in line and "refused, nothing was changed" in line, line
        assert "--nsqd-http" in line and "--lookupd" in line, line
        assert proc.stdout == ""
    assert [t.paused for t in all_entries(c, topic)] == [False, False]
    assert [ch.paused for ch in channel_entries(c, topic, "c")] == [False, False]
    nodes = [x for a in c.nsqd_http for x in ("--nsqd-http", a)]
    ok("topic", "pause", topic, *nodes)
    ok("channel", "pause", topic, "c", *nodes)
    assert [t.paused for t in all_entries(c, topic)] == [True, True]
    assert [ch.paused for ch in channel_entries(c, topic, "c")] == [True, True]
