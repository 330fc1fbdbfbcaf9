"""A channel action on a redesign cluster whose etcd is down, on real servers.

nsqlookupd cannot name its leader then (``/listlookup`` answers etcd's error), but it
still knows the registered nsqds and each partition's leader from memory, and a partition
leader keeps its ISR in memory and passes a channel change on to it over RPC without
etcd. So the in-sync check is asked there and the action goes through when every in-sync
copy is up; when one is down it is refused, saying that nsqlookupd cannot drop that copy
from the ISR until etcd is back, never that nothing can be changed.

One private cluster (2 nsqd): a topic of 1 partition with 2 replicas, so each nsqd holds a
copy. etcd is killed, the actions are run, then the copy that does not lead is killed.
"""

from __future__ import annotations

import asyncio

import pytest

from nsqctl.admin.leader import lookupd_nsqds
from nsqctl.admin.requests import admin_client
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.stats.read import read_nsqd_stats
from tests.conftest import StartCluster
from tests.helpers.cli import assert_one_line_error, run_main
from tests.helpers.redesign import TopicSpec, create_topics, eventually, unique
from tests.helpers.redesign import nsqctl as nsqctl_ok

pytestmark = [pytest.mark.timeout(300)]


def copies(c: Cluster, topic: str) -> dict[str, tuple[bool, bool, bool, int] | None]:
    """Each running nsqd's copy of ``topic``'s partition 0: channel ``c`` as (is the
    leader, paused, skipped, depth), None without the channel."""
    out: dict[str, tuple[bool, bool, bool, int] | None] = {}
    for n in c.nsqds:
        if not process.pid_runs(n.pid, n.exe):
            continue
        for t in read_nsqd_stats(n.http_address, topic=topic).topics:
            if t.topic == topic:
                ch = t.channel("c")
                out[n.http_address] = (
                    None if ch is None else (t.is_leader, ch.paused, ch.skipped, ch.depth)
                )
    return out


def registered(c: Cluster) -> list[str]:
    async def ask() -> list[str]:
        async with admin_client() as client:
            return await lookupd_nsqds(client, c.lookupd_http)

    return asyncio.run(ask())


@pytest.mark.redesign
def test_channel_actions_with_etcd_down_check_the_isr_at_the_leaders(
    start_cluster: StartCluster,
) -> None:
    c = start_cluster("redesign", nsqd=2)
    topic = unique("etcdless")
    asyncio.run(create_topics(c.lookupd_http, {topic: TopicSpec(1, 2)}))
    lookupd = ("--lookupd", c.lookupd_http[0])
    nsqctl_ok("pub", topic, *lookupd, stdin=b"m1\nm2\nm3\n")
    eventually(lambda: None not in copies(c, topic).values(), 30, "channel c on both copies")
    [leader] = [a for a, v in copies(c, topic).items() if v is not None and v[0]]
    [replica] = [n for n in c.nsqds if n.http_address != leader]

    [etcd] = c.by_role("etcd")
    process.kill_hard(etcd)
    listlookup = f"http://{c.lookupd_http[0]}/listlookup"
    eventually(lambda: not process.http_ok(listlookup), 30, "nsqlookupd seeing etcd down")

    # every in-sync copy is up: the dry run and the action go through, and the leader
    # passes the change on to the other copy without etcd
    for action, flag, want in (
        ("pause", 1, True),
        ("unpause", 1, False),
        ("skip", 2, True),
        ("unskip", 2, False),
    ):
        dry = run_main("channel", action, topic, "c", *lookupd, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "nothing was changed" in dry.stdout
        done = run_main("channel", action, topic, "c", *lookupd, "--yes")
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert {a: v and v[flag] for a, v in copies(c, topic).items()} == {
            leader: want,
            replica.http_address: want,
        }
    # the ones that drop messages too, each on a channel given messages first (the skip
    # above may have let the first ones go): published with etcd down, writes need none
    full = (True, False, False, 3)
    for action in ("empty", "setoffset"):
        nsqctl_ok("pub", topic, *lookupd, stdin=b"m1\nm2\nm3\n")
        eventually(lambda: copies(c, topic)[leader] == full, 10, "the messages in the channel")
        end = ("--end",) if action == "setoffset" else ()
        done = run_main("channel", action, topic, "c", *end, *lookupd, "--yes")
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert copies(c, topic)[leader] == (True, False, False, 0)
    nsqctl_ok("pub", topic, *lookupd, stdin=b"m1\nm2\nm3\n")  # for an empty to drop

    # the other copy dies: nsqlookupd forgets it, but cannot drop it from the ISR
    process.kill_hard(replica)
    eventually(lambda: replica.http_address not in registered(c), 30, "the lookupd to forget it")
    eventually(lambda: copies(c, topic) == {leader: full}, 10, "the messages in the channel")
    before = copies(c, topic)
    for action in ("pause", "empty"):
        dry = run_main("channel", action, topic, "c", *lookupd, "--dry-run")
        line = assert_one_line_error(dry, 1)
        done = run_main("channel", action, topic, "c", *lookupd, "--yes")
        assert assert_one_line_error(done, 1) == line
        assert f"channel {action} {topic}/c refused, nothing was changed: " in line
        # youzan needs both copies of a 2-replica partition in sync to apply a change
        assert f"({replica.tcp_address} in its ISR is down)" in line, line
        back = f"bring etcd back and bring {replica.tcp_address} back first: nsqlookupd can"
        assert f"{back} change no ISR while etcd is down" in line, line
        assert "etcd cluster is unavailable" in line, line  # etcd's words, once
        assert "nothing can be changed" not in line, line
    assert copies(c, topic) == before
