"""Lookup parsing/merging for both families, plus the client's failure policy.

Redesign payloads are hand-written to match youzan/nsq ``nsqlookupd/http.go`` (doLookup,
doListLookup), ``registration_db.go`` (PeerInfo) and ``internal/http_api`` (wrapping).
Client tests run the client as in production (its own HTTP path, a real socket) against
scripted lookupds (:mod:`tests.helpers.scripted_lookupd`), which give chosen answers at
chosen moments, stop listening and come back; real-server behaviour is covered by
``tests/integration/test_lookup_original.py``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from nsqctl.errors import ConfigError, LookupUnavailableError
from nsqctl.lookup import (
    ACCEPT_V1,
    LookupAnswer,
    LookupClient,
    LookupProtocolError,
    Peer,
    TopicMeta,
    Topology,
    merge_answers,
    parse_listlookup,
    parse_lookup_response,
)
from tests.helpers.scripted_lookupd import HANG, Reply, Request, ScriptedLookupds, closed_address
from tests.helpers.wait import wait_for


def peer(host: str, tcp: int, http: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "remote_address": f"{host}:5{tcp % 10000}",
        "hostname": f"h-{host}",
        "broadcast_address": host,
        "tcp_port": tcp,
        "http_port": http or tcp + 1,
        "version": extra.pop("version", "1.3.0"),
        **extra,
    }


def ha_peer(host: str, tcp: int) -> dict[str, Any]:
    return peer(
        host,
        tcp,
        version="0.3.7-HA.1.13.0",
        id=f"{host}:{tcp + 10}",
        distributed_id=f"{host}:{tcp + 2}:{tcp}:{tcp + 1}",
    )


ORIGINAL = {"channels": ["c1"], "producers": [peer("127.0.0.1", 4150)]}

REDESIGN_CLUSTER = {
    "channels": ["BaseConsumer"],
    "meta": {
        "partition_num": 2,
        "replica": 2,
        "extend_support": True,
        "ordered": True,
        "multi_part": False,
        "disable_channel_auto_create": True,
    },
    "producers": [ha_peer("127.0.0.1", 4150), ha_peer("127.0.0.2", 4150)],
    "partitions": {"0": ha_peer("127.0.0.1", 4150), "1": ha_peer("127.0.0.2", 4150)},
}


# ----------------------------------------------------------------------------- parsing


def test_parse_original_unwrapped() -> None:
    ans = parse_lookup_response(ORIGINAL, source="a:1", fetched_at=5.0)
    assert ans.producers[0].key == "127.0.0.1:4150"
    assert ans.producers[0].http_port == 4151
    assert ans.channels == ("c1",)
    assert not ans.has_partitions and ans.partitions == {} and ans.meta is None
    assert ans.fetched_at == 5.0 and ans.source == "a:1"


def test_parse_wrapped_legacy_shape() -> None:
    wrapped = {"status_code": 200, "status_txt": "OK", "data": REDESIGN_CLUSTER}
    ans = parse_lookup_response(wrapped)
    assert ans.has_partitions
    assert ans.partitions[1].broadcast_address == "127.0.0.2"
    assert ans.partitions[0].distributed_id == "127.0.0.1:4152:4150:4151"
    assert ans.partitions[0].id == "127.0.0.1:4160"
    assert ans.meta == TopicMeta(2, 2, True, True, False, True)


def test_parse_redesign_standalone_and_nulls() -> None:
    # standalone redesign: partitions present but empty, no meta
    ans = parse_lookup_response({"channels": [], "producers": [], "partitions": {}})
    assert ans.has_partitions and ans.meta is None and not ans.producers
    # cluster write disabled: youzan sets peers/partitions to nil -> JSON null
    ans = parse_lookup_response(
        {"channels": None, "producers": None, "partitions": None, "meta": {"partition_num": 0}}
    )
    assert ans.has_partitions and ans.producers == () and ans.partitions == {}
    assert ans.meta is not None and not ans.meta.valid


def test_parse_skips_bad_partition_ids_like_go_nsq() -> None:
    body = {
        "producers": [],
        "partitions": {
            "-1": ha_peer("a", 1),
            "x": ha_peer("b", 2),
            "1025": ha_peer("c", 3),
            "3": ha_peer("d", 4),
        },
    }
    assert list(parse_lookup_response(body).partitions) == [3]


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        ({"message": "TOPIC_NOT_FOUND"}, 404),  # original v1
        (None, 404),
        ({"message": "Key not found"}, 404),  # redesign access=w, topic not in etcd
        ({"status_code": 500, "status_txt": "Key not found", "data": None}, 200),  # legacy mode
        ({"status_code": 404, "status_txt": "TOPIC_NOT_FOUND", "data": None}, 200),
    ],
)
def test_parse_topic_not_found(payload: Any, status: int) -> None:
    ans = parse_lookup_response(payload, http_status=status)
    assert ans.topic_not_found and ans.producers == ()


@pytest.mark.parametrize(
    "payload",
    [
        {"status_code": 500, "status_txt": "INTERNAL_ERROR", "data": None},
        {"message": "INVALID_ACCESS_MODE"},
        ["not", "an", "object"],
        {"producers": "nope"},
        {"producers": [{"hostname": "x"}]},  # no tcp_port
    ],
)
def test_parse_errors(payload: Any) -> None:
    with pytest.raises(LookupProtocolError):
        parse_lookup_response(payload)


def test_parse_listlookup_both_field_spellings() -> None:
    body = {
        "lookupdnodes": [
            {
                "ID": "n1",
                "NodeIP": "127.0.0.1",
                "TcpPort": "4160",
                "HttpPort": "4161",
                "RpcPort": "4162",
                "Epoch": 3,
            },
            {
                "ID": "n2",
                "NodeIp": "127.0.0.2",
                "TcpPort": "4160",
                "HttpPort": "4161",
                "RpcPort": "4162",
                "Epoch": 3,
            },
            {"ID": "bad", "NodeIP": "", "HttpPort": "4161"},
        ],
        "lookupdleader": {"ID": "n2", "NodeIP": "127.0.0.2", "HttpPort": "4161"},
    }
    listing = parse_listlookup({"status_code": 200, "status_txt": "OK", "data": body})
    assert listing is not None
    assert [str(n.http_address) for n in listing.nodes] == ["127.0.0.1:4161", "127.0.0.2:4161"]
    assert listing.nodes[0].rpc_port == 4162 and listing.nodes[0].epoch == 3
    assert listing.leader is not None and listing.leader.id == "n2"
    assert parse_listlookup(None) is None  # standalone: handler returns nil
    assert parse_listlookup({"status_code": 200, "status_txt": "OK", "data": None}) is None


# ----------------------------------------------------------------------------- merging


def ans(src: str, body: dict[str, Any], at: float, epoch: int | None = None) -> LookupAnswer:
    return parse_lookup_response(body, source=src, fetched_at=at, epoch=epoch)


def test_merge_original_union_by_broadcast_tcp() -> None:
    a = ans(
        "l1", {"channels": ["x"], "producers": [peer("10.0.0.1", 4150), peer("10.0.0.2", 4150)]}, 1
    )
    b = ans(
        "l2",
        {"channels": ["y", "x"], "producers": [peer("10.0.0.2", 4150), peer("10.0.0.2", 4250)]},
        2,
    )
    topo = merge_answers([a, b], topic="t")
    assert [p.key for p in topo.producers] == ["10.0.0.1:4150", "10.0.0.2:4150", "10.0.0.2:4250"]
    assert topo.channels == ("x", "y")
    assert not topo.is_redesign and topo.partitions == {}
    assert topo.fetched_at == 2 and not topo.stale
    assert [t[1] for t in topo.targets()] == [None, None, None]


def test_merge_partition_leader_newest_answer_wins() -> None:
    old = ans("l1", {"producers": [], "partitions": {"0": ha_peer("10.0.0.1", 4150)}}, 10)
    new = ans(
        "l2",
        {
            "producers": [],
            "partitions": {"0": ha_peer("10.0.0.9", 4150), "1": ha_peer("10.0.0.1", 4150)},
        },
        20,
    )
    for order in ([old, new], [new, old]):
        topo = merge_answers(order, topic="t")
        assert topo.partitions[0].broadcast_address == "10.0.0.9"
        assert topo.is_redesign
    # leaders also show up as producers even when 'producers' was empty
    assert {p.key for p in topo.producers} == {"10.0.0.9:4150", "10.0.0.1:4150"}
    assert [(p.key, pid) for p, pid in topo.targets()] == [
        ("10.0.0.9:4150", 0),
        ("10.0.0.1:4150", 1),
    ]


def test_merge_known_epoch_beats_fetch_time() -> None:
    a = ans("l1", {"producers": [], "partitions": {"0": ha_peer("10.0.0.1", 1)}}, 99, epoch=7)
    b = ans("l2", {"producers": [], "partitions": {"0": ha_peer("10.0.0.2", 1)}}, 100, epoch=6)
    c = ans("l3", {"producers": [], "partitions": {"0": ha_peer("10.0.0.3", 1)}}, 200)
    assert merge_answers([a, b, c]).partitions[0].broadcast_address == "10.0.0.1"


def test_merge_meta_prefers_valid_and_partition_num() -> None:
    cluster = ans("l1", REDESIGN_CLUSTER, 1)
    nometa = ans("l2", {"producers": [], "partitions": {}, "meta": {"partition_num": 0}}, 2)
    topo = merge_answers([cluster, nometa])
    assert topo.meta is not None and topo.meta.partition_num == 2 and topo.meta.ordered
    assert topo.partition_num == 2
    assert len(topo.partition_infos) == 2 and topo.partition_infos[1].partition == 1
    assert merge_answers([nometa]).partition_num == 0


def test_merge_topic_not_found() -> None:
    nf = parse_lookup_response({"message": "TOPIC_NOT_FOUND"}, http_status=404)
    topo = merge_answers([nf, nf], topic="t")
    assert topo.topic_not_found and topo.is_empty
    mixed = merge_answers([nf, ans("l", ORIGINAL, 1)], topic="t")
    assert not mixed.topic_not_found and len(mixed.producers) == 1


def test_topology_from_nsqd_addresses() -> None:
    topo = Topology.from_nsqd_addresses(["127.0.0.1:4150", "[::1]:4150", "127.0.0.1:4150"])
    assert [p.key for p in topo.producers] == ["127.0.0.1:4150", "[::1]:4150"]
    assert not topo.stale and not topo.is_redesign
    assert Peer.from_address("h:1").tcp_address.port == 1
    with pytest.raises(ConfigError, match=r"e\.g\. 127\.0\.0\.1:4150"):
        Topology.from_nsqd_addresses(["nope"])


# ------------------------------------------------------------------- client (scripted lookupds)


class Script:
    """Per-lookupd scripted answers (by address), served by :class:`ScriptedLookupds`:
    the client runs as in production, over its own HTTP path and a real socket."""

    def __init__(self) -> None:
        self.lookup: dict[str, Any] = {}
        self.listlookup: dict[str, tuple[int, Any]] = {}
        self.failing: set[str] = set()  # lookupds answering every request with HTTP 500
        self.lookupds = ScriptedLookupds(self)

    def __call__(self, request: Request) -> Reply:
        assert request.headers["accept"] == ACCEPT_V1
        if request.address in self.failing:
            return Reply(500, b"<html>down for maintenance</html>", "text/html")
        if request.path == "/listlookup":
            return Reply(*self.listlookup.get(request.address, (404, {"message": "NOT_FOUND"})))
        if request.path == "/lookup":
            body = self.lookup.get(request.address, ORIGINAL)
            if body is None:
                return Reply(404, {"message": "TOPIC_NOT_FOUND"})
            return Reply(200, body)
        return Reply(404, {"message": "NOT_FOUND"})

    def asked(self, address: str, path: str = "/lookup") -> int:
        return sum(1 for r in self.lookupds.requests if r.address == address and r.path == path)


def node(address: str, node_id: str) -> dict[str, Any]:
    """A /listlookup node for the lookupd at ``address``."""
    host, port = address.rsplit(":", 1)
    return {"ID": node_id, "NodeIP": host, "TcpPort": port, "HttpPort": port, "RpcPort": "9"}


async def test_client_sends_query_and_merges() -> None:
    script = Script()
    async with script.lookupds:
        one, two = await script.lookupds.start(2)
        script.lookup[two] = {"channels": [], "producers": [peer("10.0.0.5", 4150)]}
        async with LookupClient([one, two]) as lc:
            topo = await lc.lookup("t", access="w")
    assert {p.key for p in topo.producers} == {"127.0.0.1:4150", "10.0.0.5:4150"}
    q = next(r for r in script.lookupds.requests if r.path == "/lookup")
    assert q.params == {"topic": "t", "access": "w", "metainfo": "true"}
    assert all(s.ok for s in topo.sources)


async def test_listlookup_404_is_original_and_not_asked_again() -> None:
    script = Script()
    async with script.lookupds:
        (one,) = await script.lookupds.start()
        async with LookupClient([one]) as lc:
            await lc.lookup("t")
            await lc.lookup("t")
            assert lc.health()[one]["is_original"]
    assert script.asked(one, "/listlookup") == 1


async def test_listlookup_discovers_other_lookupds() -> None:
    script = Script()
    async with script.lookupds:
        one, three = await script.lookupds.start(2)
        script.listlookup[one] = (
            200,
            {
                "lookupdnodes": [node(one, "a"), node(three, "b")],
                "lookupdleader": {"ID": "a", "NodeIP": "127.0.0.1", "HttpPort": one[10:]},
            },
        )
        script.lookup[three] = REDESIGN_CLUSTER
        async with LookupClient([one]) as lc:
            topo = await lc.lookup("t")
            assert three in lc.addresses
    assert topo.is_redesign and topo.partition_num == 2
    assert {s.address for s in topo.sources} == {one, three}


async def test_failing_lookupd_is_skipped_exponentially_but_not_forgotten() -> None:
    script = Script()
    async with script.lookupds:
        one, two = await script.lookupds.start(2)
        script.failing.add(two)
        lc = LookupClient([one, two], failure_threshold=2, max_skip_rounds=4)
        for _ in range(20):
            topo = await lc.lookup("t")
            assert not topo.stale
        # /listlookup opens every round that asks a lookupd (its /lookup goes alongside)
        asked = script.asked(two, "/listlookup")
        # rounds with an attempt: fail,fail,(skip1),fail,(skip2),fail,(skip4),fail,(skip4),...
        assert 5 <= asked <= 8 < 20
        assert script.asked(one) == 20
        assert two in lc.addresses  # configured: never forgotten
        script.failing.clear()
        for _ in range(6):
            await lc.lookup("t")
        assert lc.health()[two]["failures"] == 0
        await lc.aclose()


async def test_discovered_lookupd_forgotten_after_failures() -> None:
    script = Script()
    gone = closed_address()
    async with script.lookupds:
        (one,) = await script.lookupds.start()
        script.listlookup[one] = (200, {"lookupdnodes": [node(gone, "b")], "lookupdleader": {}})
        async with LookupClient([one], forget_after=2) as lc:
            await lc.lookup("t")
            assert gone in lc.addresses
            await lc.lookup("t")  # listlookup re-adds nothing new; second failure forgets it
            assert gone not in lc.addresses


async def test_all_down_after_success_returns_stale_and_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = Script()
    async with script.lookupds:
        (one,) = await script.lookupds.start()
        async with LookupClient([one], failure_threshold=100) as lc:
            fresh = await lc.lookup("t")
            await script.lookupds.down(one)
            with caplog.at_level(logging.WARNING, logger="nsqctl.lookup"):
                s1 = await lc.lookup("t")
                s2 = await lc.lookup("t")
            assert s1.stale and s2.stale and not fresh.stale
            assert s1.producers == fresh.producers
            assert not s1.sources[0].ok and "refused" in s1.sources[0].error
            assert sum("last known topology" in r.message for r in caplog.records) == 1
            await script.lookupds.up(one)
            assert not (await lc.lookup("t")).stale


async def test_nothing_known_raises_actionable_error() -> None:
    gone = closed_address()
    async with LookupClient([gone]) as lc:
        with pytest.raises(LookupUnavailableError) as info:
            await lc.lookup("t")
    msg = str(info.value)
    assert gone in msg and "4161" in msg and "\n" not in msg


async def test_known_lookupd_is_asked_alongside_listlookup() -> None:
    """``/lookup`` goes to the configured lookupd while its ``/listlookup`` is still
    unanswered (one round trip less before a client's first connect): here ``/listlookup``
    never answers, so a ``/lookup`` arrives only if it was sent alongside. When
    ``/listlookup`` then fails, that lookupd's round fails as before, its ``/lookup``
    answer unused."""

    def handler(request: Request) -> Reply:
        return HANG if request.path == "/listlookup" else Reply(200, ORIGINAL)

    async with ScriptedLookupds(handler) as lookupds:
        (one,) = await lookupds.start()
        async with LookupClient([one], timeout=1.0) as lc:
            with pytest.raises(LookupUnavailableError, match="timed out"):
                await lc.lookup("t")
    assert sorted(r.path for r in lookupds.requests) == ["/listlookup", "/lookup"]


async def test_timeout_counts_as_failure() -> None:
    async with ScriptedLookupds(lambda request: HANG) as lookupds:
        (silent,) = await lookupds.start()
        async with LookupClient([silent], timeout=0.3) as lc:
            with pytest.raises(LookupUnavailableError, match="timed out"):
                await lc.lookup("t")


async def test_topic_not_found_is_not_an_error() -> None:
    script = Script()
    async with script.lookupds:
        (one,) = await script.lookupds.start()
        script.lookup[one] = None
        async with LookupClient([one]) as lc:
            topo = await lc.lookup("missing")
    assert topo.topic_not_found and topo.is_empty and not topo.stale
    assert topo.sources[0].ok and topo.sources[0].topic_not_found


async def test_server_error_body_is_a_failure() -> None:
    def broken(request: Request) -> Reply:
        if request.path == "/lookup":
            return Reply(500, b"<html>oops</html>", "text/html")
        return Reply(404)

    async with ScriptedLookupds(broken) as lookupds:
        (one,) = await lookupds.start()
        async with LookupClient([one]) as lc:
            with pytest.raises(LookupUnavailableError, match="HTTP 500"):
                await lc.lookup("t")


async def test_poll_jitter_and_refresh() -> None:
    script = Script()
    async with script.lookupds:
        (one,) = await script.lookupds.start()
        lc = LookupClient([one], poll_interval=100.0, jitter=0.3)
        delays = [lc.next_delay() for _ in range(200)]
        assert all(70.0 <= d <= 130.0 for d in delays) and max(delays) - min(delays) > 10
        got: list[Topology] = []

        async def consume() -> None:
            async for topo in lc.poll("t"):
                got.append(topo)
                if len(got) == 2:
                    return

        task = asyncio.create_task(consume())
        # first poll immediate (within the wait, where a delayed one would be >= 70 s away);
        # the next one is ~100 s away, so there is still just the one
        await wait_for(lambda: got, 5, "the first poll")
        assert len(got) == 1
        lc.request_refresh()
        await asyncio.wait_for(task, 2)
        assert len(got) == 2
        await lc.aclose()


async def test_start_polling_survives_outage_and_calls_async_callback() -> None:
    script = Script()
    async with script.lookupds:
        (one,) = await script.lookupds.start()
        await script.lookupds.down(one)
        lc = LookupClient([one], poll_interval=0.01, jitter=0.0, failure_threshold=100)
        seen: asyncio.Queue[Topology] = asyncio.Queue()

        async def cb(topo: Topology) -> None:
            await seen.put(topo)

        task = lc.start_polling("t", cb)
        await wait_for(lambda: lc.health()[one]["failures"] >= 2, 5, "polls failing")
        assert seen.empty() and not task.done()
        await script.lookupds.up(one)
        topo = await asyncio.wait_for(seen.get(), 2)
        assert topo.producers[0].key == "127.0.0.1:4150"
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await lc.aclose()


async def test_admin_helpers() -> None:
    def handler(request: Request) -> Reply:
        routes = {
            "/ping": Reply(200, b"OK", "text/plain"),
            "/info": Reply(200, {"version": "0.3.7-HA.1.13.0", "ha_support": True}),
            "/topics": Reply(
                200, {"status_code": 200, "status_txt": "OK", "data": {"topics": ["a", "b"]}}
            ),
            "/channels": Reply(200, {"channels": [request.params.get("topic", "") + "-c"]}),
            "/nodes": Reply(200, {"producers": [peer("10.0.0.1", 4150)]}),
            "/listlookup": Reply(404, {"message": "NOT_FOUND"}),
        }
        return routes[request.path]

    gone = closed_address()
    async with ScriptedLookupds(handler) as lookupds:
        (two,) = await lookupds.start()
        async with LookupClient([gone, two]) as lc:
            assert await lc.ping()
            assert not await lc.ping(gone)
            assert (await lc.info())["ha_support"] is True
            assert await lc.topics() == ["a", "b"]
            assert await lc.channels("t") == ["t-c"]
            assert (await lc.nodes())[0]["tcp_port"] == 4150
            assert await lc.listlookup(two) is None


def test_client_config_errors() -> None:
    with pytest.raises(ConfigError, match="no nsqlookupd"):
        LookupClient([])
    with pytest.raises(ConfigError, match="jitter"):
        LookupClient(["127.0.0.1:1"], jitter=2)
    with pytest.raises(ConfigError, match="bad address"):
        LookupClient(["127.0.0.1"])


async def test_bad_access_rejected() -> None:
    async with LookupClient(["127.0.0.1:1"]) as lc:
        with pytest.raises(ConfigError, match="access"):
            await lc.lookup("t", access="x")  # type: ignore[arg-type]  # a caller without mypy
