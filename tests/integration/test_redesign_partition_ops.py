"""``nsqctl topic expand|move|update`` on real youzan servers (3 nsqd, one lookupd, etcd).

Each operation goes through the CLI as an operator types it (``--yes``, nsqd HTTP
addresses), then the servers themselves are asked what changed: lookupd ``/lookup`` for
leaders and meta, the leaders' ``/stats`` and ``/coordinator/stats`` for messages and ISR,
etcd for the parameters nsqlookupd keeps only there. Messages published before and after a
move are all read back; the one-line errors name what was wrong.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from nsqctl import admin
from nsqctl import protocol as p
from nsqctl.producer import Producer
from nsqctl.servers import build, cluster
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import NSQCTL, assert_one_line_error, run_cli
from tests.helpers.failover import leader_of, lookup_partitions
from tests.helpers.redesign import (
    TopicSpec,
    create_topics,
    eventually,
    leader_stats,
    nsqctl,
    read_messages,
    run_ok,
    run_process,
    unique,
)

pytestmark = [pytest.mark.redesign, pytest.mark.timeout(300)]


SPECS = {
    "grow": TopicSpec(partitions=1, replicas=1),
    "move": TopicSpec(partitions=1, replicas=2),
    "rep": TopicSpec(partitions=1, replicas=2),
    "meta": TopicSpec(partitions=1, replicas=2),
    "bad": TopicSpec(partitions=2, replicas=1),
    "lib": TopicSpec(partitions=1, replicas=1),
    "full": TopicSpec(partitions=1, replicas=3),
    "round": TopicSpec(partitions=1, replicas=3),
    "carry": TopicSpec(partitions=1, replicas=1),
    "registered": TopicSpec(partitions=1, replicas=1),
}


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three youzan nsqd: room to move a replicated partition and to expand a topic."""
    bins = build.build("redesign")
    c = cluster.start("redesign", tmp_path_factory.mktemp("ops"), nsqd=3, bin_dir=bins)
    try:
        yield c
    finally:
        c.kill()  # thrown away: no node need leave gracefully


@pytest.fixture(scope="module")
def topics(three: Cluster) -> dict[str, str]:
    """Every test's topic, created at once (nsqlookupd enables them in one topic check)."""
    names = {key: unique(key) for key in SPECS}
    asyncio.run(create_topics(three.lookupd_http, {names[k]: s for k, s in SPECS.items()}))
    return names


def _isr(c: Cluster, topic: str, partition: int = 0) -> list[str]:
    """The partition's ISR as its leader reports it, as nsqd HTTP addresses."""
    state = asyncio.run(_state(c, topic))
    return list(state.partitions[partition].isr)


async def _state(c: Cluster, topic: str) -> admin.TopicState:
    async with httpx.AsyncClient(timeout=5) as client:
        leader = c.lookupd_http[0]
        nodes = await admin.registered_nsqds(client, leader)
        return await admin.partitions.topic_state(client, leader, topic, nodes)


def _loads(c: Cluster) -> dict[str, float]:
    """nsqd HTTP address → youzan's leader load factor (the least is elected)."""

    async def get() -> dict[str, float]:
        async with httpx.AsyncClient(timeout=10) as client:
            return await admin.partitions.leader_load_factors(client, c.lookupd_http[0])

    return asyncio.run(get())


def _etcd_meta(c: Cluster, topic: str) -> dict[str, Any]:
    """The topic meta nsqlookupd stored in etcd (sync and retention live only there)."""
    etcd = c.by_role("etcd")[0]
    key = f"/v2/keys/NSQMetaData/{cluster.CLUSTER_ID}/Topics/{topic}/TopicMeta"
    resp = httpx.get(f"http://127.0.0.1:{etcd.http_port}{key}", timeout=5)
    meta: dict[str, Any] = json.loads(resp.json()["node"]["value"])
    return meta


async def _publish(c: Cluster, topic: str, bodies: list[bytes], partition: int = 0) -> None:
    async with Producer(lookupd_http=c.lookupd_http) as producer:
        await producer.publish_many(topic, bodies, partition=partition)


def _read_all(c: Cluster, topic: str, count: int) -> list[bytes]:
    """Every stored message, on a fresh channel from the start of each partition."""
    got = asyncio.run(
        read_messages(c.lookupd_http, topic, unique("v"), count, start=p.start_msgcount(0))
    )
    return [m.body for m in got]


