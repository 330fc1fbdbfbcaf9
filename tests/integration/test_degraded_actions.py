"""Every acting command on a degraded cluster, of either family, completes fully or refuses,
on real servers; a dry run gives the verdict the real run gives.

One private redesign cluster (3 nsqd) serves the redesign tests. Three topics, each with
channel ``c`` and messages: ``split`` (3 partitions, 1 replica: one on each nsqd),
``copied`` (1 partition, 2 replicas) and ``trio`` (1 partition, 3 replicas); and
``lone`` (1 ordered partition, no channel), to expand. The fixture kills (-9) an nsqd
holding a copy of ``copied`` that does not lead it, which leaves a partition of
``split`` with no live copy, ``copied`` with 1 of its 2 in-sync copies up (youzan
applies nothing there) and ``trio`` with 2 of 3 (enough). Then, one after another: the
leader of ``trio`` stopped (SIGSTOP, back after), etcd killed, nsqlookupd killed.

The original family has its own cluster (2 nsqd, no partitions): one nsqd stopped, then
killed, then nsqlookupd killed. An nsqd that died is forgotten by nsqlookupd at once, so
a command through nsqlookupd then acts on every nsqd the cluster knows; given the nsqds'
HTTP addresses, it refuses while one of them does not answer.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from nsqctl.stats.read import read_nsqd_stats
from tests.helpers.cli import invoke, run_main
from tests.helpers.clusters import running_cluster
from tests.helpers.hang import Run, nsqctl, stopped
from tests.helpers.redesign import TopicSpec, create_topics, eventually, unique
from tests.helpers.redesign import nsqctl as nsqctl_ok

pytestmark = [pytest.mark.timeout(300)]

#: What a command meeting a hung nsqd may take: the admin timeout (10 s) once per step
#: that asks it, with room for a slow machine.
BOUND = 45.0

State = dict[tuple[str, int | None], tuple[bool, bool, int] | None]
"""(nsqd, partition) → channel ``c`` there: (paused, skipped, depth), None when absent.
The depth is a leader's only: a replica's is not kept up to date."""


@dataclass
class Rig:
    c: Cluster
    split: str
    copied: str
    trio: str
    victim: NodeRecord
    lone: str = ""

    @property
    def lookupd(self) -> list[str]:
        return ["--lookupd", self.c.lookupd_http[0]]

    @property
    def live(self) -> list[NodeRecord]:
        return [n for n in self.c.nsqds if n is not self.victim]

    def lookup(self, topic: str) -> dict[str, Any]:
        result = invoke("lookup", topic, "--json", *self.lookupd)
        assert result.exit_code == 0, result.output
        info: dict[str, Any] = json.loads(result.stdout)
        return info

    def leader(self, topic: str, partition: int = 0) -> str:
        """The partition's leader, once it has one (an earlier cell may have just
        restarted an nsqd, and the election takes a moment)."""
        found: list[str] = []

        def elected() -> bool:
            parts = {p["partition"]: p for p in self.lookup(topic)["partitions"]}
            leader: str | None = parts[partition]["leader_http"]
            found[:] = [leader] if leader else []
            return bool(found)

        eventually(elected, 60, f"a leader for {topic}/{partition}")
        return found[0]


def state(nodes: Sequence[str], topic: str) -> State:
    """Channel ``c`` of ``topic`` on every copy the nsqds at ``nodes`` hold, as each says:
    (paused, skipped, depth), None where the copy has no such channel."""
    out: State = {}
    for http in nodes:
        for t in read_nsqd_stats(http, topic=topic).topics:
            if t.topic == topic:
                ch = t.channel("c")
                depth = -1 if ch is None or not t.is_leader else ch.depth
                out[(http, t.partition)] = None if ch is None else (ch.paused, ch.skipped, depth)
    return out


def degrade(c: Cluster) -> Rig:
    """The topics, their messages, then the kill (module doc)."""
    split, copied, trio = unique("split"), unique("copied"), unique("trio")
    specs = {split: TopicSpec(3, 1), copied: TopicSpec(1, 2), trio: TopicSpec(1, 3)}
    asyncio.run(create_topics(c.lookupd_http, specs))
    lookupd = ["--lookupd", c.lookupd_http[0]]
    for topic in specs:
        nsqctl_ok("pub", topic, *lookupd, stdin=b"".join(b"m%d\n" % i for i in range(30)))
    # ordered, so that one more partition needs no more nsqds than are left up
    lone = unique("lone")
    asyncio.run(create_topics(c.lookupd_http, {lone: TopicSpec(1, 1, ordered=True)}, ()))
    rig = Rig(c, split, copied, trio, c.nsqds[0], lone)
    [part] = rig.lookup(copied)["partitions"]
    spare = next(a for a in part["isr"] if a != part["leader_http"])
    rig.victim = next(n for n in c.nsqds if n.http_address == spare)
    process.kill_hard(rig.victim)
    eventually(
        lambda: any(not p["live_copy"] for p in rig.lookup(split)["partitions"]),
        30,
        "a partition of the split topic without a live copy",
    )
    return rig


def unchanged(before: State, after: State) -> bool:
    """Every copy as it was: paused and skipped alike, and the depth wherever the copy led
    both times (youzan may elect another leader meanwhile)."""
    if before.keys() != after.keys():
        return False
    for key, was in before.items():
        now = after[key]
        if was is None or now is None:
            if was != now:
                return False
        elif was[:2] != now[:2] or (-1 not in (was[2], now[2]) and was[2] != now[2]):
            return False
    return True


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    for c in running_cluster("redesign", tmp_path_factory.mktemp("degraded-acts"), nsqd=3):
        yield degrade(c)


def both(*args: str, real: Sequence[str] = ("--yes",)) -> tuple[Any, Any]:
    """``nsqctl ARGS --dry-run`` and ``nsqctl ARGS`` for real (``real``: its extra flags)."""
    return run_main(*args, "--dry-run"), run_main(*args, *real)


def error_line(proc: subprocess.CompletedProcess[str] | Run, code: int, alone: bool) -> str:
    """The one ``nsqctl: error:`` line of a refused command, last on stderr, no traceback;
    ``alone``: the only line (a drain lists the partitions it names before it)."""
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in lines if line.startswith("nsqctl: error: ")]
    assert errors == [lines[-1]], lines
    assert not alone or len(lines) == 1, lines
    return lines[-1]


def refused(
    rig: Rig,
    topic: str,
    *args: str,
    code: int = 1,
    real: Sequence[str] = ("--yes",),
    alone: bool = True,
) -> str:
    """Dry run and real run refuse alike, and no copy of ``topic`` changed."""
    nodes = [n.http_address for n in rig.live]
    before = state(nodes, topic)
    dry, done = both(*args, *rig.lookupd, real=real)
    line = error_line(dry, code, alone)
    assert error_line(done, code, alone) == line
    assert unchanged(before, state(nodes, topic)), line
    return line


def completed(
    rig: Rig, topic: str, changed: Callable[[tuple[bool, bool, int]], bool], *args: str
) -> None:
    """Dry run exits 0 changing nothing; the real run exits 0 and every leader's channel
    then satisfies ``changed``."""
    nodes = [n.http_address for n in rig.live]
    before = state(nodes, topic)
    dry = run_main(*args, *rig.lookupd, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "nothing was changed" in dry.stdout
    assert state(nodes, topic) == before
    done = run_main(*args, *rig.lookupd, "--yes")
    assert done.returncode == 0, (done.stdout, done.stderr)
    leaders = {rig.leader(topic, p) for p in range(len(rig.lookup(topic)["partitions"]))}
    after = {k: v for k, v in state(nodes, topic).items() if k[0] in leaders}
    assert after and all(v is not None and changed(v) for v in after.values()), after


CHANNEL_ACTIONS = (
    ("pause",),
    ("unpause",),
    ("empty",),
    ("skip",),
    ("unskip",),
    ("setoffset", "--end"),
    ("delete",),
)


def channel_args(topic: str, action: Sequence[str]) -> list[str]:
    return ["channel", action[0], topic, "c", *action[1:]]


@pytest.mark.redesign
def test_a_partition_without_a_live_copy_refuses_every_action(rig: Rig) -> None:
    dead = next(p["partition"] for p in rig.lookup(rig.split)["partitions"] if not p["live_copy"])
    for action in CHANNEL_ACTIONS:
        line = refused(rig, rig.split, *channel_args(rig.split, action))
        # no leader is all the lookup says: not "no live copy", which is false while a
        # surviving copy waits for its election
        assert f"partition(s) {dead} have no leader (every nsqd holding them is down" in line
        assert "no live copy" not in line
        assert "nothing was changed" in line and "--partition" in line
    # the partition named alone: refused the same way, not "no such partition"
    line = refused(rig, rig.split, "channel", "pause", rig.split, "c", "--partition", str(dead))
    assert f"partition(s) {dead} have no leader" in line
    line = refused(rig, rig.split, "topic", "pause", rig.split, code=2)
    assert "no topic pause" in line
    target = rig.live[0].http_address
    move = ("topic", "move", rig.split, "--partition", str(dead), "--to", target)
    line = refused(rig, rig.split, *move)
    # its only nsqd is dead: waiting for an election alone would never end
    assert "has no leader now: if every nsqd holding it is down, bring one back" in line
    # a meta change nsqlookupd would refuse with a bare "No node is available" after
    # retries (and that the dry run used to pass): refused at once, saying why
    update = ("topic", "update", rig.split, "--retention-days", "3")
    line = refused(rig, rig.split, *update, real=("--yes", "--wait", "5"))
    assert "nothing was changed" in line and "bring the missing nsqds back" in line
    # one more partition needs a fourth nsqd, and only two are up: refused as bad input
    assert "registered" in refused(
        rig, rig.split, "topic", "expand", rig.split, "--partitions", "4", code=2
    )
    # an expand of any topic: nsqlookupd calls the cluster unstable for as long as a
    # partition has no live copy, so it is refused at once, naming that partition
    expand = ("topic", "expand", rig.lone, "--partitions", "2")
    line = refused(rig, rig.lone, *expand, real=("--yes", "--wait", "5"))
    assert f"topic expand {rig.lone} refused, nothing was changed" in line
    assert f"topic {rig.split} partition {dead}" in line and "no live copy" in line
    assert "bring one of its nsqds back" in line
    # a topic that does not exist: its "not found" says nothing of another topic's
    # partition, which could not hide it
    missing = run_main("lookup", unique("absent"), *rig.lookupd)
    line = error_line(missing, 1, alone=True)
    assert "not found" in line and rig.split not in line and "partition" not in line, line
    # a live partition named alone: that partition changes, fully
    live = next(p["partition"] for p in rig.lookup(rig.split)["partitions"] if p["live_copy"])
    dry, done = both("channel", "pause", rig.split, "c", "--partition", str(live), *rig.lookupd)
    assert (dry.returncode, done.returncode) == (0, 0), (dry.stderr, done.stderr)
    paused = state([n.http_address for n in rig.live], rig.split)
    assert {k[1]: v is not None and v[0] for k, v in paused.items()} == {
        p: p == live for p in (0, 1, 2) if p != dead
    }
    assert f"partition {dead}: could not ask" in deleted(rig, rig.split)


def deleted(rig: Rig, topic: str) -> str:
    """``topic delete``: sent to nsqlookupd alone, which deletes the topic whole or answers
    that it cannot now ("the cluster is unstable", while it repairs what a failure broke),
    which no dry run can foresee: then nothing changed. The dry run's output."""
    nodes = [n.http_address for n in rig.live]
    before = state(nodes, topic)
    dry, done = both("topic", "delete", topic, *rig.lookupd)
    assert dry.returncode == 0, dry.stderr
    listed = run_main("lookup", topic, *rig.lookupd)
    if done.returncode == 0:
        assert "not found" in error_line(listed, 1, alone=True)
    else:
        assert "cluster is unstable" in error_line(done, 1, alone=False)
        assert listed.returncode == 0, listed.stderr
        assert unchanged(before, state(nodes, topic))
    return str(dry.stdout)


