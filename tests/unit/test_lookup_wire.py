"""Decoding nsqlookupd's answers: any body, of any JSON shape (or none), gives a result or
a :class:`LookupProtocolError` (a :class:`LookupDecodeError` naming the server and the
field when the shape is wrong), never another exception, and a result never holds a
garbage value (a port outside 1-65535, a host that is not a string, an invalid name).

Every endpoint the lookup client reads is driven through the client itself, over its own
HTTP path and a real socket, from a scripted lookupd (:mod:`tests.helpers.scripted_lookupd`:
no real lookupd sends these bodies), so what is checked is what commands get.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nsqctl import answers
from nsqctl.errors import LookupUnavailableError
from nsqctl.lookup import LookupClient
from nsqctl.lookup.errors import LookupDecodeError, LookupProtocolError
from nsqctl.lookup.topology import (
    LookupAnswer,
    LookupdList,
    Peer,
    Topology,
    parse_listlookup,
    parse_lookup_body,
    parse_lookup_response,
    parse_nodes_body,
)
from nsqctl.lookup.wire import WireNodes
from nsqctl.protocol.names import validate_topic
from tests.helpers.json_shapes import json_like, leaf
from tests.helpers.scripted_lookupd import Reply, ScriptedLookupds, closed_address

ADDRESS = "127.0.0.1:4161"
#: how an error names a loopback lookupd (the scripted ones listen on ports of their own)
NAMES_LOOKUPD = re.compile(r"127\.0\.0\.1:\d+")


PEER_KEYS = [
    "broadcast_address",
    "hostname",
    "tcp_port",
    "http_port",
    "version",
    "id",
    "distributed_id",
    "remote_address",
]
META_KEYS = ["partition_num", "replica", "extend_support", "ordered", "multi_part"]
NODE_KEYS = ["ID", "NodeIP", "NodeIp", "TcpPort", "HttpPort", "RpcPort", "Epoch"]


def _objects(keys: list[str]) -> st.SearchStrategy[Any]:
    """Objects with the real field names and values of any shape: they reach the field
    checks, where arbitrary JSON mostly fails at the top."""
    return st.dictionaries(st.sampled_from(keys), json_like, max_size=len(keys)) | json_like


peer_like = _objects(PEER_KEYS)
name_list = st.lists(leaf, max_size=3) | json_like
envelope = {"status_code": json_like, "status_txt": json_like, "message": json_like}


def _wrapped(body: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``body`` bare, in the pre-v1 envelope, or any JSON at all."""
    return (
        body
        | st.just({"status_code": 200, "status_txt": "OK"})
        | st.builds(
            lambda b, code: {"status_code": code, "status_txt": "OK", "data": b}, body, leaf
        )
        | json_like
    )


lookup_like = _wrapped(
    st.fixed_dictionaries(
        {},
        optional={
            "producers": st.lists(peer_like, max_size=3) | json_like,
            "channels": name_list,
            "partitions": st.dictionaries(
                st.sampled_from(["0", "1", "-1", "x", "2000"]), peer_like | st.none(), max_size=3
            )
            | json_like,
            "meta": _objects(META_KEYS),
            **envelope,
        },
    )
)
topics_like = _wrapped(st.fixed_dictionaries({}, optional={"topics": name_list, **envelope}))
channels_like = _wrapped(st.fixed_dictionaries({}, optional={"channels": name_list, **envelope}))
nodes_like = _wrapped(
    st.fixed_dictionaries(
        {}, optional={"producers": st.lists(peer_like, max_size=3) | json_like, **envelope}
    )
)
info_like = _wrapped(
    st.fixed_dictionaries({}, optional={"version": json_like, "ha_support": json_like})
)
listlookup_like = _wrapped(
    st.fixed_dictionaries(
        {},
        optional={
            "lookupdnodes": st.lists(_objects(NODE_KEYS), max_size=3) | json_like,
            "lookupdleader": _objects(NODE_KEYS),
        },
    )
)


def _body(value: Any) -> bytes:
    return json.dumps(value).encode()


bodies = st.binary(max_size=40)  # and bodies that are not JSON at all
statuses = st.sampled_from([200, 200, 200, 404, 500])


def _ask(call: Callable[[LookupClient], Awaitable[Any]], status: int, content: bytes) -> Any:
    """``call`` on a client whose lookupd answers every request with ``content``."""

    async def run() -> Any:
        async with ScriptedLookupds(lambda request: Reply(status, content)) as lookupds:
            (address,) = await lookupds.start()
            async with LookupClient([address], discover=False) as lc:
                return await call(lc)

    return asyncio.run(run())


