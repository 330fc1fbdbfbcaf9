"""Every read-only view of an original cluster with a node down tells the truth, on real
servers: the original family's cells of the degraded-cluster matrix.

One private cluster (2 nsqd, 1 nsqlookupd) serves the module, its states applied one after
another and each restored before the next: an nsqd killed with -9, the same nsqd
SIGSTOPped (its sockets stay open, it answers nothing), then the nsqlookupd killed. In
each nsqd state a topic held by the victim alone stays listed by every view, marked not
seen and naming the victim, never silently left out: as a fact (critical) wherever
something names the victim as its holder (a view that saw it before it died, nsqlookupd
while the victim keeps its connection, hung), and as a guess (a warning) on a first poll
after a kill, when nsqlookupd lists it with no producer. A topic nsqlookupd lists but no
nsqd holds (created on nsqlookupd alone) reads exactly like that guess, since nothing
tells the two apart: on the nsqd down, or left behind, never an outage. The surfaces are
given both nsqds' HTTP addresses, as a profile gives them: an original nsqlookupd forgets
a killed nsqd the moment its connection drops, so without them nothing could know it was
ever there.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from nsqctl.health.evaluate import evaluate
from nsqctl.health.spec import RuleSet
from nsqctl.servers import process
from nsqctl.servers.cluster import Cluster
from nsqctl.servers.process import NodeRecord
from nsqctl.stats import read_nsqd_stats
from nsqctl.stats.coverage import coverage
from nsqctl.stats.poller import NOT_ANSWERING, StatsPoller
from nsqctl.stats.recording import RecordingTransport
from nsqctl.stats.sources import StatsSession
from nsqctl.stats.view import ClusterView
from nsqctl.tui import rows
from tests.helpers import degraded as cells
from tests.helpers.cli import assert_one_line_error, invoke, run_main
from tests.helpers.clusters import running_cluster
from tests.helpers.hang import stopped
from tests.helpers.redesign import eventually, unique


@dataclass
class Original:
    c: Cluster
    topic: str
    victim: NodeRecord  # killed, then stopped
    survivor: NodeRecord
    left: str  # created on nsqlookupd alone: listed by it, held by no nsqd

    @property
    def where(self) -> list[str]:
        return ["--lookupd", self.c.lookupd_http[0]]

    @property
    def everywhere(self) -> list[str]:
        """The lookupd and both nsqds' HTTP addresses (as a profile gives them)."""
        return [*self.where, *(a for n in self.c.nsqd_http for a in ("--nsqd-http", n))]


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Original]:
    directory = tmp_path_factory.mktemp("degraded-original")
    for c in running_cluster("original", directory, nsqd=2):
        topic = unique("orig")
        where = ["--lookupd", c.lookupd_http[0]]
        cells.ok("topic", "create", topic, *where)
        cells.ok("channel", "create", topic, "c", *where)
        left = unique("left")
        created = httpx.post(f"http://{c.lookupd_http[0]}/topic/create?topic={left}", timeout=10)
        created.raise_for_status()
        yield Original(c, topic, victim=c.nsqds[1], survivor=c.nsqds[0], left=left)


#: node-down and orphan (unknown after one poll) off: what the other default rules find alone
QUIETER = ("--rule", "node-down=off", "--rule", "orphan=off")


def _on_victim_alone(o: Original, prefix: str) -> str:
    """A new topic (with channel ``oc``) on the victim nsqd only."""
    topic = unique(prefix)
    victim = o.victim.http_address
    for path in (f"topic/create?topic={topic}", f"channel/create?topic={topic}&channel=oc"):
        httpx.post(f"http://{victim}/{path}", timeout=10).raise_for_status()
    return topic


def _assert_dashboard_keeps(view: ClusterView, topic: str, held: str) -> None:
    """The dashboard's topics table lists ``topic``, its numbers unknown, marked not seen
    with the nsqd holding it; its summary counts it."""
    marked = f"NOT SEEN (nsqd {held} down)"
    [row] = [cells for key, cells in rows.topic_rows(view) if key == topic]
    shown = [str(c) for i, c in enumerate(row) if i not in (3, 6)]  # not the trend cells
    assert shown == [topic, "1", "?", "?", "?", "1", marked], row
    summary = rows.summary_line(view).plain
    # the victim may hold an earlier test's too; a guess (listed with no producer) is
    # counted apart
    lost = sum(t.not_seen and not t.unregistered for t in view.topics)
    assert f"{len(view.topics)} topics" in summary, summary
    assert f"{lost} topics not seen (their nsqds are down)" in summary, summary
    seen = view.topic(topic)
    assert seen is not None and seen.not_seen and seen.unseen_channels == ("oc",)


