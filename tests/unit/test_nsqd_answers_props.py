"""Decoding every server answer beyond nsqlookupd's lookup endpoints and nsqd's
``/stats`` (each has its own property tests): any body, of any JSON shape (or none),
gives a result or one error naming the server (and, for a wrong shape, the field), never
another exception.

Covered: ``/info`` of either server (version and family), nsqd's ``/config/OPTION``
(its node id's parts; its lookupd list), the redesign lookupd's ``/listlookup`` leader,
its ``/lookup`` polled while a new topic's partitions become writable, nsqd's
``/coordinator/stats``, the leader's ``/cluster/stats``, nsqd's own ``/info`` address,
``/message/get`` (a message read in place), and the JSON replies to IDENTIFY and AUTH on
the TCP protocol. HTTP answers go through the library's own functions with the client's
``transport`` scripted (``httpx.MockTransport``), so what is checked is what commands get.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nsqctl.admin.drain.original import node_lookupds
from nsqctl.admin.leader import find_leader
from nsqctl.admin.operations import wait_partitions_writable
from nsqctl.admin.partitions.state import registered_nsqds
from nsqctl.admin.requests import admin_client
from nsqctl.admin.versions import ServerVersion, fetch_server_version
from nsqctl.errors import AdminError, AnswerDecodeError, NsqctlError
from nsqctl.lookup.errors import LookupProtocolError
from nsqctl.peek import Peeked, peeked, stored_message
from nsqctl.protocol.errors import ReplyDecodeError
from nsqctl.protocol.replies import (
    AuthResponse,
    IdentifyResponse,
    parse_auth_response,
    parse_identify_response,
)
from nsqctl.stats.model import ClusterStability
from nsqctl.stats.parse import (
    StatsProtocolError,
    parse_cluster_stats,
    parse_coordinator_stats,
    parse_nsqd_info,
)
from tests.helpers.json_shapes import json_like, keyed_like

ADDRESS = "127.0.0.1:4151"
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ENVELOPE = ["status_code", "status_txt", "data", "message"]


def shaped(keys: list[str]) -> st.SearchStrategy[Any]:
    """Bodies that use an answer's own field names (and the envelope's), nested at random,
    so the decoding of each field is reached; and JSON of any shape."""
    return keyed_like([*keys, *ENVELOPE]) | json_like


def as_bytes(shapes: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    """The bodies as sent, and bodies that are not JSON at all."""
    return shapes.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=40)


INFO = shaped(["version", "ha_support", "broadcast_address", "tcp_port", "http_port"])
LISTLOOKUP = shaped(["lookupdleader", "lookupdnodes", "ID", "NodeIP", "NodeIp", "HttpPort"])
LOOKUP = shaped(["partitions", "producers", "channels", "meta", "broadcast_address", "tcp_port"])
COORDINATOR = shaped(
    ["topic_coord_stats", "name", "partition", "node", "isr_stats", "catchup_stats", "node_id"]
)
CLUSTER = shaped(
    [
        "stable",
        "node_stat_list",
        "hostname",
        "broadcast_address",
        "http_port",
        "leader_load_factor",
        "node_load_factor",
    ]
)
MESSAGE = shaped(
    ["id", "trace_id", "timestamp", "attempts", "offset", "queue_cnt_index", "ext", "body"]
)
IDENTIFY = shaped(["max_rdy_count", "version", "tls_v1", "deflate", "snappy", "msg_timeout"])
AUTH = shaped(["identity", "identity_url", "permission_count"])
STATUSES = st.sampled_from([200, 200, 200, 404, 500])


def ask(call: Callable[[httpx.AsyncClient], Awaitable[Any]], status: int, content: bytes) -> Any:
    """``call`` with an admin client whose servers answer every request with ``content``."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=content)

    async def run() -> Any:
        async with admin_client(httpx.MockTransport(answer)) as client:
            return await call(client)

    return asyncio.run(run())


