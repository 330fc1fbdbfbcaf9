"""Drain an nsqd before stopping it, and undo the drain: :func:`plan_drain`,
:func:`run_drain`, :func:`restore_node` (``nsqctl node drain|restore``).

Original family: tombstone the node's producer of each of its topics on every nsqlookupd,
so publishers and new consumers stop finding it, keep the tombstones fresh, and watch what
the node still holds until it is empty and no lookupd lists it (:mod:`.original`).
Consumers already connected take what is left: go-nsq and nsqctl's own ``Consumer`` keep
their connection to an nsqd that left ``/lookup``. A channel without a consumer never
empties; the progress names it.

Redesign: move every partition leader off the node (:mod:`.redesign`, through the
partition move) and wait until no partition depends on it: led by it, or with it as the
only in-sync copy. Leaders the coordinator puts back on the node meanwhile are moved again.
Safe to stop also means every partition with an in-sync copy on the node keeps enough
in-sync copies on nsqds that are up to take writes without it (:mod:`.safety`).
That is checked before anything moves, and again when the node looks drained: a partition
short of copies (or a leader no nsqd can take) refuses the drain at once, naming it, in
the dry run and the real run alike; waiting for ``timeout`` would not change it.

Both record the drain in the state directory (:mod:`.records`) so that the dashboard
can show it and ``restore`` can undo it: on the original, stop re-tombstoning and have the
nsqd register afresh; on the redesign, move back the leaders the drain moved.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from nsqctl.addresses import parse_address
from nsqctl.admin.drain.defaults import DEFAULT_INTERVAL, DEFAULT_TIMEOUT
from nsqctl.admin.drain.moves import LeaderMove
from nsqctl.admin.drain.original import (
    find_peer,
    listed_topics,
    node_lookupds,
    tombstone,
    tombstone_request,
)
from nsqctl.admin.drain.progress import DrainProgress, NodeLoad, estimate, node_load
from nsqctl.admin.drain.records import (
    DrainRecord,
    MovedLeader,
    drains_path,
    read_drains,
    running_elsewhere,
    update_drain,
)
from nsqctl.admin.drain.redesign import (
    move_leader,
    plan_leader_moves,
    read_topic_states,
    with_leaderless,
)
from nsqctl.admin.drain.restore import RestoreResult, restore_node
from nsqctl.admin.drain.safety import Blocker, KeptCopy, StopPlan, readable, stop_plan
from nsqctl.admin.leader import find_leader
from nsqctl.admin.partitions import NsqdNode, leader_load_factors, registered_nsqds
from nsqctl.admin.partitions.stalled import dead_partitions
from nsqctl.admin.requests import AdminReport, admin_client, unanswered
from nsqctl.errors import AdminError, ConfigError, NotFoundError, NsqctlError
from nsqctl.paths import unusable_directory
from nsqctl.stats.poller import StatsPoller
from nsqctl.stats.view import ClusterView, build_view

__all__ = [
    "DrainPlan",
    "DrainProgress",
    "DrainResult",
    "RestoreResult",
    "plan_drain",
    "refusal",
    "restore_node",
    "run_drain",
]

Family = Literal["original", "redesign"]
Outcome = Literal["drained", "timeout", "restored", "blocked", "interrupted"]
Say = Callable[[str], None]

RETOMBSTONE_EVERY = 20.0
"""Seconds between tombstones of a topic: well inside nsqlookupd's default
``--tombstone-lifetime`` (45 s), which it does not report."""
RECORD_EVERY = 2.0
"""Seconds between two progress writes to the state file (a dashboard reads it)."""
MAX_MOVES_PER_PARTITION = 3
"""A leader the coordinator keeps putting back is moved at most this often, then reported."""


@dataclass(frozen=True)
class DrainPlan:
    """What a drain will do; ``steps()`` is what ``--dry-run`` prints."""

    node: str  # the nsqd's HTTP address
    family: Family
    lookupd: tuple[str, ...]
    topics: tuple[str, ...]
    producer: str = ""  # original: BROADCAST:HTTP_PORT, how nsqlookupd names the nsqd
    moves: tuple[LeaderMove, ...] = ()
    blocked: tuple[Blocker, ...] = ()
    """Redesign: partitions that keep the node from being drained now; a drain with any
    refuses at once (nothing is moved)."""
    load: NodeLoad | None = None
    kept: tuple[KeptCopy, ...] = ()
    """Redesign: the node's follower copies that stay on it (their partitions keep enough
    in-sync copies without it)."""

    def steps(self) -> list[str]:
        if self.family == "original":
            return [
                f"nsqlookupd {lk}: {tombstone_request(lk, t, self.producer).describe()}"
                for lk in self.lookupd
                for t in self.topics
            ]
        return [m.describe() for m in self.moves]

    def preview(self) -> list[str]:
        """The plan in words, as ``--dry-run`` and the dashboard's confirmation show it:
        what is on the node now, then each step (indented)."""
        remaining = self.load.remaining if self.load else 0
        steps = self.steps() or self._nothing_to_send()
        return [
            f"drain {self.node} ({self.family}): {remaining} messages on it now",
            *(f"  {step}" for step in steps),
        ]

    def _nothing_to_send(self) -> list[str]:
        """Why the plan sends nothing, as it is for this node: a redesign node may hold
        follower copies, which stay, and the operator should see what stopping it does
        to their ISR."""
        if self.family == "original":
            return ["(nothing to send: the node holds no topic)"]
        if self.blocked:
            return ["(nothing to send: the drain is refused, for the partitions below)"]
        if not self.kept:
            return ["(nothing to send: the node leads no partition and is in no ISR)"]
        return [
            "(nothing to send: the node leads no partition, so no leader moves; each "
            "partition it holds a follower copy of stays writable without it, so its "
            "copies stay on it)",
            *(f"  {k.describe()}" for k in self.kept),
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "family": self.family,
            "lookupd": list(self.lookupd),
            "topics": list(self.topics),
            "steps": self.steps(),
            "moves": [
                {
                    "topic": m.topic,
                    "partition": m.partition,
                    "from": m.source,
                    "to": m.target,
                    "copy": m.copy,
                }
                for m in self.moves
            ],
            "blocked": [b.describe() for b in self.blocked],
            "kept": [
                {
                    "topic": k.topic,
                    "partition": k.partition,
                    "isr": k.isr,
                    "in_sync_left": k.left,
                    "need": k.need,
                }
                for k in self.kept
            ],
            "remaining": self.load.remaining if self.load else None,
        }


@dataclass
class DrainResult:
    plan: DrainPlan
    outcome: Outcome
    progress: DrainProgress
    moved: list[MovedLeader] = field(default_factory=list)
    move_errors: list[str] = field(default_factory=list)
    blocked: list[Blocker] = field(default_factory=list)  # outcome "blocked": why

    @property
    def ok(self) -> bool:
        return self.outcome == "drained"

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.plan.node,
            "family": self.plan.family,
            "outcome": self.outcome,
            "ok": self.ok,
            "progress": self.progress.to_json(),
            "left": [] if self.ok else self.progress.left(),
            "moved": [
                {
                    "topic": m.topic,
                    "partition": m.partition,
                    "from": m.source,
                    "to": m.target,
                    "copy": m.copy,
                }
                for m in self.moved
            ],
            "move_errors": self.move_errors,
            "blocked": [b.describe() for b in self.blocked],
            "plan": self.plan.to_json(),
        }


def refusal(node: str, blocked: Sequence[Blocker], moved: bool = False) -> str:
    """Why a drain of ``node`` is refused (``blocked``: the partitions, each said by
    :meth:`Blocker.describe`), for every front end; ``moved``: it moved leaders first."""
    undo = f"; `node_restore({node})` moves back the leaders moved" if moved else ""
    return (
        f"{node} cannot be drained now: {len(blocked)} partition(s) above would stop taking "
        f"writes, cannot be moved off it or keep any leader from being moved{undo}; do not "
        "stop it"
    )


# ------------------------------------------------------------------ planning


async def _view(poller: StatsPoller) -> ClusterView:
    return build_view(await poller.snapshot())


def _answering(view: ClusterView, node: str) -> None:
    """Refuse to plan a drain of an nsqd whose ``/stats`` did not answer (hung, or gone
    since the lookup): what it holds is unknown, so "nothing to move" would be a guess,
    and a drain waits for messages it could never count."""
    found = next((n for n in view.nodes if n.address == node), None)
    if found is None or found.stats.state == "down":
        why = found.stats.error if found is not None and found.stats.error else "no answer"
        raise _silent(node, why)


def _silent(node: str, why: str) -> AdminError:
    """Why a drain of the nsqd ``node``, which does not answer, is refused."""
    return AdminError(
        f"nsqd {node} does not answer ({why}): a drain cannot tell what it holds or when "
        "it is empty, nothing was changed; run it again once it answers"
    )


async def _unregistered(client: Any, node: str, lookupds: str, known: str) -> NsqctlError:
    """Why ``node``, which no nsqlookupd lists, cannot be drained. An nsqd that died is
    dropped from the lookup at once (its registration connection closes), so "not
    registered" alone would send the operator looking for a typo: when nothing answers
    at the address, say the nsqd is down, that a drain needs it live, and what to do."""
    if await unanswered(client, node, timeout=PROBE_TIMEOUT, any_answer=True) is None:
        return NotFoundError(
            f"{node} is not an nsqd registered with nsqlookupd {lookupds} ({known})"
        )
    return AdminError(
        f"nsqd {node} does not answer and nsqlookupd {lookupds} does not list it: it is "
        "down (or the address is wrong); a drain moves traffic off a live nsqd, so nothing "
        "was changed: start it again, then drain it (what only it holds stays on its disk "
        "until it runs; `check()` names partitions it left without a leader or in-sync copies)"
    )


#: Seconds a drain waits for an nsqd no nsqlookupd lists to answer before calling it
#: down: a hung one (stopped, or its host gone) would otherwise hold the refusal for the
#: whole admin timeout.
PROBE_TIMEOUT = 3.0


def _poller(family: Family, lookupd: Sequence[str], node: str) -> StatsPoller:
    """Original: the node's own ``/stats`` is all a drain needs. Redesign: the whole
    cluster, with every topic's ISR (``focus=None``): "only in-sync copy" needs it."""
    if family == "original":
        return StatsPoller(nsqd_http=[node], focus=())
    return StatsPoller(lookupd_http=list(lookupd), nsqd_http=[node], focus=None)