async def _across(o: Original, topic: str, kill: Callable[[], None]) -> ClusterView:
    """The view a running dashboard has once ``kill`` took down the nsqd holding
    ``topic``: it knows from its last poll what that nsqd held, the only source that still
    names it (nsqlookupd dropped the nsqd's producers when its connection closed)."""
    session = StatsSession(StatsPoller(o.c.lookupd_http, o.c.nsqd_http, focus=None))
    try:
        assert (await session.refresh()).topic(topic) is not None
        await asyncio.to_thread(kill)
        return await session.refresh()
    finally:
        await session.aclose()


async def _paths_of_two_polls(o: Original) -> list[list[str]]:
    """The HTTP paths each of two consecutive polls of a dashboard's session asks (of the
    lookupd and both nsqds)."""
    transport = RecordingTransport()
    poller = StatsPoller(o.c.lookupd_http, o.c.nsqd_http, focus=None, transport=transport)
    session = StatsSession(poller)
    polls = []
    try:
        for _ in range(2):
            transport.exchanges.clear()
            await session.refresh()
            polls.append(sorted(urlsplit(ex.url).path for ex in transport.exchanges))
    finally:
        await session.aclose()
    return polls


def _guessed(topic: str, down: str) -> str:
    """check's not-seen message for ``topic``, which nsqlookupd lists with no producer
    while nsqd ``down`` is down: both things it may be."""
    return (
        f"nsqlookupd lists it with no producer: may be on nsqd {down} (down), or a "
        f"registration nsqlookupd kept after its last producer left; fix: bring nsqd {down} "
        f"back, or, if nothing holds it, delete the registration: nsqctl topic delete {topic}, "
        "given only the nsqlookupds and the nsqds in service (it refuses while an nsqd it is "
        "given is down)"
    )


def _guessed_where(down: str) -> str:
    """Where stat, top and the dashboard say such a topic is."""
    return f"nsqlookupd lists it with no producer: on nsqd {down} (down), or left behind"


def _assert_left_is_a_guess(o: Original, view: ClusterView, check: Any, down: str) -> None:
    """The topic created on nsqlookupd alone, held by no nsqd, reads as what nsqlookupd
    says of it: listed with no producer, so on nsqd ``down`` or left behind; a warning
    saying both, never an outage."""
    left = view.topic(o.left)
    assert left is not None, [t.name for t in view.topics]
    assert (left.not_seen, left.held_by, left.unregistered, left.severity) == (
        True,
        (down,),
        True,
        "warn",
    )
    assert (o.left, (down,), True, True) in coverage(view).unseen_topics
    [finding] = [f for f in cells.findings(check, "not-seen") if f["topic"] == o.left]
    assert (finding["status"], finding["message"]) == ("warn", _guessed(o.left, down))


def _registered(o: Original) -> set[str]:
    nodes = json.loads(cells.ok("node", "list", "--json", *o.where).stdout)["nodes"]
    return {n["http"] for n in nodes if n["registered"]}


def test_healthy_cluster_lists_everything_and_raises_no_alarm(original: Original) -> None:
    o = original
    listing = json.loads(cells.ok("topic", "list", "--json", *o.everywhere).stdout)
    assert o.topic in listing["topics"] and listing["complete"] is True
    nodes = json.loads(cells.ok("node", "list", "--json", *o.everywhere).stdout)
    assert nodes["complete"] is True and nodes["warnings"] == []
    assert {(n["http"], n["state"], n["registered"]) for n in nodes["nodes"]} == {
        (a, "up", True) for a in o.c.nsqd_http
    }
    record = cells.one_record("stat", o.topic, "--json", "-n", "1", *o.everywhere)
    assert record["complete"] is True and record["warnings"] == []
    check = cells.ok("check", "-n", "1", "--rule", "orphan=off", *o.everywhere)
    assert check.stdout.startswith("OK: ")
    # keeping a topic whose nsqds are all down costs a whole cluster no request
    for paths in asyncio.run(_paths_of_two_polls(o)):
        assert "/topics" not in paths and "/lookup" not in paths, paths