@pytest.mark.redesign
def test_too_few_in_sync_copies_refuse_and_enough_complete(rig: Rig) -> None:
    for action in CHANNEL_ACTIONS:
        line = refused(rig, rig.copied, *channel_args(rig.copied, action))
        assert "partition 0 has 1 in-sync copy up of an ISR of 2 (" in line
        assert f"{rig.victim.tcp_address} in its ISR is down" in line and "needs 2 of 2" in line
        assert line.endswith(f"bring {rig.victim.tcp_address} back first"), line
    leader = rig.leader(rig.copied)
    drain = ("node", "drain", leader)
    line = refused(rig, rig.copied, *drain, real=("--timeout", "20"), alone=False)
    assert f"{leader} cannot be drained now" in line
    line = refused(
        rig, rig.copied, "node", "drain", rig.victim.http_address, real=("--timeout", "5")
    )
    assert f"nsqd {rig.victim.http_address} does not answer and nsqlookupd " in line
    expand = ("topic", "expand", rig.copied, "--partitions", "2")
    assert "need 4 nodes" in refused(rig, rig.copied, *expand, code=2)
    restore = run_main("node", "restore", leader, "--wait", "5", *rig.lookupd)
    assert "nothing to restore" in error_line(restore, 1, alone=True)
    # trio keeps 2 of 3 in sync: refused while its ISR lists the dead copy, applied once
    # nsqlookupd has dropped it
    pause = ("channel", "pause", rig.trio, "c", *rig.lookupd, "--dry-run")
    first = run_main(*pause)
    if first.returncode:
        # while nsqlookupd drops it (a topic check, which the delete before may have asked
        # for) the partition shows no leader for a moment: refused alike, nothing changed
        line = refused(rig, rig.trio, *pause[:4])
        isr = f"ISR still lists {rig.victim.tcp_address}, which is down"
        assert isr in line or "partition(s) 0 have no leader" in line, line
    eventually(lambda: run_main(*pause).returncode == 0, 90, "the dead copy out of the ISR")
    completed(rig, rig.trio, lambda v: v[0], "channel", "pause", rig.trio, "c")
    completed(rig, rig.trio, lambda v: v[1], "channel", "skip", rig.trio, "c")
    completed(rig, rig.trio, lambda v: v[2] == 0, "channel", "setoffset", rig.trio, "c", "--end")