def _draining_elsewhere(node: str, state_dir: Path | None) -> set[str]:
    return {n for n, r in read_drains(state_dir).items() if n != node and r.state == "draining"}


async def _check_every_lookupd(client: Any, node: str, lookupd: Sequence[str]) -> None:
    """Refuse a drain that would leave an nsqlookupd listing the node: publishers asking
    that one would keep sending to it. nsqd tells how many it registers with (their TCP
    addresses, which cannot be matched to the HTTP ones given: the count is compared)."""
    try:
        registered = await node_lookupds(client, node)
    except NsqctlError:
        return  # an nsqd that does not tell: the drain's own checks still hold for these
    if len(registered) > len(lookupd):
        raise ConfigError(
            f"nsqd {node} registers with {len(registered)} nsqlookupds "
            f"({', '.join(registered)}) but {len(lookupd)} HTTP address(es) were given: give "
            "every nsqlookupd, or the others keep sending traffic to the node",
            setting="lookupd_http",
        )


def _topics_on(view: ClusterView, node: str) -> list[str]:
    """Redesign topics with a copy on ``node``: held there, or in sync there by the ISR."""
    return [
        t.name
        for t in view.topics
        if node in t.nodes or any(node in (p.isr or ()) for p in t.partitions)
    ]


async def _stop_plan(
    client: Any,
    leader: str,
    nodes: dict[str, NsqdNode],
    view: ClusterView,
    node: str,
    avoid: Collection[str],
) -> StopPlan:
    """For the partitions that would stop taking writes if ``node`` stopped now, the copy
    moves that prevent it and why the others cannot be (:mod:`.safety`), from the
    lookup's records; a topic that could not be read blocks. And the node's follower
    copies that need nothing."""
    states, unread = await read_topic_states(client, leader, _topics_on(view, node), nodes)
    loads = await leader_load_factors(client, leader)
    states = with_leaderless(states, view, node)
    plan = stop_plan(states, node, nodes, loads, avoid)
    return replace(plan, blocked=unread + plan.blocked)