def _check_peer(peer: Peer) -> None:
    assert isinstance(peer.broadcast_address, str) and peer.broadcast_address
    assert 1 <= peer.tcp_port <= 65535
    assert peer.http_port == 0 or 1 <= peer.http_port <= 65535
    assert all(
        isinstance(v, str)
        for v in (peer.hostname, peer.version, peer.id, peer.distributed_id, peer.remote_address)
    )


def _check_names(names: Any) -> None:
    assert isinstance(names, list | tuple)
    for name in names:
        validate_topic(name)  # channel names follow the same rules


def _judged(error: BaseException) -> None:
    """A refusal must be a lookup protocol error; a wrong shape names the server."""
    assert isinstance(error, LookupProtocolError), repr(error)
    if isinstance(error, LookupDecodeError):
        assert NAMES_LOOKUPD.search(str(error)) and "\n" not in str(error)


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.one_of(lookup_like.map(_body), bodies), statuses)
@example(_body({"producers": 5}), 200)
@example(_body({"channels": [], "producers": [{"broadcast_address": "h", "tcp_port": 99999}]}), 200)
@example(_body({"channels": [None], "producers": []}), 200)
@example(_body({"producers": [{"broadcast_address": 5, "tcp_port": 4150}]}), 200)
def test_lookup_answers(content: bytes, status: int) -> None:
    try:
        topo = _ask(lambda lc: lc.lookup("t"), status, content)
    except LookupUnavailableError as err:  # the one lookupd failed: the reason names it
        assert NAMES_LOOKUPD.search(str(err))
        return
    assert isinstance(topo, Topology)
    for peer in (*topo.producers, *topo.partitions.values()):
        _check_peer(peer)
    _check_names(topo.channels)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(lookup_like.map(_body), bodies), statuses)
def test_a_callers_httpx_client_reads_as_the_own_connections_do(
    content: bytes, status: int
) -> None:
    """``LookupClient(http=)`` (the stats poller's client) sends the GETs through the
    caller's httpx client: the same answer, or the same error in the same words, as the
    client's own connections give. A lookupd that refuses connections is one of them."""

    async def run() -> tuple[object, ...]:
        async with ScriptedLookupds(lambda request: Reply(status, content)) as lookupds:
            (address,) = await lookupds.start()
            outcomes: list[object] = []
            for where in (address, closed_address()):
                async with httpx.AsyncClient(timeout=5.0) as http:
                    for shared in (None, http):
                        async with LookupClient([where], discover=False, http=shared) as lc:
                            try:
                                topo = await lc.lookup("t")
                            except LookupUnavailableError as err:
                                outcomes.append(str(err))
                            else:
                                outcomes.append(replace(topo, fetched_at=0.0, sources=()))
            return tuple(outcomes)

    own, shared, own_down, shared_down = asyncio.run(run())
    assert own == shared
    assert own_down == shared_down and isinstance(own_down, str)


@PROPERTY
@given(lookup_like, st.sampled_from([200, 404]))
def test_lookup_bodies_parse_alike_from_bytes_and_from_json(payload: Any, status: int) -> None:
    """The library's two entry points (bytes, as received; values, as ``json.loads``
    gives them to callers holding a body) judge a body alike."""
    outcomes: list[object] = []
    parsers: tuple[Callable[[], LookupAnswer], ...] = (
        lambda: parse_lookup_body(_body(payload), source=ADDRESS, http_status=status, fetched_at=0),
        lambda: parse_lookup_response(payload, source=ADDRESS, http_status=status, fetched_at=0),
    )
    for parse in parsers:
        try:
            outcomes.append(parse())
        except LookupProtocolError as err:
            _judged(err)
            outcomes.append(type(err))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize(
    ("method", "shapes"),
    [
        ("topics", topics_like),
        ("channels", channels_like),
        ("nodes", nodes_like),
        ("info", info_like),
        ("listlookup", listlookup_like),
    ],
)
def test_other_endpoints(method: str, shapes: st.SearchStrategy[Any]) -> None:
    calls: dict[str, Callable[[LookupClient], Awaitable[Any]]] = {
        "topics": lambda lc: lc.topics(),
        "channels": lambda lc: lc.channels("t"),
        "nodes": lambda lc: lc.peers(),
        "info": lambda lc: lc.info(),
        "listlookup": lambda lc: lc.listlookup(),
    }

    @PROPERTY
    @given(st.one_of(shapes.map(_body), bodies), statuses)
    def check(content: bytes, status: int) -> None:
        try:
            result = _ask(calls[method], status, content)
        except LookupUnavailableError as err:  # a non-200 answer
            assert status != 200 and NAMES_LOOKUPD.search(str(err))
            return
        except LookupProtocolError as err:
            _judged(err)
            return
        if method in ("topics", "channels"):
            _check_names(result)
        elif method == "nodes":
            for peer in result:
                _check_peer(peer)
        elif method == "info":
            assert isinstance(result, dict)
            assert isinstance(result.get("version", ""), str)
        elif result is not None:
            assert isinstance(result, LookupdList)
            for node in result.nodes:
                assert isinstance(node.host, str) and node.host
                assert 1 <= node.http_port <= 65535
                assert 0 <= node.tcp_port <= 65535 and 0 <= node.rpc_port <= 65535

    check()