def test_expand_adds_writable_partitions_that_take_and_serve_messages(
    three: Cluster, topics: dict[str, str]
) -> None:
    c = three
    topic = topics["grow"]
    out = run_ok(
        "topic", "expand", topic, "--partitions", "3", "--yes", "--lookupd", c.lookupd_http[0]
    )
    assert "topic expand" in out and "POST /topic/partition/expand" in out
    assert "3/3 partition(s) writable" in out
    assert sorted(lookup_partitions(c.lookupd_http[0], topic)) == [0, 1, 2]
    bodies = {part: [f"p{part}-{i}".encode() for i in range(20)] for part in (0, 1, 2)}
    for part, items in bodies.items():
        asyncio.run(_publish(c, topic, items, partition=part))
    counts = {part: t.message_count for part, t in leader_stats(c, topic).items()}
    assert counts == {0: 20, 1: 20, 2: 20}
    assert sorted(_read_all(c, topic, 60)) == sorted(b for items in bodies.values() for b in items)


def _expand_publish_read(lookupd: str, topic: str, channel: str, count: int) -> str:
    """The operator's sequence on a 1-partition topic: expand to 3, publish ``count``
    numbers, read ``channel`` until empty; every number arrives. The expand's output."""
    out = run_ok("topic", "expand", topic, "--partitions", "3", "--yes", "--lookupd", lookupd)
    assert f"channel(s) {channel} present on new partition(s) 1, 2 before the expand" in out, out
    numbers = b"".join(b"%d\n" % i for i in range(1, count + 1))
    nsqctl("pub", topic, "--lookupd", lookupd, stdin=numbers)
    got = nsqctl("tail", topic, "-c", channel, "--until-empty", "--lookupd", lookupd, timeout=120)
    assert sorted(int(line) for line in got.split()) == list(range(1, count + 1))
    return out


def test_expand_carries_the_channels_so_a_durable_tail_gets_every_message(
    three: Cluster, topics: dict[str, str]
) -> None:
    """The operator's sequence: a 1-partition topic with a channel, expand to 3, publish
    600, read the channel until empty: all 600 (the new partitions had the channel before
    they took writes). The dry runs before it change nothing and say what it will do."""
    c = three
    topic, lookupd = topics["carry"], c.lookupd_http[0]
    dry = run_ok("topic", "expand", topic, "--partitions", "3", "--dry-run", "--lookupd", lookupd)
    assert "dry run: would expand topic" in dry and "add partition(s) 1-2" in dry, dry
    assert "create channel(s) c on each new partition's leader" in dry, dry
    assert "POST" not in dry and "nothing was changed" in dry, dry
    leader = leader_of(c, topic).http_address
    target = next(a for a in c.nsqd_http if a != leader)
    move = ["topic", "move", topic, "--partition", "0", "--to", target]
    dry_move = run_ok(*move, "--dry-run", "--lookupd", lookupd)
    assert f"move the leader of {topic} partition 0 from {leader} to {target}" in dry_move
    assert "POST" not in dry_move and "nothing was changed" in dry_move, dry_move
    assert sorted(lookup_partitions(lookupd, topic)) == [0]
    assert leader_of(c, topic).http_address == leader

    out = _expand_publish_read(lookupd, topic, "c", 600)
    for part in (1, 2):
        assert f"(partition {part})  POST /channel/create?topic={topic}&channel=c" in out, out


def test_expand_writes_registered_channels_onto_the_new_partitions(
    three: Cluster, topics: dict[str, str]
) -> None:
    """A topic whose channels nsqlookupd registers: its nsqds refuse a local create, and
    youzan stores new partitions without the list, so without nsqctl's re-registration
    the new partitions would have no channel to read (a SUB there is refused)."""
    c = three
    topic, lookupd = topics["registered"], c.lookupd_http[0]
    run_ok("topic", "update", topic, "--no-channel-auto-create", "--yes", "--lookupd", lookupd)
    created = run_ok("channel", "create", topic, "reg", "--lookupd", lookupd)
    assert "channel reg is on every copy" in created, created
    out = _expand_publish_read(lookupd, topic, "reg", 300)
    assert "POST /channel/create?topic=" in out and "nsqctl-carry-channels" in out, out


def test_move_leader_keeps_every_message_and_fills_the_isr(
    three: Cluster, topics: dict[str, str]
) -> None:
    c = three
    topic = topics["move"]
    before = [f"before-{i}".encode() for i in range(200)]
    asyncio.run(_publish(c, topic, before))
    old = leader_of(c, topic)
    isr = _isr(c, topic)
    # the nsqd outside the ISR: it must catch up before it can lead
    target = next(n.http_address for n in c.nsqds if n.http_address not in isr)
    out = run_ok(
        "topic",
        "move",
        topic,
        "--partition",
        "0",
        "--to",
        target,
        "--yes",
        "--lookupd",
        c.lookupd_http[0],
    )
    assert "POST /topic/partition/move" in out and f"leader {target}" in out
    assert leader_of(c, topic).http_address == target != old.http_address
    stats = leader_stats(c, topic)
    assert stats[0].node == target and stats[0].message_count == 200
    new_isr = _isr(c, topic)
    assert len(new_isr) == 2 and target in new_isr and old.http_address not in new_isr
    after = [f"after-{i}".encode() for i in range(200)]
    asyncio.run(_publish(c, topic, after))
    assert leader_stats(c, topic)[0].message_count == 400
    assert sorted(_read_all(c, topic, 400)) == sorted(before + after)


