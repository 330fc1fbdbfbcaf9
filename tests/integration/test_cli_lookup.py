"""``nsqctl lookup TOPIC`` against real clusters (the redesign half skips until it builds)."""

from __future__ import annotations

import json
import socket
import uuid
from typing import Any

import pytest

from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import assert_one_line_error, cli, invoke


def ok(*args: str) -> Any:
    result = invoke(*args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result


@pytest.fixture
def topic(any_cluster: Cluster) -> str:
    """A fresh topic with channel ``c`` on every nsqd (original) or 2 partitions (redesign)."""
    name = f"lk-{uuid.uuid4().hex[:8]}"
    lk = ["--lookupd", any_cluster.lookupd_http[0]]
    extra = ["--partitions", "2", "--replicas", "1"] if any_cluster.flavor == "redesign" else []
    ok("topic", "create", name, *extra, *lk)
    ok("channel", "create", name, "c", *lk)
    return name


def test_lookup_json_shows_nsqds_partitions_meta_and_channels(
    any_cluster: Cluster, topic: str
) -> None:
    info = json.loads(
        ok("lookup", topic, "--json", "--lookupd", any_cluster.lookupd_http[0]).stdout
    )
    assert info["topic"] == topic
    assert info["family"] == any_cluster.flavor
    assert info["channels"] == ["c"]
    assert {n["http"] for n in info["nsqds"]} <= set(any_cluster.nsqd_http)
    assert {n["tcp"] for n in info["nsqds"]} <= set(any_cluster.nsqd_tcp)
    if any_cluster.flavor == "original":
        assert {n["http"] for n in info["nsqds"]} == set(any_cluster.nsqd_http)
        assert info["meta"] is None and info["partitions"] == []
    else:
        assert info["meta"]["partition_num"] == 2
        assert info["meta"]["ordered"] is False and info["meta"]["ext"] is False
        assert [p["partition"] for p in info["partitions"]] == [0, 1]
        assert {p["leader_http"] for p in info["partitions"]} <= set(any_cluster.nsqd_http)
    assert all(s["ok"] for s in info["lookupds"])


def test_lookup_text_output(original_cluster: Cluster) -> None:
    name = f"lk-{uuid.uuid4().hex[:8]}"
    lk = ["--lookupd", original_cluster.lookupd_http[0]]
    ok("topic", "create", name, *lk)
    ok("channel", "create", name, "c", *lk)
    lines = ok("lookup", name, *lk).stdout.splitlines()
    assert lines[0] == f"topic     {name} (original)"
    assert "nsqds     2" in lines
    for tcp, http in zip(original_cluster.nsqd_tcp, original_cluster.nsqd_http, strict=True):
        assert any(line.startswith(f"  tcp {tcp}  http {http}") for line in lines)
    assert lines[-1] == "channels  c"


def test_unknown_topic_suggests_list_and_create(original_cluster: Cluster) -> None:
    proc = cli("lookup", "lk-missing-topic", "--lookupd", original_cluster.lookupd_http[0])
    line = assert_one_line_error(proc, 1)
    assert "not found" in line
    assert "nsqctl topic list" in line and "nsqctl topic create lk-missing-topic" in line


def test_lookup_needs_a_lookupd(original_cluster: Cluster) -> None:
    proc = cli("lookup", "t", "--nsqd-http", original_cluster.nsqd_http[0])
    assert "--lookupd" in assert_one_line_error(proc, 2)


def test_unreachable_lookupd_is_one_line(original_cluster: Cluster) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    line = assert_one_line_error(cli("lookup", "t", "--lookupd", dead), 1)
    assert dead in line and "HTTP port" in line


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["lookup", "bad topic", "--lookupd", "127.0.0.1:4161"], "topic name"),
        (["lookup", "t", "--lookupd", "127.0.0.1"], "missing ':PORT'"),
    ],
)
def test_usage_errors(args: list[str], words: str) -> None:
    assert words in assert_one_line_error(cli(*args), 2)