@pytest.mark.redesign
async def test_a_hung_leader_times_out_and_nothing_changes(rig: Rig) -> None:
    leader = await asyncio.to_thread(rig.leader, rig.trio)
    hung = next(n for n in rig.live if n.http_address == leader)
    nodes = [n.http_address for n in rig.live]
    before = await asyncio.to_thread(state, nodes, rig.trio)
    commands = [(channel_args(rig.trio, a), "--yes") for a in CHANNEL_ACTIONS if "un" not in a[0]]
    commands.append((["node", "drain", leader], "--timeout=5"))
    async with stopped(hung):
        # first, while nsqlookupd surely still lists the stopped leader
        stat = await nsqctl("stat", rig.trio, "--count", "1", *rig.lookupd, bound=BOUND)
        runs = await asyncio.gather(
            *(
                nsqctl(*args, *rig.lookupd, flag, bound=BOUND)
                for args, real in commands
                for flag in ("--dry-run", real)
            )
        )
    # nsqlookupd still lists the stopped leader: stat says it does not answer, in the
    # lookup's words, not that the partition has no live copy
    assert stat.code == 0, stat.err
    assert f"{rig.trio}#0: its leader {leader} does not answer" in stat.err, stat.err
    assert "no live copy" not in stat.err, stat.err
    for i, (args, _) in enumerate(commands):
        dry, done = runs[2 * i], runs[2 * i + 1]
        # youzan may elect a new leader while the old one is stopped (then refused for the
        # ISR it leaves): which reason a run gives depends on when it asked
        verdict = f"channel {args[1]} {rig.trio}/c refused, nothing was changed: "
        if args[0] == "node":
            # and whether nsqlookupd still lists the stopped nsqd when the drain asks
            verdict = f"nsqd {leader} does not answer "
        for run in (dry, done):
            line = error_line(run, 1, alone=True)
            assert line.startswith(f"nsqctl: error: {verdict}"), line
    assert max(r.took for r in runs) < BOUND
    await asyncio.to_thread(
        eventually, lambda: process.http_ok(f"http://{leader}/ping"), 10, "the nsqd back"
    )
    assert unchanged(before, await asyncio.to_thread(state, nodes, rig.trio))


