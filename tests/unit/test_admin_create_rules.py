"""nsqlookupd's placement rule for new topics, said in nsqctl's words before the server
answers "No node is available for topic"."""

from __future__ import annotations

import pytest

from nsqctl import admin
from nsqctl.admin import operations
from nsqctl.errors import ConfigError
from tests.helpers.scripted_lookupd import Reply, Request, ScriptedLookupds
from tests.helpers.youzan_fake import lookupd_leader


@pytest.mark.parametrize(
    ("partitions", "replicas", "ordered", "nodes"),
    [(2, 1, False, 2), (1, 2, False, 2), (4, 1, True, 2), (4, 2, True, 2), (3, 1, False, 5)],
)
def test_layouts_the_server_accepts_pass(
    partitions: int, replicas: int, ordered: bool, nodes: int
) -> None:
    admin.check_node_count("t", partitions, replicas, ordered, nodes)


def test_unordered_partitions_times_replicas_beyond_the_nodes_names_the_ways_out() -> None:
    with pytest.raises(ConfigError) as err:
        admin.check_node_count("t", 4, 1, False, 2)
    text = str(err.value)
    assert "4 partitions x 1 replica(s) need 4 nodes and 2 registered" in text
    assert "add nsqd nodes" in text and "fewer partitions" in text and "`ordered`" in text


@pytest.mark.parametrize(
    ("partitions", "replicas", "ordered", "nodes", "now", "ways"),
    [
        (4, 1, False, 3, 3, "add nsqd nodes"),
        (4, 1, False, 3, 2, "add nsqd nodes, or expand to at most 3 partitions"),
        (
            4,
            2,
            False,
            6,
            2,
            "add nsqd nodes, or expand to at most 3 partitions, or lower its replicas "
            "first: `topic_update(t, replicas=1)`",
        ),
        (
            2,
            3,
            True,
            2,
            1,
            "add nsqd nodes, or lower its replicas first: `topic_update(t, replicas=2)`",
        ),
    ],
)
def test_an_expand_beyond_the_nodes_names_only_ways_an_existing_topic_has(
    partitions: int, replicas: int, ordered: bool, nodes: int, now: int, ways: str
) -> None:
    """A topic keeps its ordering for life: an expand never suggests `ordered`."""
    with pytest.raises(ConfigError) as err:
        admin.check_node_count("t", partitions, replicas, ordered, nodes, expanding_from=now)
    text = str(err.value)
    assert text.endswith(f" and {nodes} registered: {ways}"), text
    assert "ordered`" not in text


def test_more_replicas_than_nodes_fails_even_when_ordered() -> None:
    with pytest.raises(ConfigError, match="3 replicas need 3 nsqd nodes, but 2 registered"):
        admin.check_node_count("t", 1, 3, True, 2)


async def test_a_topic_nsqlookupd_leaves_unwritable_is_created_again_until_writable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nsqlookupd drops a topic check asked for within 6 s of the last one; the same create
    again asks for another, and the wait says what it is doing. A scripted loopback lookupd
    (tests/helpers/scripted_lookupd.py): a real one drops a check at its own moment."""
    monkeypatch.setattr(operations, "NUDGE_INTERVAL", 0.05)
    creates: list[str] = []
    peer = {"broadcast_address": "127.0.0.9", "tcp_port": 1, "http_port": 2, "id": "n"}

    def handle(request: Request) -> Reply:
        path = request.path
        if path == "/listlookup":
            leader = lookupd_leader(request.address)
            return Reply(body={"lookupdnodes": [leader], "lookupdleader": leader})
        if path == "/nodes":
            other = {**peer, "tcp_port": 3, "http_port": 4}
            return Reply(body={"producers": [peer, other]})
        if path == "/topic/create":
            creates.append(request.url)
            return Reply(body=None)
        writable = {"0": peer, "1": peer} if len(creates) >= 3 else {}
        return Reply(body={"partitions": writable, "producers": []})

    said: list[str] = []
    async with ScriptedLookupds(handle) as servers:
        (lookupd,) = await servers.start()
        report = await admin.create_topic_async(
            [lookupd], "t", partitions=2, wait=10, progress=said.append
        )
    assert report.ok and report.notes == ["2/2 partition(s) writable"]
    assert len(creates) == 3 and len(set(creates)) == 1, creates
    assert said and "waiting for nsqlookupd to enable writes on t: 0/2" in said[0]