CONFIG = json_like | st.lists(json_like, max_size=3) | keyed_like(ENVELOPE)
NODES = {"producers": [{"broadcast_address": "127.0.0.1", "tcp_port": 4150, "http_port": 4151}]}


@PROPERTY
@given(as_bytes(CONFIG))
@example(b'{"a": 1}')
@example(b'{"status_code": 200, "status_txt": "OK", "data": [1]}')
def test_an_nsqds_config_gives_its_node_id_or_leaves_it_out(content: bytes) -> None:
    """``rpc_port`` and ``id`` make the node id the move API takes: an answer that is no
    string or number leaves the nsqd out of the targets (as an unreachable one is)."""

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/nodes":
            return httpx.Response(200, json=NODES)
        return httpx.Response(200, content=content)

    async def run() -> Any:
        async with admin_client(httpx.MockTransport(answer)) as client:
            return await registered_nsqds(client, "127.0.0.1:4161")

    found = asyncio.run(run())
    assert set(found) <= {ADDRESS}
    try:
        value = json.loads(content)
    except ValueError:
        return  # not JSON: nsqd's plain-text answer, taken as it is
    scalars = set(_scalars(value))
    for node in found.values():  # made of a string or a number the answer holds
        host, rpc, tcp, ident = node.node_id.split(":", 3)
        assert (host, tcp) == ("127.0.0.1", "4150") and {rpc, ident} <= scalars, node