def _same_move(copy: LeaderMove, moves: Sequence[LeaderMove]) -> bool:
    """A leader move already takes the node's copy there (a partition with no other copy
    in sync: its leadership goes to a free nsqd, the same one the copy would go to)."""
    return any(
        (m.topic, m.partition, m.target) == (copy.topic, copy.partition, copy.target) for m in moves
    )


def _merge(first: Sequence[Blocker], more: Sequence[Blocker]) -> tuple[Blocker, ...]:
    """``first``, then those of ``more`` about another partition (one line each)."""
    seen = {(b.topic, b.partition) for b in first}
    return (*first, *(b for b in more if (b.topic, b.partition) not in seen))


async def plan_drain(
    lookupd_http: Sequence[str], node: str, *, state_dir: Path | None = None
) -> DrainPlan:
    """Find the nsqd ``node`` (HTTP or TCP address) and what a drain would do; changes
    nothing."""
    lookupd = tuple(lookupd_http)
    if not lookupd:
        raise ConfigError(
            "a drain works through nsqlookupd: give every nsqlookupd's HTTP address",
            setting="lookupd_http",
        )
    parse_address(node, example="127.0.0.1:4151")  # a typo is bad input, not "not registered"
    async with admin_client() as client:
        leader = await find_leader(client, lookupd)
        if leader is None:
            peer = await find_peer(client, lookupd, node)
            if peer is None:
                raise await _unregistered(
                    client,
                    node,
                    ", ".join(lookupd),
                    "name it by its HTTP or TCP address as `node_list()` shows it",
                )
            async with _poller("original", lookupd, peer.http_key) as poller:
                view = await _view(poller)
            _answering(view, peer.http_key)  # first: a hung nsqd is not asked twice
            await _check_every_lookupd(client, peer.http_key, lookupd)
            load = node_load(view, peer.http_key)
            topics = tuple(t.name for t in view.topics)
            return DrainPlan(peer.http_key, "original", lookupd, topics, peer.http_key, load=load)
        nodes = await registered_nsqds(client, leader)
        http = next((n.http for n in nodes.values() if node in (n.http, n.tcp)), None)
        if http is None and (silent := nodes.silent_http(node)) is not None:
            raise _silent(silent, "registered with nsqlookupd, but not answering its /config")
        if http is None:
            known = ", ".join(sorted(nodes)) or "none"
            raise await _unregistered(client, node, leader, f"registered: {known}")
        loads = await leader_load_factors(client, leader)
        async with _poller("redesign", lookupd, http) as poller:
            view = await _view(poller)
        _answering(view, http)
        avoid = _draining_elsewhere(http, state_dir)
        moves, blocked = plan_leader_moves(view, http, loads, avoid)
        stop = await _stop_plan(client, leader, nodes, view, http, avoid)
    topics = tuple(t.name for t in view.topics if http in t.nodes)
    every_move = (*moves, *(c for c in stop.moves if not _same_move(c, moves)))
    unmovable = await _unstable(leader, lookupd, view) if every_move else []
    return DrainPlan(
        http,
        "redesign",
        lookupd,
        topics,
        moves=every_move,
        blocked=_merge(_merge(unmovable, stop.blocked), blocked),
        load=node_load(view, http),
        kept=tuple(stop.kept),
    )