def agree(
    rig: Rig, topic: str, changed: Callable[[tuple[bool, bool, int]], bool], *args: str
) -> int:
    """For a state whose outcome the servers decide: the dry run and the real run give the
    same verdict; a refusal (one line) changed nothing, a success changed every copy of
    ``topic`` the nsqds lead. The exit code."""
    nodes = [n.http_address for n in rig.live]
    before = state(nodes, topic)
    dry, done = both(*args, *rig.lookupd)
    assert dry.returncode == done.returncode, (dry.stderr, done.stderr)
    if dry.returncode:
        line = error_line(dry, dry.returncode, alone=True)
        assert error_line(done, dry.returncode, alone=True) == line
        assert unchanged(before, state(nodes, topic)), line
        return int(dry.returncode)
    leaders = {
        http
        for http in nodes
        for t in read_nsqd_stats(http, topic=topic).topics
        if t.topic == topic and t.is_leader
    }
    after = {k: v for k, v in state(nodes, topic).items() if k[0] in leaders}
    assert after and all(v is not None and changed(v) for v in after.values()), after
    return 0


@pytest.mark.redesign
def test_etcd_down_changes_all_or_nothing(rig: Rig) -> None:
    leader = rig.leader(rig.trio)  # waits out the replacement of the test before's leader
    [etcd] = rig.c.by_role("etcd")
    process.kill_hard(etcd)
    listlookup = f"http://{rig.c.lookupd_http[0]}/listlookup"
    eventually(lambda: not process.http_ok(listlookup), 30, "nsqlookupd seeing etcd down")
    line = refused(rig, rig.trio, "node", "drain", leader, real=("--timeout", "5"))
    assert "/listlookup answered 500" in line
    # what was wrong (in etcd's words) and what to do, not a bare status
    assert "etcd cluster is unavailable" in line and "bring etcd back" in line
    # a topic the lookupd does not know it answers with etcd's error too: it runs, so
    # "check that nsqlookupd is running" would send the operator the wrong way
    line = error_line(run_main("pub", unique("nowhere"), "x", *rig.lookupd), 1, alone=True)
    assert "etcd cluster is unavailable" in line and "bring etcd back" in line
    assert "is running" not in line
    # a channel change is between a leader and its ISR, which the leader keeps in memory
    # and nsqlookupd names from memory: it completes with etcd down; a topic change needs
    # nsqlookupd's leader, which cannot act without etcd: refused whole
    agree(rig, rig.trio, lambda v: not v[0], "channel", "unpause", rig.trio, "c")
    agree(rig, rig.trio, lambda v: not v[1], "channel", "unskip", rig.trio, "c")
    assert agree(rig, rig.trio, lambda v: False, "topic", "expand", rig.trio, "--partitions", "2")