def test_a_killed_nsqd_is_named_by_every_view(original: Original) -> None:
    o = original
    dead = o.victim.http_address
    only_dead = _on_victim_alone(o, "onlydead")
    try:
        remembered = asyncio.run(_across(o, only_dead, lambda: process.kill_hard(o.victim)))
        _assert_dashboard_keeps(remembered, only_dead, dead)
        # the one the dashboard saw on the nsqd before it died is out of reach: a critical
        # finding naming it; the topic created on nsqlookupd alone is only a guess
        judged = evaluate([remembered], RuleSet.parse(["not-seen"], defaults=False))
        unseen = {f.topic: (f.status, f.message) for f in judged if f.status != "ok"}
        assert unseen.pop(only_dead)[0] == "crit"
        assert unseen.pop(o.left) == ("warn", _guessed(o.left, dead))
        said = f"1 of 2 nsqd not answering ({dead}: "
        info = json.loads(cells.ok("lookup", o.topic, "--json", *o.everywhere).stdout)
        assert info["complete"] is False and any(said in w for w in info["warnings"])
        assert [n["http"] for n in info["nsqds"]] == [o.survivor.http_address]  # lookupd forgot it
        assert info["channels"] == ["c"]
        topics = cells.ok("topic", "list", "--json", *o.everywhere)
        listing = json.loads(topics.stdout)
        assert o.topic in listing["topics"] and listing["complete"] is False
        assert any(said in w for w in listing["warnings"]) and said in topics.stderr
        channels = cells.ok("channel", "list", o.topic, *o.everywhere)
        assert channels.stdout.splitlines() == ["c"] and said in channels.stderr
        nodes = json.loads(cells.ok("node", "list", "--json", *o.everywhere).stdout)["nodes"]
        listed = {n["http"]: (n["state"], n["registered"]) for n in nodes}
        assert listed.pop(dead) == ("down", False)
        # "slow" is up too: a loaded machine can take the survivor's /stats past a second
        assert listed in ({o.survivor.http_address: (s, True)} for s in ("up", "slow")), listed
        record = cells.one_record("stat", o.topic, "--json", "-n", "1", *o.everywhere)
        assert record["complete"] is False and any(said in w for w in record["warnings"])
        assert {n["address"]: n["state"] for n in record["nodes"]}[dead] == "down"
        assert f"nsqd {dead} down" in cells.ok("stat", o.topic, "-n", "1", *o.everywhere).stderr
        # a first poll has no memory, and nsqlookupd dropped the dead nsqd's producers: the
        # topic it held reads as the one created on nsqlookupd alone (listed with no
        # producer), so both are kept, on the nsqd down or left behind: the guess it is
        guess = f"NOT SEEN ({_guessed_where(dead)})"
        stat = cells.ok("stat", "-n", "1", *o.everywhere)
        lines = stat.stdout.splitlines()
        [topic_line] = [ln for ln in lines if ln.split()[1:2] == [only_dead]]
        [channel_line] = [ln for ln in lines if ln.split()[1:2] == [f"{only_dead}/oc"]]
        [left_line] = [ln for ln in lines if ln.split()[1:2] == [o.left]]
        for line in (topic_line, channel_line, left_line):
            assert line.split()[2:10] == ["?"] * 7 + ["-"] and line.endswith(guess), line
        assert f"nsqd {dead} down" in stat.stderr, stat.stderr
        record = cells.one_record("stat", only_dead, "--json", "-n", "1", *o.everywhere)
        assert [
            (r["what"], r["not_seen"], r["held_by"], r["unregistered"], r["depth"])
            for r in record["rows"]
        ] == [
            (only_dead, True, [dead], True, None),
            (f"{only_dead}/oc", True, [dead], True, None),
        ]
        said_topic = f"topic {only_dead}: not seen this poll: {_guessed_where(dead)}: "
        assert any(w.startswith(said_topic) for w in record["warnings"]), record["warnings"]
        # degraded, a poll asks nsqlookupd's /topics once, and /lookup once per unseen topic
        # (only the first poll: its answer, even "nobody", is kept while the topic stays
        # unseen)
        first, second = asyncio.run(_paths_of_two_polls(o))
        assert first.count("/topics") == second.count("/topics") == 1, (first, second)
        assert first.count("/lookup") >= 1 and second.count("/lookup") == 0, (first, second)
        top = cells.one_record("top", "--json", "-i", "0.1", *o.everywhere)
        said_left = f"topic {o.left}: not seen this poll: {_guessed_where(dead)}: "
        assert any(w.startswith(said_left) for w in top["warnings"]), top["warnings"]
        assert top["complete"] is False
        # top lists the nodes that are not up; on a loaded machine the survivor's /stats can
        # take over a second, which is "slow" (listed, never "down")
        states = {n["address"]: n["state"] for n in top["nodes"]}
        assert states.pop(dead) == "down" and set(states.values()) <= {"slow"}, top["nodes"]
        check = cells.check(2, *o.everywhere)
        [down] = [f for f in cells.findings(check, "node-down") if f["node"] == dead]
        assert down["status"] == "crit"
        # the dead nsqd's topic and the registration left behind read the same, the honest
        # answer: each a warning saying both things it may be, never an outage of its own
        # (node-down off); the topic the survivor holds is none
        [found] = [f for f in cells.findings(check, "not-seen") if f["topic"] == only_dead]
        assert (found["status"], found["message"]) == ("warn", _guessed(only_dead, dead))
        assert o.topic not in [f["topic"] for f in cells.findings(check, "not-seen")]
        alone = invoke("check", "-n", "1", *QUIETER, *o.everywhere)
        assert alone.exit_code == 1, alone.output
        said = alone.stdout.splitlines()
        for topic in (only_dead, o.left):
            assert f"WARNING: not-seen {topic}: {_guessed(topic, dead)}" in said, alone.output
        view = asyncio.run(cells.view_of(o.c.lookupd_http, o.c.nsqd_http))
        _assert_left_is_a_guess(o, view, check, dead)
        # the fix the warning names: given the nsqlookupd alone (which forgot the dead
        # nsqd), a delete unregisters the topic there and touches no nsqd; given the dead
        # nsqd too, it refuses (that nsqd might hold it)
        planned = run_main("topic", "delete", o.left, "--dry-run", *o.where)
        assert planned.returncode == 0, planned.stderr
        assert f"unregister topic {o.left} on lookupd" in planned.stdout, planned.stdout
        assert "nsqd" not in planned.stdout.split(" would lose:")[0], planned.stdout
        refused = run_main("topic", "delete", o.left, "--dry-run", *o.everywhere)
        assert refused.returncode == 1 and "refused, nothing was changed" in refused.stderr
        [row] = [cells for key, cells in rows.node_rows(view) if key == dead]
        assert str(row[2]) == "down"
        assert "1/2 nsqd up" in rows.summary_line(view).plain
        scraped = cells.scrape(view)
        assert scraped[("nsq_node_up", frozenset({("node", dead)}))] == 0.0
        assert scraped[("nsq_node_up", frozenset({("node", o.survivor.http_address)}))] == 1.0
    finally:  # the next test needs both nsqds, whatever this one found
        o.c.restart(o.victim)
        eventually(lambda: _registered(o) == set(o.c.nsqd_http), 30, "the nsqd to register again")