async def _unstable(leader: str, lookupd: Sequence[str], view: ClusterView) -> list[Blocker]:
    """The partitions, of any topic, that keep every partition move from being made: no
    leader and no live copy (:func:`~nsqctl.admin.partitions.stalled.dead_partitions`).
    youzan's nsqlookupd refuses each move as "the cluster is unstable" until one of their
    nsqds is back, so a drain that has leaders or copies to move is refused up front, its
    dry run alike, rather than finding out one refused move at a time. ``view``: the
    plan's own view of the whole cluster, not polled again."""
    dead = await dead_partitions(leader, list(lookupd), view)
    why = (
        "no leader and no live copy (every nsqd holding it is down or not answering): "
        "nsqlookupd moves no partition, of any topic, until one of its nsqds is back"
    )
    return [Blocker(topic, part, why) for topic, parts in dead.items() for part in parts]


# ------------------------------------------------------------------ running


@dataclass
class _Drain:
    plan: DrainPlan
    deadline: float
    state_dir: Path | None
    say: Say
    started: float = field(default_factory=time.monotonic)
    history: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    moved: list[MovedLeader] = field(default_factory=list)
    move_errors: list[str] = field(default_factory=list)
    attempts: dict[tuple[str, int, bool], int] = field(default_factory=dict)  # (t, p, copy)
    last_error: dict[tuple[str, int, bool], str] = field(default_factory=dict)
    blocked: list[Blocker] = field(default_factory=list)
    topics: set[str] = field(default_factory=set)
    last_tombstone: float = float("-inf")
    last_record: float = float("-inf")
    last: DrainProgress | None = None  # the progress at the last look

    def restored(self) -> bool:
        record = read_drains(self.state_dir).get(self.plan.node)
        return record is not None and record.state == "restored"

    def start(self) -> None:
        """Record the drain as running; refused while another process drains the node
        (two drains would move the same leaders and overwrite each other's record)."""
        plan, load = self.plan, self.plan.load

        def change(old: DrainRecord | None) -> DrainRecord:
            if old is not None and running_elsewhere(old):
                raise AdminError(
                    f"{plan.node} is being drained already, by process {old.pid}: wait for "
                    f"it to end, or stop it (`node_restore({plan.node})` undoes it)"
                )
            now = time.time()
            return DrainRecord(
                plan.node,
                plan.family,
                "draining",
                now,
                now,
                lookupd=plan.lookupd,
                topics=plan.topics,
                pid=os.getpid(),
                remaining=load.remaining if load else None,
            )

        try:
            update_drain(plan.node, change, self.state_dir)
        except OSError as err:  # before any change: a drain `restore` could not find
            where = drains_path(self.state_dir)
            raise ConfigError(
                f"cannot record the drain of {plan.node} in {where}: "
                f"{unusable_directory(err)}; nothing was changed. Make the state directory "
                "writable (NSQCTL_STATE_DIR names another)"
            ) from None

    def record(self, **changes: Any) -> None:
        def change(old: DrainRecord | None) -> DrainRecord:
            base = old or DrainRecord(
                self.plan.node, self.plan.family, "draining", time.time(), time.time()
            )
            return replace(base, **changes)

        update_drain(self.plan.node, change, self.state_dir)

    def finish(self, outcome: Outcome, progress: DrainProgress | None) -> None:
        """Record how the drain ended, unless a restore came in meanwhile (it wins: the
        node is back in service, whatever this drain saw last)."""
        left = [b.describe() for b in self.blocked] or (progress.left() if progress else [])
        detail = "; ".join(left) if outcome != "drained" else ""
        if outcome == "interrupted":
            elapsed = time.monotonic() - self.started
            detail = f"interrupted after {elapsed:.0f}s" + (f"; left: {detail}" if detail else "")

        def change(old: DrainRecord | None) -> DrainRecord | None:
            if old is not None and old.state == "restored":
                return old
            base = old or DrainRecord(
                self.plan.node, self.plan.family, "draining", time.time(), time.time()
            )
            return replace(
                base,
                state="drained" if outcome == "drained" else "stopped",
                detail=detail,
                remaining=progress.load.remaining if progress else None,
                eta=progress.eta if progress else None,
            )

        update_drain(self.plan.node, change, self.state_dir)

    async def tombstone_due(self, client: Any, listed: Sequence[str]) -> None:
        """Re-tombstone every topic when the period is up, and the listed ones at once."""
        plan, now = self.plan, time.monotonic()
        due = sorted(self.topics) if now - self.last_tombstone >= RETOMBSTONE_EVERY else listed
        if not due:
            return
        results = await tombstone(client, plan.lookupd, due, plan.producer)
        for r in results:
            if r.outcome != "ok":
                self.say(f"tombstone refused: {r.request.node}: {r.request.describe()}: {r.error}")
        if len(due) == len(self.topics):
            self.last_tombstone = now
        self.record(last_tombstone=time.time(), topics=tuple(sorted(self.topics)))

    async def move(self, view: ClusterView) -> None:
        """Move the leaders still on the node (each at most MAX_MOVES_PER_PARTITION times)."""
        plan = self.plan
        async with admin_client() as client:
            leader = await find_leader(client, plan.lookupd)
            loads = await leader_load_factors(client, leader) if leader else {}
        avoid = _draining_elsewhere(plan.node, self.state_dir)
        moves, _ = plan_leader_moves(view, plan.node, loads, avoid)
        await self.send(moves)

    async def send(self, moves: Sequence[LeaderMove]) -> None:
        """Send each move not yet tried MAX_MOVES_PER_PARTITION times, one at a time (youzan
        runs one partition move at once), recording where each copy went."""
        plan = self.plan
        for m in moves:
            if time.monotonic() >= self.deadline:
                return  # the drain's time is up: the loop reports what is left
            key = (m.topic, m.partition, m.copy)
            if self.attempts.get(key, 0) >= MAX_MOVES_PER_PARTITION or self.restored():
                continue
            self.attempts[key] = self.attempts.get(key, 0) + 1
            wait = max(1.0, self.deadline - time.monotonic())
            self.say(m.describe())
            outcome = await move_leader(plan.lookupd, m, wait=wait, progress=self.say)
            errors: list[str] = []
            if isinstance(outcome, AdminReport) and not outcome.ok:
                errors = [readable(r.error) for r in outcome.failures]
            elif isinstance(outcome, str):
                errors = [readable(outcome)]
            for error in errors:
                self.move_errors.append(f"{m.topic}/{m.partition}: {error}")
                self.last_error[key] = error
            await self.note_moved(m)

    def exhausted(self, topic: str, part: int, copy: bool) -> Blocker | None:
        """A blocker when the move of ``topic``/``part`` was tried as often as allowed."""
        key = (topic, part, copy)
        if self.attempts.get(key, 0) < MAX_MOVES_PER_PARTITION:
            return None
        what = "its copy stayed in sync" if copy else "its leader stayed"
        kept = "youzan kept it in the ISR" if copy else "youzan kept electing it"
        why = self.last_error.get(key, kept)
        return Blocker(
            topic, part, f"{what} on {self.plan.node} after {MAX_MOVES_PER_PARTITION} moves: {why}"
        )

    async def check_stop(
        self, view: ClusterView, done: bool
    ) -> tuple[list[LeaderMove], list[Blocker]]:
        """Once the node looks done, or every leader still on it was moved as often as
        allowed: the copy moves still needed for every partition to stay writable without
        it, and what blocks the drain (waiting would not help). ([], []) otherwise."""
        node = self.plan.node
        led = [(t.name, p.partition) for t in view.topics for p in t.partitions if p.leader == node]
        stuck = [
            b
            for topic, part in led
            if part is not None and (b := self.exhausted(topic, part, False)) is not None
        ]
        if not done and (not stuck or len(stuck) < len(led)):
            return [], []
        async with admin_client() as client:
            leader = await find_leader(client, self.plan.lookupd)
            if leader is None:
                return [], stuck
            nodes = await registered_nsqds(client, leader)
            avoid = _draining_elsewhere(node, self.state_dir)
            stop = await _stop_plan(client, leader, nodes, view, node, avoid)
        spent = [
            b for m in stop.moves if (b := self.exhausted(m.topic, m.partition, True)) is not None
        ]
        return stop.moves, list(_merge(stop.blocked, [*stuck, *spent]))

    async def note_moved(self, m: LeaderMove) -> None:
        """Record where leadership of ``m`` went, when it left the node, or with ``m.copy``
        that the node's copy went to ``m.target`` (restore's input)."""
        async with _poller("redesign", self.plan.lookupd, self.plan.node) as poller:
            view = await _view(poller)
        topic = view.topic(m.topic)
        part = (
            next((p for p in topic.partitions if p.partition == m.partition), None)
            if topic
            else None
        )
        if m.copy:
            if part is None or self.plan.node in (part.isr or (self.plan.node,)):
                return
            moved = MovedLeader(m.topic, m.partition, self.plan.node, m.target, copy=True)
        elif part is None or part.leader is None or part.leader == self.plan.node:
            return
        else:
            moved = MovedLeader(m.topic, m.partition, self.plan.node, part.leader)
        same = (m.topic, m.partition, m.copy)
        self.moved = [x for x in self.moved if (x.topic, x.partition, x.copy) != same]
        self.moved.append(moved)
        self.record(moved=tuple(self.moved))

    def progress(self, load: NodeLoad, listed: Sequence[str]) -> DrainProgress:
        self.history.append(load.remaining)
        self.times.append(time.monotonic())
        rate, eta = estimate(self.history, self.times)
        return DrainProgress(
            self.plan.node, time.monotonic() - self.started, load, tuple(listed), rate, eta
        )

    async def look(self, poller: StatsPoller) -> ClusterView:
        """The cluster now. On the redesign the leaders still on the node are moved first
        (and the cluster read again); otherwise the node's topics are noted, to tombstone."""
        view = await _view(poller)
        node = self.plan.node
        if self.plan.family == "redesign" and any(
            p.leader == node for t in view.topics for p in t.partitions
        ):
            await self.move(view)
            return await _view(poller)
        self.topics.update(t.name for t in view.topics)
        return view

    async def still_listed(self, client: Any) -> list[str]:
        """The node's topics a lookupd still lists it for: the original family's, whose
        tombstones may not have reached every lookupd (none on the redesign)."""
        plan = self.plan
        if plan.family != "original":
            return []
        pairs = await listed_topics(client, plan.lookupd, sorted(self.topics), plan.producer)
        return sorted({t for _, t in pairs})

    def report(
        self, progress: DrainProgress, on_progress: Callable[[DrainProgress], None] | None
    ) -> None:
        """Keep ``progress`` as the last seen, in the record every RECORD_EVERY seconds
        (for other processes to show), and hand it to ``on_progress``."""
        self.last = progress
        if time.monotonic() - self.last_record >= RECORD_EVERY:
            self.record(remaining=progress.load.remaining, eta=progress.eta)
            self.last_record = time.monotonic()
        if on_progress is not None:
            on_progress(progress)

    async def copies_pending(self, view: ClusterView, done: bool) -> bool:
        """Redesign: whether the node may not stop yet, because something blocks it
        (``blocked``) or copies of it had to be moved first (sent now)."""
        copies, self.blocked = await self.check_stop(view, done)
        if self.blocked:
            return True
        if copies:
            await self.send(copies)
            return True
        return False

    async def loop(
        self, interval: float, on_progress: Callable[[DrainProgress], None] | None
    ) -> Outcome:
        """Look at the node every ``interval`` seconds, moving what must move, until the
        drain ends; how it ended."""
        plan = self.plan
        async with (
            admin_client() as client,
            _poller(plan.family, plan.lookupd, plan.node) as poller,
        ):
            listed: list[str] = []
            while True:
                if self.restored():
                    return "restored"
                if plan.family == "original":
                    await self.tombstone_due(client, listed)
                view = await self.look(poller)
                listed = await self.still_listed(client)
                progress = self.progress(node_load(view, plan.node), listed)
                self.report(progress, on_progress)
                if plan.family == "redesign" and await self.copies_pending(view, progress.done):
                    if self.blocked:
                        return "blocked"
                    if time.monotonic() < self.deadline:
                        continue  # look again once the copies moved
                    return "timeout"
                if progress.done:
                    return "drained"
                if time.monotonic() >= self.deadline:
                    return "timeout"
                await asyncio.sleep(interval)