def _scalars(value: Any) -> Any:
    """Each string or number in a JSON value, as text (lax decoding takes 4150.0 as 4150)."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _scalars(item)
    elif isinstance(value, list):
        for item in value:
            yield from _scalars(item)
    elif isinstance(value, str):
        yield value.strip()
    elif isinstance(value, float) and value.is_integer():
        yield str(int(value))
    elif isinstance(value, int) and not isinstance(value, bool):
        yield str(value)


@PROPERTY
@given(as_bytes(CONFIG), STATUSES)
@example(b'["127.0.0.1:4160", 5]', 200)
@example(b'{"status_code": 200, "status_txt": "OK", "data": ["127.0.0.1:4160"]}', 200)
@example(b'{"status_code": null, "status_txt": "\\n"}', 200)  # a status text of a line break
def test_an_nsqds_lookupd_list_or_one_error(content: bytes, status: int) -> None:
    try:
        found = ask(lambda c: node_lookupds(c, ADDRESS), status, content)
    except (AdminError, AnswerDecodeError) as err:
        one_line_naming(err)
        return
    assert isinstance(found, list) and all(isinstance(a, str) for a in found)


def one_line_naming(err: BaseException, server: str = ADDRESS) -> None:
    assert isinstance(err, NsqctlError), repr(err)
    assert server in str(err) and "\n" not in str(err), str(err)


@PROPERTY
@given(as_bytes(INFO), STATUSES, st.sampled_from(["nsqd", "nsqlookupd"]))
@example(b'{"version": ["1.3.0"]}', 200, "nsqd")
@example(b'{"version": "0.3.7-HA.1.12.7", "ha_support": "yes"}', 200, "nsqlookupd")
def test_info_gives_a_version_or_says_why_not(content: bytes, status: int, role: Any) -> None:
    found = ask(lambda c: fetch_server_version(c, role, ADDRESS), status, content)
    assert isinstance(found, ServerVersion)
    if found.error is None:
        assert isinstance(found.version, str) and found.family in ("original", "redesign")
    else:
        assert found.version is None and "\n" not in found.error


def test_a_wrong_shape_of_info_names_the_field() -> None:
    found = ask(lambda c: fetch_server_version(c, "nsqd", ADDRESS), 200, b'{"version": 5}')
    assert found.not_nsq and found.error is not None and "`$.version`" in found.error


@PROPERTY
@given(as_bytes(LISTLOOKUP), STATUSES)
@example(b'{"lookupdleader": "x"}', 200)
@example(b'{"lookupdleader": {"NodeIP": "h", "HttpPort": 99999}}', 200)
def test_the_lookupd_leader_is_an_address_or_one_error(content: bytes, status: int) -> None:
    try:
        leader = ask(lambda c: find_leader(c, [ADDRESS]), status, content)
    except (AdminError, AnswerDecodeError) as err:
        one_line_naming(err)
        return
    if leader is not None:
        host, _, port = leader.rpartition(":")
        assert isinstance(host, str) and host and 1 <= int(port) <= 65535


@PROPERTY
@given(as_bytes(LOOKUP))
@example(b'{"partitions": 5}')
def test_waiting_for_writable_partitions_counts_or_names_the_field(content: bytes) -> None:
    try:
        seen = ask(lambda c: wait_partitions_writable(c, ADDRESS, "t", 1, 0.0), 200, content)
    except LookupProtocolError as err:  # a wrong shape (LookupDecodeError), or an error
        one_line_naming(err)
        return
    assert isinstance(seen, int) and seen >= 0


def decoded(parse: Callable[[], Any], server: str = ADDRESS) -> Any:
    """``parse()``'s result, or None when it refused the body with one error naming the
    server (and the field, for a wrong shape)."""
    try:
        return parse()
    except AnswerDecodeError as err:
        one_line_naming(err, server)
        assert "with a wrong shape: " in str(err), str(err)
    except StatsProtocolError as err:
        assert "\n" not in str(err)
    return None


@PROPERTY
@given(COORDINATOR)
@example({"topic_coord_stats": [{"partition": "x"}]})
@example({"topic_coord_stats": [{"isr_stats": [5]}]})
def test_coordinator_stats(payload: Any) -> None:
    infos = decoded(lambda: parse_coordinator_stats(payload, ADDRESS))
    for info in infos or ():
        assert isinstance(info.topic, str) and isinstance(info.partition, int)
        assert all(isinstance(n, str) for n in (*info.isr, *info.catchup))


@PROPERTY
@given(CLUSTER)
@example({"node_stat_list": [{"leader_load_factor": {}}]})
@example({"node_stat_list": 5})
def test_cluster_stats(payload: Any) -> None:
    found = decoded(lambda: parse_cluster_stats(payload, ADDRESS))
    if found is not None:
        assert isinstance(found, ClusterStability)
        assert all(isinstance(n.leader_load_factor, float) for n in found.nodes)


@PROPERTY
@given(INFO)
@example({"broadcast_address": "h", "tcp_port": {}})
def test_an_nsqds_own_address(payload: Any) -> None:
    address = decoded(lambda: parse_nsqd_info(payload, ADDRESS))
    if address is not None:
        host, _, port = address.rpartition(":")
        assert host and 1 <= int(port) <= 65535


@PROPERTY
@given(as_bytes(MESSAGE))
@example(b'{"id": "x"}')
@example(b'{"id": 1, "trace_id": -1}')
@example(b'{"id": 1, "trace_id": 18446744073709551616}')
@example(b'{"id": 1, "attempts": [1]}')
def test_a_message_read_in_place(content: bytes) -> None:
    async def read(client: httpx.AsyncClient) -> Peeked:
        return peeked("t", 0, ADDRESS, await stored_message(client, ADDRESS, {}))

    try:
        found = ask(read, 200, content)
    except AnswerDecodeError as err:
        one_line_naming(err)
        return
    assert isinstance(found, Peeked) and len(found.raw.id) == 16
    assert isinstance(found.raw.body, bytes) and found.index >= 0


@pytest.mark.parametrize(
    ("parse", "kind", "shapes"),
    [
        (parse_identify_response, IdentifyResponse, IDENTIFY),
        (parse_auth_response, AuthResponse, AUTH),
    ],
    ids=["identify", "auth"],
)
def test_tcp_json_replies(parse: Callable[[bytes], Any], kind: type, shapes: Any) -> None:
    @PROPERTY
    @given(as_bytes(shapes))
    def check(data: bytes) -> None:
        try:
            found = parse(data)
        except ReplyDecodeError as err:
            assert "\n" not in str(err)
            return
        assert isinstance(found, kind)

    check()