@pytest.mark.redesign
def test_lookupd_down_refuses_everything(rig: Rig) -> None:
    process.kill_hard(rig.c.lookupds[0])
    leader = rig.live[0].http_address
    for args, real in (
        *((channel_args(rig.trio, a), ("--yes",)) for a in CHANNEL_ACTIONS),
        (("topic", "delete", rig.trio), ("--yes",)),
        (("topic", "expand", rig.trio, "--partitions", "2"), ("--yes",)),
        (("topic", "move", rig.trio, "--partition", "0", "--to", leader), ("--yes",)),
        (("node", "drain", leader), ("--timeout", "5")),
    ):
        line = refused(rig, rig.trio, *args, real=real)
        assert "nsqlookupd" in line and "answer" in line, line


# ------------------------------------------------------------------ the original NSQ


@dataclass
class Pair:
    c: Cluster
    topic: str

    @property
    def lookupd(self) -> list[str]:
        return ["--lookupd", self.c.lookupd_http[0]]

    def each(self) -> list[str]:
        """Every nsqd by HTTP address, as ``--nsqd-http`` arguments."""
        return [a for n in self.c.nsqds for a in ("--nsqd-http", n.http_address)]


Held = dict[str, tuple[bool, tuple[bool, int] | None]]


def held(nodes: Sequence[str], topic: str) -> Held:
    """nsqd → its ``topic``: (paused, channel ``c`` as (paused, depth) or None); an nsqd
    without the topic is left out."""
    out: Held = {}
    for http in nodes:
        for t in read_nsqd_stats(http, topic=topic).topics:
            if t.topic == topic:
                ch = t.channel("c")
                out[http] = (t.paused, None if ch is None else (ch.paused, ch.depth))
    return out


