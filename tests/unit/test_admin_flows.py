"""Whole admin flows against an in-process HTTP fake of a redesign cluster.

The real redesign servers cannot be built here; this checks the sequence (leader discovery,
lookup, per-partition requests, waiting for writable partitions) and the per-node outcome
rules (not-found → skipped only when another nsqd worked, leader-moved hint).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from nsqctl import admin
from nsqctl.errors import ConfigError
from tests.helpers.youzan_fake import LOOKUPD_LEADER, redesign_peer

LEADER = LOOKUPD_LEADER


def peer(n: int) -> dict[str, Any]:
    return redesign_peer(n, version="0.3.7-HA.1.13.0")


def fake_redesign(
    sent: list[httpx.Request], nsqd: Callable[[httpx.Request], httpx.Response] | None = None
) -> httpx.MockTransport:
    """lookupd 127.0.0.1:4161 (the leader) and nsqds 10.0.0.1/2:4151 leading partitions 0/1."""

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        path = request.url.path
        if request.url.host == "127.0.0.1":
            if path == "/listlookup":
                return httpx.Response(200, json={"lookupdnodes": [LEADER], "lookupdleader": LEADER})
            if path == "/lookup":
                return httpx.Response(
                    200,
                    json={
                        "channels": ["c"],
                        "producers": [peer(1), peer(2)],
                        "partitions": {"0": peer(1), "1": peer(2)},
                        "meta": {
                            "partition_num": 2,
                            "replica": 2,
                            "extend_support": False,
                            "ordered": False,
                            "multi_part": False,
                            "disable_channel_auto_create": False,
                        },
                    },
                )
            if path == "/nodes":
                return httpx.Response(200, json={"producers": [peer(1), peer(2)]})
            if path in ("/topic/create", "/topic/delete"):
                return httpx.Response(200, json=None)
        if nsqd is not None:
            return nsqd(request)
        return httpx.Response(200, text="")

    return httpx.MockTransport(handle)


def posts(sent: list[httpx.Request]) -> list[str]:
    return [str(r.url) for r in sent if r.method == "POST"]


async def test_redesign_create_posts_to_the_leader_and_waits_for_partitions() -> None:
    sent: list[httpx.Request] = []
    report = await admin.create_topic_async(
        ["127.0.0.1:4161"],
        "t",
        partitions=2,
        replicas=2,
        ordered=True,
        transport=fake_redesign(sent),
    )
    assert report.ok and report.family == "redesign"
    assert posts(sent) == [
        "http://127.0.0.1:4161/topic/create?topic=t&partition_num=2&replicator=2&orderedmulti=true"
    ]
    waits = [r for r in sent if r.url.path == "/lookup"]
    assert waits and waits[-1].url.params["access"] == "w"
    assert report.notes == ["2/2 partition(s) writable"]


async def test_redesign_delete_goes_to_the_leader_for_all_partitions() -> None:
    sent: list[httpx.Request] = []
    transport = fake_redesign(sent)
    placement, stages = await admin.prepare(
        "topic", "t", ["127.0.0.1:4161"], [], action="delete", transport=transport
    )
    report = await admin.run_plan("topic delete", placement, stages, transport=transport)
    assert report.ok
    assert posts(sent) == ["http://127.0.0.1:4161/topic/delete?topic=t&partition=**"]


async def test_redesign_channel_empty_reports_each_partition_and_the_leader_hint() -> None:
    sent: list[httpx.Request] = []

    def nsqd(request: httpx.Request) -> httpx.Response:
        if request.url.host == "10.0.0.2" and request.method == "POST":  # it answers /ping
            return httpx.Response(400, json={"message": "E_FAILED_ON_NOT_LEADER"})
        return httpx.Response(200, text="")

    transport = fake_redesign(sent, nsqd)
    placement, stages = await admin.prepare(
        "channel", "t", ["127.0.0.1:4161"], [], action="empty", channel="c", transport=transport
    )
    report = await admin.run_plan(
        "channel empty", placement, stages, channel="c", transport=transport
    )
    assert posts(sent) == [
        "http://10.0.0.1:4151/channel/empty?topic=t&channel=c&partition=0",
        "http://10.0.0.2:4151/channel/empty?topic=t&channel=c&partition=1",
    ]
    assert [r.outcome for r in report.results] == ["ok", "failed"]
    with pytest.raises(admin.AdminError, match=r"10\.0\.0\.2:4151 \(partition 1\).*leader moved"):
        report.raise_for_failures()


def _original(statuses: dict[str, tuple[int, str]]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        code, message = statuses[request.url.host]
        return httpx.Response(code, json={"message": message})

    return httpx.MockTransport(handle)


def _pause(*hosts: str) -> list[list[admin.AdminRequest]]:
    return [
        [
            admin.AdminRequest(
                admin.Node(f"{h}:4151", "nsqd"),
                "/channel/pause",
                (("topic", "t"), ("channel", "c")),
            )
            for h in hosts
        ]
    ]


async def test_not_found_is_skipped_when_another_nsqd_did_the_job() -> None:
    transport = _original({"a": (200, "OK"), "b": (404, "CHANNEL_NOT_FOUND")})
    async with httpx.AsyncClient(transport=transport) as client:
        results = await admin.execute(_pause("a", "b"), client)
    assert [r.outcome for r in results] == ["ok", "skipped"]
    assert results[1].error == "HTTP 404 CHANNEL_NOT_FOUND"


async def test_not_found_everywhere_is_a_failure() -> None:
    transport = _original({"a": (404, "CHANNEL_NOT_FOUND"), "b": (404, "CHANNEL_NOT_FOUND")})
    async with httpx.AsyncClient(transport=transport) as client:
        results = await admin.execute(_pause("a", "b"), client)
    assert [r.outcome for r in results] == ["failed", "failed"]


async def test_permission_errors_say_so() -> None:
    transport = _original({"a": (403, "TLS_REQUIRED")})
    async with httpx.AsyncClient(transport=transport) as client:
        (result,) = await admin.execute(_pause("a"), client)
    assert result.outcome == "failed"
    assert result.error.startswith("HTTP 403 TLS_REQUIRED (permission denied")


async def test_unknown_topic_on_lookupd_raises_topic_not_found() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/listlookup":
            return httpx.Response(404, text="")
        return httpx.Response(404, content=json.dumps({"message": "TOPIC_NOT_FOUND"}))

    with pytest.raises(admin.TopicNotFoundError, match=r"`topic_list\(\)`"):
        await admin.prepare(
            "topic",
            "t",
            ["127.0.0.1:4161"],
            [],
            action="pause",
            transport=httpx.MockTransport(handle),
        )


async def test_create_through_a_redesign_nsqd_alone_asks_for_lookupd() -> None:
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"version": "0.3.7-HA.1.13.0", "ha_support": True})

    with pytest.raises(ConfigError, match="needs `lookupd_http`"):
        await admin.create_topic_async(
            [], "t", nsqd_http=["10.0.0.1:4151"], transport=httpx.MockTransport(handle)
        )
    assert posts(sent) == []


async def test_sync_create_topic_works_inside_a_running_loop() -> None:
    """Async tests call the sync create_topic: it must fail like a sync call, not with
    'asyncio.run() cannot be called from a running event loop'."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(admin.AdminError, match="no nsqlookupd answered"):
        admin.create_topic([dead], "t")