def test_leader_handed_to_an_in_sync_copy_finishes_at_once(
    three: Cluster, topics: dict[str, str]
) -> None:
    """Replicas 3 on 3 nsqd: the old leader keeps its copy in the ISR (there is no other
    node for it), so the move is done when the target leads, not when the source left."""
    c = three
    topic = topics["full"]
    asyncio.run(_publish(c, topic, [b"y"] * 20))
    old = leader_of(c, topic).http_address
    loads = _loads(c)  # the copy youzan elects: the other test pins what happens otherwise
    target = min((a for a in _isr(c, topic) if a != old), key=lambda a: loads.get(a, 0.0))
    proc = run_process(
        [
            NSQCTL,
            "topic",
            "move",
            topic,
            "--partition",
            "0",
            "--to",
            target,
            "--wait",
            "100",
            "--yes",
            "--lookupd",
            c.lookupd_http[0],
        ]
    )
    assert proc.returncode == 0, proc.stderr
    assert b"warning" not in proc.stderr, proc.stderr  # it saw the move finish, no time-out
    assert leader_of(c, topic).http_address == target
    assert sorted(_isr(c, topic)) == sorted(n.http_address for n in c.nsqds)


def test_move_replica_keeps_the_leader(three: Cluster, topics: dict[str, str]) -> None:
    c = three
    topic = topics["rep"]
    asyncio.run(_publish(c, topic, [b"x"] * 50))
    leader = leader_of(c, topic).http_address
    follower = next(a for a in _isr(c, topic) if a != leader)
    spare = next(n for n in c.nsqds if n.http_address not in (leader, follower))
    # --to as the TCP address `nsqctl lookup` shows: the same nsqd
    run_ok(
        "topic",
        "move",
        topic,
        "--partition",
        "0",
        "--from",
        follower,
        "--to",
        spare.tcp_address,
        "--yes",
        "--lookupd",
        c.lookupd_http[0],
    )
    assert leader_of(c, topic).http_address == leader
    assert sorted(_isr(c, topic)) == sorted([leader, spare.http_address])


def test_update_meta_is_read_back(three: Cluster, topics: dict[str, str]) -> None:
    c = three
    topic = topics["meta"]
    out = run_ok(
        "topic",
        "update",
        topic,
        "--replicas",
        "1",
        "--retention-days",
        "3",
        "--sync-every",
        "100",
        "--no-channel-auto-create",
        "--yes",
        "--lookupd",
        c.lookupd_http[0],
    )
    assert "POST /topic/meta/update" in out
    state = asyncio.run(_state(c, topic))
    assert state.meta.replica == 1 and state.meta.disable_channel_auto_create
    assert len(state.partitions[0].isr) == 1  # the extra copy left the ISR
    stored = _etcd_meta(c, topic)
    assert (stored["RetentionDay"], stored["SyncEvery"], stored["Replica"]) == (3, 100, 1)


def test_bad_input_is_one_line_with_exit_code(
    three: Cluster, topics: dict[str, str], original_cluster: Cluster
) -> None:
    c = three
    lookupd = c.lookupd_http[0]
    topic = topics["bad"]
    cases = [
        (
            ["topic", "move", topic, "--partition", "0", "--to", "127.0.0.1:1"],
            2,
            "--to 127.0.0.1:1: not an nsqd registered with nsqlookupd",
        ),
        (["topic", "expand", topic, "--partitions", "1"], 2, "--partitions must be more than 2"),
        (
            ["topic", "expand", topic, "--partitions", "4"],
            2,
            # the ways out an existing topic has: no --ordered (a topic keeps its ordering)
            "need 4 nodes and 3 registered: add nsqd nodes, or expand to at most 3 partitions",
        ),
        (["topic", "move", topic, "--partition", "5", "--to", c.nsqd_http[0]], 2, "no partition 5"),
        (
            ["topic", "update", topic],
            2,
            "nothing to update: give --replicas, --sync-every, --retention-days, --ext or "
            "--channel-auto-create/--no-channel-auto-create",
        ),
        (["topic", "update", topic, "--replicas", "6"], 2, "--replicas must be between 1 and 5"),
        (
            ["topic", "update", topic, "--retention-days", "61"],
            2,
            "--retention-days must be between 0 and 60",
        ),
        (
            [
                "topic",
                "move",
                topic,
                "--partition",
                "0",
                "--to",
                c.nsqd_http[0],
                "--from",
                c.nsqd_http[0],
            ],
            2,
            f"--to {c.nsqd_http[0]} is where the copy already is",
        ),
        (["topic", "expand", unique("nope"), "--partitions", "2"], 1, "not found"),
    ]
    for args, code, text in cases:
        err = assert_one_line_error(run_cli([*args, "--yes", "--lookupd", lookupd]), code)
        assert text in err, (args, err)
    # a partition beyond the count is bad input to a publish too, as to tail and move
    err = assert_one_line_error(
        run_cli(["pub", topic, "x", "--partition", "5", "--lookupd", lookupd]), 2
    )
    assert "there is no partition 5" in err, err
    original = original_cluster.lookupd_http[0]
    for args in (
        ["expand", "t", "--partitions", "2"],
        ["move", "t", "--partition", "0", "--to", "127.0.0.1:4151"],
        ["update", "t", "--replicas", "2"],
    ):
        # an operation the family lacks is bad input for that cluster: exit 2
        err = assert_one_line_error(run_cli(["topic", *args, "--yes", "--lookupd", original]), 2)
        assert "needs a redesign (youzan) cluster" in err, err
    # no terminal and no --yes: refused before anything is sent
    err = assert_one_line_error(
        run_cli(["topic", "expand", topic, "--partitions", "3", "--lookupd", lookupd]), 2
    )
    assert "pass --yes" in err
    assert sorted(lookup_partitions(lookupd, topic)) == [0, 1]