async def test_a_hung_nsqd_is_named_by_every_view_in_bounded_time(original: Original) -> None:
    o = original
    hung = o.victim.http_address
    only_hung = await asyncio.to_thread(_on_victim_alone, o, "onlyhung")
    async with stopped(o.victim):
        start = time.monotonic()
        looked = await asyncio.to_thread(cells.ok, "lookup", o.topic, "--json", *o.everywhere)
        listed = await asyncio.to_thread(cells.ok, "topic", "list", *o.everywhere)
        nodes = await asyncio.to_thread(cells.ok, "node", "list", "--json", *o.everywhere)
        check = await asyncio.to_thread(cells.check, 2, *o.everywhere)
        # a first poll: the hung nsqd is still registered, so nsqlookupd names it
        view = await cells.view_of(o.c.lookupd_http, o.c.nsqd_http)
        took = time.monotonic() - start
        stat = await asyncio.to_thread(cells.ok, "stat", "-n", "1", *o.everywhere)
    assert took < 2 * cells.BOUND, took
    info = json.loads(looked.stdout)
    # the lookupd still lists the hung nsqd (its connection is open): the nsqds' poll tells
    assert {n["http"]: n["answering"] for n in info["nsqds"]}[hung] is False
    assert any(NOT_ANSWERING in w and hung in w for w in info["warnings"])
    [warning] = [line for line in listed.stderr.splitlines() if "nsqd not answering" in line]
    assert hung in warning and warning.endswith("this list may be incomplete")
    states = {n["http"]: (n["state"], n["registered"]) for n in json.loads(nodes.stdout)["nodes"]}
    assert states[hung] == (NOT_ANSWERING, True)
    [down] = [f for f in cells.findings(check, "node-down") if f["node"] == hung]
    assert down["status"] == "crit" and NOT_ANSWERING in down["message"]
    # the topic nobody can reach is a finding of its own, critical like a partition with
    # no live copy, naming its nsqd (nsqlookupd names it as the producer); the topic
    # created on nsqlookupd alone, which it lists with no producer, only a guess
    unreached = (
        f"no nsqd that answered holds it (nsqd {hung} down): nobody can read it, or "
        f"publish to it where it lives, until one answers again; fix: bring nsqd {hung} back"
    )
    [unseen] = [f for f in cells.findings(check, "not-seen") if f["topic"] == only_hung]
    assert (unseen["status"], unseen["message"]) == ("crit", unreached)
    _assert_left_is_a_guess(o, view, check, hung)
    kept = f"NOT SEEN (nsqd {hung} down)"
    lines = stat.stdout.splitlines()
    [topic_line] = [ln for ln in lines if ln.split()[1:2] == [only_hung]]
    [channel_line] = [ln for ln in lines if ln.split()[1:2] == [f"{only_hung}/oc"]]
    for line in (topic_line, channel_line):
        assert line.split()[2:10] == ["?"] * 7 + ["-"] and line.endswith(kept), line
    [left_line] = [ln for ln in lines if ln.split()[1:2] == [o.left]]
    assert left_line.endswith(f"NOT SEEN ({_guessed_where(hung)})"), left_line
    [row] = [cells for key, cells in rows.node_rows(view) if key == hung]
    assert NOT_ANSWERING in str(row[-1])
    assert cells.scrape(view)[("nsq_node_up", frozenset({("node", hung)}))] == 0.0
    _assert_dashboard_keeps(view, only_hung, hung)