def listed(lookupd: Sequence[str], topic: str) -> list[str]:
    """The nsqds (HTTP addresses) nsqlookupd lists for ``topic``."""
    info = json.loads(invoke("lookup", topic, "--json", "--lookupd", *lookupd).stdout)
    return sorted(n["http"] for n in info["nsqds"])


def two_nsqds(c: Cluster) -> Pair:
    """The topic on both nsqds, channel ``c`` and 3 messages on each."""
    topic = unique("both")
    for n in c.nsqds:
        for path in (f"/topic/create?topic={topic}", f"/channel/create?topic={topic}&channel=c"):
            httpx.post(f"http://{n.http_address}{path}", timeout=10).raise_for_status()
        body = b"1\n2\n3"
        httpx.post(f"http://{n.http_address}/mpub?topic={topic}", content=body, timeout=10)
    everyone = sorted(c.nsqd_http)
    eventually(lambda: listed(c.lookupd_http, topic) == everyone, 30, "both nsqds listed")
    return Pair(c, topic)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    for c in running_cluster("original", tmp_path_factory.mktemp("degraded-orig"), nsqd=2):
        yield two_nsqds(c)


ORIGINAL_ACTIONS = (
    ("topic", "pause"),
    ("topic", "unpause"),
    ("topic", "empty"),
    ("topic", "delete"),
    ("channel", "pause"),
    ("channel", "unpause"),
    ("channel", "empty"),
    ("channel", "delete"),
)


def original_args(topic: str, kind: str, action: str) -> list[str]:
    return [kind, action, topic, *(["c"] if kind == "channel" else [])]


@pytest.mark.original
async def test_original_a_hung_nsqd_refuses_every_action(pair: Pair) -> None:
    a, b = pair.c.nsqds
    nodes = [a.http_address, b.http_address]
    before = await asyncio.to_thread(held, nodes, pair.topic)
    commands = [
        (original_args(pair.topic, k, x), "--yes") for k, x in ORIGINAL_ACTIONS if "un" not in x
    ]
    commands.append((["node", "drain", b.http_address], "--timeout=5"))
    fresh = unique("fresh")  # topic create has no dry run: it refuses before it sends
    async with stopped(b):
        *runs, create = await asyncio.gather(
            *(
                nsqctl(*args, *pair.lookupd, flag, bound=BOUND)
                for args, real in commands
                for flag in ("--dry-run", real)
            ),
            nsqctl("topic", "create", fresh, *pair.lookupd, bound=BOUND),
        )
    assert max(r.took for r in (*runs, create)) < BOUND
    line = error_line(create, 1, alone=True)
    assert f"nsqd {b.http_address}" in line and "nothing was changed" in line, line
    assert not read_nsqd_stats(a.http_address, topic=fresh).topics
    topics = httpx.get(f"http://{pair.c.lookupd_http[0]}/topics", timeout=10).json()["topics"]
    assert fresh not in topics
    for i, (args, _) in enumerate(commands):
        dry, done = runs[2 * i], runs[2 * i + 1]
        line = error_line(dry, 1, alone=True)
        assert error_line(done, 1, alone=True) == line, args
        assert f"nsqd {b.http_address}" in line and "nothing was changed" in line, line
    assert await asyncio.to_thread(held, nodes, pair.topic) == before