def test_library_move_reports_progress(three: Cluster, topics: dict[str, str]) -> None:
    """The library call tells a catch-up and the new leader through ``progress``."""
    c = three
    topic = topics["lib"]
    asyncio.run(_publish(c, topic, [b"y"] * 100))
    old = leader_of(c, topic).http_address
    target = next(n.http_address for n in c.nsqds if n.http_address != old)
    lines: list[str] = []
    report = asyncio.run(
        admin.move_partition(c.lookupd_http, topic, 0, target, progress=lines.append)
    )
    report.raise_for_failures()
    assert not report.warnings, report.warnings
    assert any(f"catching up: {target}" in line or target in line for line in lines), lines
    assert leader_of(c, topic).http_address == target
    assert _isr(c, topic) == [target]


def test_leader_move_to_a_copy_youzan_never_elects_exits_1(
    three: Cluster, topics: dict[str, str]
) -> None:
    """youzan elects the in-sync copy with the least leader load factor, whatever --to
    says. A target loaded more than both other copies (a replicas-1 topic it leads, with
    unread data on 5 channels) is never elected: 1 → 2 → 1. The command says so on one
    line and exits 1; the leader is back where it was."""
    c = three
    topic = topics["round"]
    old = leader_of(c, topic).http_address
    # A ballast topic led by another nsqd than the partition's leader: youzan places a new
    # topic on the least loaded nsqd, which may be that leader every time, so the ballast
    # is moved off it when it lands there.
    ballast = unique("ballast")
    asyncio.run(
        create_topics(c.lookupd_http, {ballast: TopicSpec(1, 1)}, [f"b{i}" for i in range(5)])
    )
    target = leader_of(c, ballast).http_address
    if target == old:
        target = next(n.http_address for n in c.nsqds if n.http_address != old)
        asyncio.run(admin.move_partition(c.lookupd_http, ballast, 0, target)).raise_for_failures()
        eventually(
            lambda: leader_of(c, ballast).http_address == target, 60, f"{ballast} led by {target}"
        )
    seen: dict[str, float] = {}

    def heaviest() -> bool:  # nsqlookupd caches each nsqd's figures for up to a minute
        seen.update(_loads(c))
        return seen.get(target, 0.0) > max(v for a, v in seen.items() if a != target)

    # Unread data on the ballast's 5 channels counts in its leader's load factor. 3 MB is
    # enough on a fresh cluster; after this module's other topics took their data, the
    # others may weigh more: then 9 MB more (the figures refresh within a minute).
    for rounds, batches in enumerate((6, 18), start=1):
        for _ in range(batches):
            asyncio.run(_publish(c, ballast, [b"z" * 1024] * 500))
        try:
            eventually(heaviest, 70, f"{target} the most loaded nsqd in /cluster/stats")
            break
        except AssertionError as err:
            if rounds == 2:
                raise AssertionError(f"{err}; leader load factors: {seen}") from None
    proc = run_process(
        [
            NSQCTL,
            "topic",
            "move",
            topic,
            "--partition",
            "0",
            "--to",
            target,
            "--wait",
            "100",
            "--yes",
            "--lookupd",
            c.lookupd_http[0],
        ]
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.decode().strip().splitlines()  # progress lines, then the error
    assert b"Traceback" not in proc.stderr and lines[-1].startswith("nsqctl: error: "), lines
    said = lines[-1]
    assert f"not {target}: youzan makes the in-sync copy with the least leader load" in said, said
    assert f"partition 0 is led by {old}" in said, said
    assert leader_of(c, topic).http_address == old
