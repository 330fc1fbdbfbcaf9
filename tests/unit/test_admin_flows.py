"""Whole admin flows against scripted loopback servers playing a redesign cluster.

The admin functions run as in production (their lookups over the lookup client's own HTTP
client, their nsqd requests over httpx, real sockets); the servers are scripted
(tests/helpers/scripted_lookupd.py) to hold a chosen cluster state. This checks the
sequence (leader discovery, lookup, per-partition requests, waiting for writable
partitions) and the per-node outcome rules (not-found → skipped only when another nsqd
worked, leader-moved hint).
"""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from nsqctl import admin
from nsqctl.errors import ConfigError
from tests.helpers.scripted_lookupd import Handler, Reply, Request, ScriptedLookupds
from tests.helpers.youzan_fake import lookupd_leader, redesign_peer

EMPTY = Reply(body=b"", content_type="text/plain; charset=utf-8")


@dataclass
class Cluster:
    """A lookupd (the leader) and two nsqds leading partitions 0/1 of topic ``t``;
    ``nsqd`` answers the nsqds' requests (empty 200s without it)."""

    servers: ScriptedLookupds
    lookupd: str
    nsqds: list[str]
    nsqd: Handler | None = None

    def peer(self, n: int) -> dict[str, Any]:
        return redesign_peer(n, self.nsqds[n - 1], version="0.3.7-HA.1.13.0")

    def posts(self) -> list[str]:
        return [r.url for r in self.servers.requests if r.method == "POST"]

    def handle(self, request: Request) -> Reply:
        path = request.path
        if request.address == self.lookupd:
            leader = lookupd_leader(self.lookupd)
            if path == "/listlookup":
                return Reply(body={"lookupdnodes": [leader], "lookupdleader": leader})
            if path == "/lookup":
                return Reply(
                    body={
                        "channels": ["c"],
                        "producers": [self.peer(1), self.peer(2)],
                        "partitions": {"0": self.peer(1), "1": self.peer(2)},
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
                return Reply(body={"producers": [self.peer(1), self.peer(2)]})
            if path in ("/topic/create", "/topic/delete"):
                return Reply(body=None)
        if self.nsqd is not None:
            return self.nsqd(request)
        if path == "/stats":  # nothing held: a delete's check for copies left finds none
            return Reply(body={"version": "0.3.7-HA.1.13.0", "health": "OK", "topics": []})
        return EMPTY


@asynccontextmanager
async def fake_redesign() -> AsyncIterator[Cluster]:
    box: list[Cluster] = []
    async with ScriptedLookupds(lambda request: box[0].handle(request)) as servers:
        lookupd, *nsqds = await servers.start(3)
        box.append(Cluster(servers, lookupd, nsqds))
        yield box[0]


async def test_redesign_create_posts_to_the_leader_and_waits_for_partitions() -> None:
    async with fake_redesign() as c:
        report = await admin.create_topic_async(
            [c.lookupd], "t", partitions=2, replicas=2, ordered=True
        )
    assert report.ok and report.family == "redesign"
    assert c.posts() == [
        f"http://{c.lookupd}/topic/create?topic=t&partition_num=2&replicator=2&orderedmulti=true"
    ]
    waits = [r for r in c.servers.requests if r.path == "/lookup"]
    assert waits and waits[-1].params["access"] == "w"
    assert report.notes == ["2/2 partition(s) writable"]


async def test_redesign_delete_goes_to_the_leader_for_all_partitions() -> None:
    async with fake_redesign() as c:
        placement, stages = await admin.prepare("topic", "t", [c.lookupd], [], action="delete")
        report = await admin.run_plan("topic delete", placement, stages)
    assert report.ok
    assert c.posts() == [f"http://{c.lookupd}/topic/delete?topic=t&partition=**"]


async def test_redesign_channel_empty_reports_each_partition_and_the_leader_hint() -> None:
    async with fake_redesign() as c:

        def nsqd(request: Request) -> Reply:
            if request.address == c.nsqds[1] and request.method == "POST":  # it answers /ping
                return Reply(status=400, body={"message": "E_FAILED_ON_NOT_LEADER"})
            return EMPTY

        c.nsqd = nsqd
        placement, stages = await admin.prepare(
            "channel", "t", [c.lookupd], [], action="empty", channel="c"
        )
        report = await admin.run_plan("channel empty", placement, stages, channel="c")
    assert c.posts() == [
        f"http://{c.nsqds[0]}/channel/empty?topic=t&channel=c&partition=0",
        f"http://{c.nsqds[1]}/channel/empty?topic=t&channel=c&partition=1",
    ]
    assert [r.outcome for r in report.results] == ["ok", "failed"]
    hint = rf"{re.escape(c.nsqds[1])} \(partition 1\).*leader moved"
    with pytest.raises(admin.AdminError, match=hint):
        report.raise_for_failures()


@asynccontextmanager
async def original(*statuses: tuple[int, str]) -> AsyncIterator[list[str]]:
    """One nsqd per status, each answering every request with it; their addresses."""
    answers: dict[str, tuple[int, str]] = {}

    def handle(request: Request) -> Reply:
        code, message = answers[request.address]
        return Reply(status=code, body={"message": message})

    async with ScriptedLookupds(handle) as servers:
        addresses = await servers.start(len(statuses))
        answers.update(zip(addresses, statuses, strict=True))
        yield addresses


def _pause(*addresses: str) -> list[list[admin.AdminRequest]]:
    return [
        [
            admin.AdminRequest(
                admin.Node(a, "nsqd"),
                "/channel/pause",
                (("topic", "t"), ("channel", "c")),
            )
            for a in addresses
        ]
    ]


async def test_not_found_is_skipped_when_another_nsqd_did_the_job() -> None:
    async with (
        original((200, "OK"), (404, "CHANNEL_NOT_FOUND")) as nsqds,
        httpx.AsyncClient() as client,
    ):
        results = await admin.execute(_pause(*nsqds), client)
    assert [r.outcome for r in results] == ["ok", "skipped"]
    assert results[1].error == "HTTP 404 CHANNEL_NOT_FOUND"


async def test_not_found_everywhere_is_a_failure() -> None:
    async with (
        original((404, "CHANNEL_NOT_FOUND"), (404, "CHANNEL_NOT_FOUND")) as nsqds,
        httpx.AsyncClient() as client,
    ):
        results = await admin.execute(_pause(*nsqds), client)
    assert [r.outcome for r in results] == ["failed", "failed"]


async def test_permission_errors_say_so() -> None:
    async with original((403, "TLS_REQUIRED")) as nsqds, httpx.AsyncClient() as client:
        (result,) = await admin.execute(_pause(*nsqds), client)
    assert result.outcome == "failed"
    assert result.error.startswith("HTTP 403 TLS_REQUIRED (permission denied")


async def test_unknown_topic_on_lookupd_raises_topic_not_found() -> None:
    def handle(request: Request) -> Reply:
        if request.path == "/listlookup":
            return Reply(status=404, body=b"", content_type="text/plain")
        return Reply(status=404, body={"message": "TOPIC_NOT_FOUND"})

    async with ScriptedLookupds(handle) as servers:
        (lookupd,) = await servers.start()
        with pytest.raises(admin.TopicNotFoundError, match=r"`topic_list\(\)`"):
            await admin.prepare("topic", "t", [lookupd], [], action="pause")


async def test_create_through_a_redesign_nsqd_alone_asks_for_lookupd() -> None:
    def handle(request: Request) -> Reply:
        return Reply(body={"version": "0.3.7-HA.1.13.0", "ha_support": True})

    async with ScriptedLookupds(handle) as servers:
        (nsqd,) = await servers.start()
        with pytest.raises(ConfigError, match="needs `lookupd_http`"):
            await admin.create_topic_async([], "t", nsqd_http=[nsqd])
    assert [r.method for r in servers.requests if r.method != "GET"] == []


async def test_sync_create_topic_works_inside_a_running_loop() -> None:
    """Async tests call the sync create_topic: it must fail like a sync call, not with
    'asyncio.run() cannot be called from a running event loop'."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(admin.AdminError, match="no nsqlookupd answered"):
        admin.create_topic([dead], "t")