@pytest.mark.original
def test_original_a_killed_nsqd(pair: Pair) -> None:
    a, b = pair.c.nsqds
    process.kill_hard(b)
    only_a = [a.http_address]
    eventually(lambda: listed(pair.c.lookupd_http, pair.topic) == only_a, 30, "b forgotten")
    nodes = [a.http_address]
    before = held(nodes, pair.topic)
    # named by address, the dead nsqd is known to be missing: refused, nothing changed
    for kind, action in ORIGINAL_ACTIONS:
        dry, done = both(*original_args(pair.topic, kind, action), *pair.each())
        line = error_line(dry, 1, alone=True)
        assert error_line(done, 1, alone=True) == line
        assert f"nsqd {b.http_address}" in line and "refused, nothing was changed" in line
        assert held(nodes, pair.topic) == before
        # through nsqlookupd (which forgot it) with every nsqd given too, as a profile
        # or the sandbox's environment gives them: the dead one is known, refused alike
        dry, done = both(*original_args(pair.topic, kind, action), *pair.lookupd, *pair.each())
        line = error_line(dry, 1, alone=True)
        assert error_line(done, 1, alone=True) == line
        assert f"nsqd {b.http_address}" in line and "refused, nothing was changed" in line
        assert held(nodes, pair.topic) == before
    # the redesign's commands: bad input for this cluster, said alike
    for args in (
        ("channel", "skip", pair.topic, "c"),
        ("channel", "setoffset", pair.topic, "c", "--end"),
        ("topic", "expand", pair.topic, "--partitions", "2"),
        ("topic", "move", pair.topic, "--partition", "0", "--to", a.http_address),
    ):
        dry, done = both(*args, *pair.lookupd)
        assert error_line(done, 2, alone=True) == error_line(dry, 2, alone=True)
    dry, done = both("node", "drain", b.http_address, *pair.lookupd, real=("--timeout=5",))
    assert f"nsqd {b.http_address} does not answer and " in error_line(dry, 1, alone=True)
    assert error_line(done, 1, alone=True) == error_line(dry, 1, alone=True)
    restore = run_main("node", "restore", b.http_address, *pair.lookupd)
    assert "nothing to restore" in error_line(restore, 1, alone=True)
    # through nsqlookupd, every nsqd the cluster knows: each change made whole
    for (kind, action), done_when in (
        (("topic", "pause"), lambda h: h[0]),
        (("channel", "pause"), lambda h: h[1] is not None and h[1][0]),
        (("channel", "empty"), lambda h: h[1] is not None and h[1][1] == 0),
        (("channel", "delete"), lambda h: h[1] is None),
    ):
        acting = original_args(pair.topic, kind, action)
        before = held(nodes, pair.topic)
        dry = run_main(*acting, *pair.lookupd, "--dry-run")
        assert dry.returncode == 0 and "nothing was changed" in dry.stdout, dry.stderr
        assert held(nodes, pair.topic) == before
        done = run_main(*acting, *pair.lookupd, "--yes")
        assert done.returncode == 0, done.stderr
        assert done_when(held(nodes, pair.topic)[a.http_address]), held(nodes, pair.topic)


@pytest.mark.original
def test_original_lookupd_down_refuses_everything(pair: Pair) -> None:
    a = pair.c.nsqds[0]
    process.kill_hard(pair.c.lookupds[0])
    before = held([a.http_address], pair.topic)
    for args, real in (
        *((original_args(pair.topic, k, x), ("--yes",)) for k, x in ORIGINAL_ACTIONS),
        (("node", "drain", a.http_address), ("--timeout=5",)),
    ):
        dry, done = both(*args, *pair.lookupd, real=real)
        line = error_line(dry, 1, alone=True)
        assert error_line(done, 1, alone=True) == line
        assert "no nsqlookupd answered" in line, line
    assert held([a.http_address], pair.topic) == before
    restore = run_main("node", "restore", a.http_address, *pair.lookupd)
    assert "nothing to restore" in error_line(restore, 1, alone=True)