def test_lookupd_down_every_view_says_so_and_lists_from_the_nsqds(original: Original) -> None:
    o = original
    [lookupd] = o.c.lookupds
    process.kill_hard(lookupd)  # the last state: nothing needs it back
    view = cells.assert_lookupd_down(lookupd.http_address, o.c.nsqd_http, o.topic, "c")
    _assert_borrow_reads_the_nsqds(o, lookupd.http_address)
    assert view.topic(o.topic) is not None and not view.is_redesign
    # the topics only nsqlookupd lists could not be judged: alone (node-down off) that is
    # UNKNOWN, exit 3, never an OK line over the topics the nsqds showed
    alone = invoke("check", "-n", "1", *QUIETER, *o.everywhere)
    assert alone.exit_code == 3, alone.output
    [line] = alone.stdout.splitlines()
    said = (
        f"UNKNOWN: not-seen cluster: not judged: no nsqlookupd answered ({lookupd.http_address}: "
    )
    assert line.startswith(said), line
    assert "listed only by nsqlookupd" in line, line


def _waiting_on_survivor(o: Original) -> int:
    ch = read_nsqd_stats(o.survivor.http_address, topic=o.topic, channel="c").channel(o.topic, "c")
    return -1 if ch is None or ch.in_flight_count else ch.depth


def _assert_borrow_reads_the_nsqds(o: Original, lookupd: str) -> None:
    """peek --borrow with every nsqlookupd down: from the nsqds given by both addresses,
    saying they alone were asked; without their TCP addresses, a one-line error naming
    the way round. Peeking in place stays refused as the original family's."""
    cells.ok("pub", o.topic, "a", "b", "--nsqd", o.survivor.tcp_address)
    cells.ok("channel", "create", o.topic, "c", "--nsqd-http", o.survivor.http_address)
    eventually(lambda: _waiting_on_survivor(o) == 2, 30, "2 messages waiting in c")
    where = ["--lookupd", lookupd, "--format", "json"]
    nsqds = [a for n in o.c.nsqds for a in ("--nsqd", n.tcp_address, "--nsqd-http", n.http_address)]
    lent = run_main("peek", o.topic, "c", "--borrow", "5", *where, *nsqds)
    assert lent.returncode == 0, lent.stderr
    assert sorted(json.loads(line)["body"] for line in lent.stdout.splitlines()) == ["a", "b"]
    said = f"nsqlookupd {lookupd} not answering: only the nsqds were asked"
    [warning] = [line for line in lent.stderr.splitlines() if said in line]
    assert warning.endswith("the messages borrowed may be incomplete"), warning
    eventually(lambda: _waiting_on_survivor(o) == 2, 30, "the borrowed messages back")
    http_only = [*where, *(a for n in o.c.nsqd_http for a in ("--nsqd-http", n))]
    line = assert_one_line_error(run_main("peek", o.topic, "c", "--borrow", "5", *http_only), 1)
    assert lookupd in line, line
    assert line.endswith("--nsqd with --nsqd-http borrows from the nsqds without it"), line
    line = assert_one_line_error(run_main("peek", o.topic, "c", *http_only), 2)
    assert "the original nsqd has no API to read a message without consuming it" in line
