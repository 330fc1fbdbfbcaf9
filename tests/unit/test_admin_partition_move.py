"""``topic move`` of a leader against scripted loopback servers playing youzan's
nsqlookupd elections (tests/helpers/scripted_lookupd.py: a real cluster cannot be made
to elect a chosen copy, refuse a move, or keep naming an old leader at will).

youzan v0.3.7-HA.1.12.7 (consistence/data_placement_mgr.go tryMoveTopicPartition →
nsqlookup_coordinator.go handleRemoveTopicNodeOrMoveLeader → handleTopicLeaderElection →
chooseNewLeaderFromISR) does not elect ``move_to`` when it already holds an in-sync copy:
it elects, among the ISR without the leader, the copy with the least leader load factor.
The fake does the same, so these tests pin what the move does when youzan elects another
copy: move leadership on from there, and fail (not warn) when the elections go round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from nsqctl import admin
from tests.helpers.scripted_lookupd import Reply, Request, ScriptedLookupds
from tests.helpers.youzan_fake import lookupd_leader, redesign_peer

NOT_FOUND = Reply(status=404, body={"message": "NOT_FOUND"})


@dataclass
class Youzan:
    """Topic ``t``: 1 partition, replicas 3 on nsqd 1-3, led by ``leader``."""

    loads: dict[int, float]
    leader: int = 1
    isr: list[int] = field(default_factory=lambda: [1, 2, 3])
    elect: bool = True  # False: accept a move and do nothing
    moves: list[tuple[int, int]] = field(default_factory=list)  # (from, to) accepted
    previous: int | None = None  # the leader before the last election
    stale_reads: int = 0  # plain lookups that still list ``previous``
    settling: int = 0  # moves refused first as youzan does while an ISR change settles
    refusal: str = "ErrType:4 ErrCode:10 : leaving isr need wait."  # CoordElectionTmpErr
    # Who wins each tie in turn: youzan keeps the first least load factor of a Go map's
    # (random) iteration; empty: the first in the ISR's order.
    tie_winners: list[int] = field(default_factory=list)
    lookupd: str = ""  # the servers' addresses, once started
    nsqds: list[str] = field(default_factory=list)

    def http(self, n: int) -> str:
        return self.nsqds[n - 1]

    def node_id(self, n: int) -> str:
        return f"127.0.0.1:4250:{4150 + n}:{n}"

    def peer(self, n: int) -> dict[str, Any]:
        return redesign_peer(n, self.http(n))

    def move(self, request: Request) -> Reply:
        params = request.params
        src = int(params["move_from"].rsplit(":", 1)[1])
        dst = int(params["move_to"].rsplit(":", 1)[1])
        if src != self.leader:
            return Reply(status=400, body={"message": "move from not the topic leader"})
        if self.settling > 0:
            self.settling -= 1
            return Reply(status=400, body={"message": self.refusal})
        self.moves.append((src, dst))
        if self.elect:  # chooseNewLeaderByLeastLoadFactor over the ISR but the leader
            candidates = [n for n in self.isr if n != self.leader]
            least = min(self.loads[n] for n in candidates)
            tied = [n for n in candidates if self.loads[n] == least]
            new = self.tie_winners.pop(0) if len(tied) > 1 and self.tie_winners else tied[0]
            assert new in tied
            self.isr = [n for n in self.isr if n != self.leader] + [self.leader]
            self.previous, self.leader = self.leader, new
            self.stale_reads = 3
        return Reply(body=None)

    def handle(self, request: Request) -> Reply:
        path = request.path
        if request.address == self.lookupd:
            return self.answer_lookupd(request, path)
        n = self.nsqds.index(request.address) + 1
        if path == "/config/rpc_port":
            return Reply(body="4250")
        if path == "/config/id":
            return Reply(body=str(n))
        if path == "/coordinator/stats" and n == self.leader:
            stat = {
                "name": "t",
                "partition": 0,
                "isr_stats": [{"node_id": self.node_id(i)} for i in self.isr],
                "catchup_stats": None,
            }
            return Reply(body={"topic_coord_stats": [stat]})
        return NOT_FOUND

    def answer_lookupd(self, request: Request, path: str) -> Reply:
        if path == "/listlookup":
            leader = lookupd_leader(self.lookupd)
            return Reply(body={"lookupdnodes": [leader], "lookupdleader": leader})
        if path == "/nodes":
            return Reply(body={"producers": [self.peer(1), self.peer(2), self.peer(3)]})
        if path == "/topics":  # a move first asks whether any partition has no live copy
            return Reply(body={"topics": ["t"]})
        if path == "/lookup":
            # without consistent, any nsqd still registered for the partition may be listed:
            # right after an election, the previous leader (youzan's genarateProducerList...)
            # (for the next ``stale_reads`` such lookups; then it unregisters)
            stale = "consistent" not in request.params and self.previous is not None
            if stale and self.stale_reads > 0:
                self.stale_reads -= 1
            else:
                stale = False
            listed = self.previous if stale and self.previous is not None else self.leader
            meta = {
                "partition_num": 1,
                "replica": 3,
                "extend_support": False,
                "ordered": False,
                "multi_part": False,
                "disable_channel_auto_create": False,
            }
            return Reply(
                body={
                    "channels": ["c"],
                    "producers": [self.peer(n) for n in self.isr],
                    "partitions": {"0": self.peer(listed)},
                    "meta": meta,
                },
            )
        if path == "/topic/partition/move":
            return self.move(request)
        if path == "/topic/meta/update":
            return Reply(body=None)
        if path == "/cluster/stats":
            stats = [
                {
                    "broadcast_address": "127.0.0.1",
                    "http_port": int(self.http(n).rsplit(":", 1)[1]),
                    "hostname": f"n{n}",
                    "leader_load_factor": lf,
                    "node_load_factor": lf,
                }
                for n, lf in self.loads.items()
            ]
            return Reply(body={"stable": True, "node_stat_list": stats})
        return NOT_FOUND

    async def move_partition(
        self, to: int, wait: float = 10.0, progress: Callable[[str], None] | None = None
    ) -> admin.AdminReport:
        """``move_partition`` of ``t`` partition 0 to nsqd ``to``, the cluster served on
        loopback while it runs."""
        async with ScriptedLookupds(self.handle) as servers:
            self.lookupd, *self.nsqds = await servers.start(4)
            return await admin.move_partition(
                [self.lookupd], "t", 0, self.http(to), wait=wait, progress=progress
            )


async def _move(fake: Youzan, to: int, wait: float = 10.0) -> admin.AdminReport:
    return await fake.move_partition(to, wait)


async def test_target_youzan_elects_is_one_move() -> None:
    fake = Youzan(loads={1: 0.9, 2: 0.8, 3: 0.85})
    report = await _move(fake, to=2)
    assert report.ok, report.results
    assert fake.moves == [(1, 2)] and fake.leader == 2
    assert report.notes[-1].startswith(f"partition 0: leader {fake.http(2)}")


async def test_a_temporary_refusal_is_sent_again_until_it_settles() -> None:
    """youzan refuses a move while an earlier ISR change settles ("leaving isr need wait",
    a temporary coordinator error): nothing happened, so the move is sent again."""
    fake = Youzan(loads={1: 0.9, 2: 0.8, 3: 0.85}, settling=2)
    said: list[str] = []
    report = await fake.move_partition(2, progress=said.append)
    assert report.ok, report.results
    assert fake.settling == 0 and fake.moves == [(1, 2)] and fake.leader == 2
    assert sum("leaving isr need wait" in line for line in said) == 1, said


async def test_a_refusal_that_is_not_temporary_is_sent_once() -> None:
    fake = Youzan(loads={1: 0.9, 2: 0.8, 3: 0.85}, settling=2)
    fake.refusal = "ErrType:5 ErrCode:0 : invalid coordinator state"  # CoordClusterErr
    report = await _move(fake, to=2)
    assert not report.ok and fake.settling == 1 and fake.moves == []
    assert "invalid coordinator state" in report.results[0].error


async def test_another_elected_copy_hands_leadership_on_to_the_target() -> None:
    """2 is elected first (least loaded); from 2 youzan picks 3 over 1: two moves."""
    fake = Youzan(loads={1: 0.9, 2: 0.8, 3: 0.85})
    report = await _move(fake, to=3)
    assert report.ok, report.results
    assert fake.moves == [(1, 3), (2, 3)] and fake.leader == 3
    assert [r.outcome for r in report.results] == ["ok", "ok"]
    assert f"nsqlookupd elected {fake.http(2)}; moved leadership on" in report.notes


async def test_a_target_youzan_never_elects_fails_once_the_elections_go_round() -> None:
    """3 is the most loaded: 1 → 2 → 1. Two elections, then a failure naming them and
    the load factors; the leader is back where it was."""
    fake = Youzan(loads={1: 0.8, 2: 0.8016, 3: 0.8024})
    report = await _move(fake, to=3)
    assert fake.moves == [(1, 3), (2, 3)] and fake.leader == 1
    assert not report.ok and [r.outcome for r in report.results] == ["ok", "failed"]
    error = report.results[-1].error
    assert f"nsqlookupd elected {fake.http(2)} then {fake.http(1)}, not {fake.http(3)}" in error
    assert f"{fake.http(1)} 0.8000, {fake.http(2)} 0.8016, {fake.http(3)} 0.8024" in error
    assert f"t partition 0 is led by {fake.http(1)}" in error
    with pytest.raises(admin.AdminError, match="topic move failed on 1 of 2") as err:
        report.raise_for_failures()
    assert "\n" not in str(err.value)  # one line for the CLI


async def test_a_tie_in_load_factor_is_moved_on_until_the_target_wins_it() -> None:
    """All three weigh the same (seen in CI): 2 wins the first tie, 1 the second (back
    where it started), the target the third. A tie is a coin toss, not a going round."""
    fake = Youzan(loads={1: 0.8, 2: 0.8, 3: 0.8}, tie_winners=[2, 1, 3])
    said: list[str] = []
    report = await fake.move_partition(3, progress=said.append)
    assert report.ok, report.results
    assert fake.moves == [(1, 3), (2, 3), (1, 3)] and fake.leader == 3
    assert any(f"{fake.http(3)} ties with it in leader load factor" in line for line in said), said


async def test_ties_the_target_keeps_losing_fail_after_a_bounded_number_of_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admin.partitions.apply, "POLL", 0.02)  # eight moves' second looks
    fake = Youzan(loads={1: 0.8, 2: 0.8, 3: 0.8}, tie_winners=[2, 1] * 20)
    report = await _move(fake, to=3)
    assert fake.leader in (1, 2) and not report.ok
    assert len(fake.moves) == admin.partitions.apply.MAX_LEADER_MOVES
    assert f"not {fake.http(3)}: youzan makes the in-sync copy" in report.results[-1].error


async def test_a_move_accepted_without_effect_fails_not_warns() -> None:
    fake = Youzan(loads={1: 0.9, 2: 0.8, 3: 0.85}, elect=False)
    report = await _move(fake, to=2, wait=1.0)
    assert fake.moves == [(1, 2)] and fake.leader == 1
    assert not report.ok and not report.warnings
    assert "the move was accepted but t partition 0 did not settle in time" in (
        report.results[-1].error
    )
    assert report.to_json()["ok"] is False


async def test_a_moved_leader_that_gets_no_writes_fails() -> None:
    """The consistent lookup shows the target leading, but the lookup clients use for
    writing keeps naming the old leader: not done for producers, a failure."""
    fake = Youzan(loads={1: 0.9, 2: 0.8, 3: 0.85})
    fake.stale_reads = 10**9

    def elect_and_stay_stale(request: Request) -> Reply:
        response = Youzan.move(fake, request)
        fake.stale_reads = 10**9
        return response

    fake.move = elect_and_stay_stale  # type: ignore[method-assign]
    report = await _move(fake, to=2, wait=1.5)
    assert fake.leader == 2 and not report.ok
    assert f"{fake.http(2)} leads t partition 0, but nsqlookupd does not send writes to it" in (
        report.results[-1].error
    )


async def test_writes_routed_a_moment_after_the_election_are_waited_for() -> None:
    fake = Youzan(loads={1: 0.9, 2: 0.8, 3: 0.85})
    report = await _move(fake, to=2)
    assert report.ok, report.results
    assert fake.stale_reads == 0  # the stale plain lookups were read through, then done