@PROPERTY
@given(st.one_of(nodes_like.map(_body), bodies))
def test_nodes_bodies_read_by_the_admin_commands(content: bytes) -> None:
    """The admin commands' own ``/nodes`` reader: valid peers, ``None`` only for a body
    that is not JSON, or the decode error."""
    try:
        peers = parse_nodes_body(content, source=ADDRESS)
    except LookupProtocolError as err:
        _judged(err)
        return
    if peers is None:  # not JSON (Python's json module would take NaN and Infinity)
        with pytest.raises(msgspec.DecodeError):
            msgspec.json.decode(content)
        return
    for peer in peers:
        _check_peer(peer)


good_peer = st.fixed_dictionaries(
    {
        "broadcast_address": st.sampled_from(["127.0.0.1", "nsqd-a"]),
        "tcp_port": st.integers(1, 65535),
    },
    optional={"http_port": st.integers(1, 65535), "version": st.text(max_size=5)},
)


@PROPERTY
@given(
    st.fixed_dictionaries({}, optional={"producers": st.lists(good_peer, max_size=3)}),
    st.sampled_from([200, 400, 404, 500]),
    st.sampled_from(["OK", "INTERNAL_ERROR", ""]),
)
def test_the_envelope_is_read_one_way(body: dict[str, Any], code: int, text: str) -> None:
    """Every answer is unwrapped by :func:`nsqctl.answers.unwrapped`: a wrapped body reads
    as the bare one under a 200, and as an error (no nsqds) under any other status even
    when its ``data`` is full: a lookupd that says it failed has listed nothing. An
    envelope without ``data`` keeps its status and the fields beside it."""
    bare = answers.decode(_body(body), WireNodes, role="nsqlookupd", source=ADDRESS, path="/n")
    wrapped = answers.decode(
        _body({"status_code": code, "status_txt": text, "data": body}),
        WireNodes,
        role="nsqlookupd",
        source=ADDRESS,
        path="/n",
    )
    assert bare is not None and wrapped is not None
    assert (wrapped.status_code, wrapped.status_txt) == (code, text)
    assert wrapped.producers == bare.producers
    peers = parse_nodes_body(_body({"status_code": code, "data": body}), source=ADDRESS)
    expected = parse_nodes_body(_body(body), source=ADDRESS) if code == 200 else []
    assert peers == expected
    beside = parse_nodes_body(_body({"status_code": code, **body}), source=ADDRESS)
    assert beside == expected


@PROPERTY
@given(listlookup_like)
def test_listlookup_values_parse_or_refuse(payload: Any) -> None:
    try:
        parse_listlookup(payload, source=ADDRESS)
    except LookupProtocolError as err:
        _judged(err)


@PROPERTY
@given(peer_like)
def test_a_peer_from_json_values_is_checked_alike(obj: Any) -> None:
    try:
        peer = Peer.from_json(obj, source=ADDRESS, path="/nodes")
    except LookupProtocolError as err:
        _judged(err)
    else:
        _check_peer(peer)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"producers": 5}, "`$.producers`"),
        (
            {"producers": [{"broadcast_address": "h", "tcp_port": 99999}]},
            "`$.producers[0].tcp_port`",
        ),
        ({"producers": [{"broadcast_address": "h", "tcp_port": 0}]}, "`$.producers[0].tcp_port`"),
        (
            {"producers": [{"broadcast_address": 7, "tcp_port": 4150}]},
            "`$.producers[0].broadcast_address`",
        ),
        ({"channels": ["ok", "bad name"]}, "`$.channels[1]`"),
        ({"channels": [None]}, "`$.channels[0]`"),
        ({"status_code": 200, "status_txt": "OK", "data": {"producers": "x"}}, "`$.producers`"),
    ],
)
def test_a_wrong_lookup_shape_names_the_server_and_the_field(body: Any, field: str) -> None:
    with pytest.raises(LookupDecodeError) as caught:
        parse_lookup_body(_body(body), source=ADDRESS)
    assert f"nsqlookupd {ADDRESS} answered /lookup" in str(caught.value)
    assert field in str(caught.value)