async def run_drain(
    plan: DrainPlan,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = DEFAULT_INTERVAL,
    on_progress: Callable[[DrainProgress], None] | None = None,
    say: Say | None = None,
    state_dir: Path | None = None,
) -> DrainResult:
    """Drain ``plan.node`` until it is safe to stop (``drained``), ``timeout`` seconds
    pass (``timeout``: :meth:`DrainProgress.left` says what is left) or ``nsqctl node
    restore`` undoes it meanwhile (``restored``). ``on_progress`` gets every poll."""
    if timeout < 0:
        raise ConfigError(f"timeout must be >= 0 seconds, not {timeout}", setting="timeout")
    if interval <= 0:
        raise ConfigError(f"interval must be > 0 seconds, not {interval}", setting="interval")
    if plan.blocked:  # refused before any change: the same answer as the dry run
        now = DrainProgress(plan.node, 0.0, plan.load or NodeLoad(0, 0, 0, 0))
        return DrainResult(plan, "blocked", now, blocked=list(plan.blocked))
    run = _Drain(plan, time.monotonic() + timeout, state_dir, say or (lambda _line: None))
    run.topics.update(plan.topics)
    run.start()
    outcome: Outcome = "timeout"
    try:
        outcome = await run.loop(interval, on_progress)
    except asyncio.CancelledError:  # SIGINT/SIGTERM in the CLI: record it, then end
        outcome = "interrupted"
        raise
    finally:
        if outcome != "restored":
            with contextlib.suppress(OSError):
                run.finish(outcome, run.last)
    progress = run.last
    assert progress is not None or outcome == "restored"
    if progress is None:
        progress = DrainProgress(plan.node, 0.0, NodeLoad(0, 0, 0, 0, up=False))
    return DrainResult(plan, outcome, progress, run.moved, run.move_errors, run.blocked)
