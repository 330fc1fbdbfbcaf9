"""The node screen's drain and restore, as ``nsqctl node drain|restore`` do them.

Everything a drain decides is :mod:`nsqctl.admin.drain`'s: :func:`plan_drain` finds the
node and what the drain would do (the refusal when a partition would stop taking writes
is part of the plan, and nothing is asked then), :func:`run_drain` runs it, recording it
in the state directory as the CLI's does (so ``nsqctl node list`` and ``node restore`` in
another terminal see it), and :func:`restore_node` undoes it. This module only puts the
plan and the outcome in the dashboard's words and runs the library calls in a
:class:`~nsqctl.tui.nodejobs.NodeJob` (a thread of their own).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from nsqctl import admin
from nsqctl.admin.drain.defaults import DEFAULT_INTERVAL, DEFAULT_RESTORE_WAIT, DEFAULT_TIMEOUT
from nsqctl.admin.drain.moves import LeaderMove
from nsqctl.admin.drain.records import DrainRecord, read_drains, running_elsewhere
from nsqctl.admin.drain.restore import restore_node
from nsqctl.admin.drain.run import DrainPlan, DrainResult, plan_drain, refusal, run_drain
from nsqctl.cli.wording import cli_words
from nsqctl.tui.nodejobs import STOP_WAIT, NodeJob

Work = Callable[[NodeJob], Awaitable[str]]


async def plan_in_thread(lookupd: Sequence[str], node: str) -> DrainPlan:
    """:func:`plan_drain` in a thread with its own loop: it builds a view of the whole
    cluster (the redesign's), work that must not stall the app's keys."""
    return await asyncio.to_thread(asyncio.run, plan_drain(lookupd, node))


def refused_text(plan: DrainPlan) -> str:
    """A blocked plan: the refusal, then each partition that blocks it (the CLI's lines)."""
    lines = [refusal(plan.node, plan.blocked), *(f"  {b.describe()}" for b in plan.blocked)]
    return "\n".join(lines)


def drain_question(plan: DrainPlan) -> str:
    """The confirmation: the plan in the dry run's words, what the drain then does, and
    the CLI's guard (a plain yes: a drain drops no message)."""
    if plan.family == "original":
        then = (
            "then it keeps the tombstones fresh and waits until the nsqd holds no message "
            "and no nsqlookupd lists it"
        )
    else:
        then = (
            "then it waits until no partition depends on it (led by it, or its only in-sync copy)"
        )
    busy = running_elsewhere(read_drains().get(plan.node))
    lines = [
        *([f"note: a drain of {plan.node} is running now (another process)"] if busy else []),
        f"About to drain nsqd {plan.node}:",
        *(f"  {line}" for line in plan.preview()),
        f"  {then}; progress shows here, c cancels it, u restores the node",
        admin.confirmation(None).prompt + " (y/N)",
    ]
    return "\n".join(lines)


def drain_outcome(result: DrainResult) -> str:
    """How a drain ended, in one line (the CLI's words, without its exit code)."""
    node, progress = result.plan.node, result.progress
    if result.outcome == "blocked":
        return cli_words(refusal(node, result.blocked, moved=bool(result.moved)))
    if result.outcome == "restored":
        return f"the drain of {node} was undone by a restore: stopped"
    if result.outcome == "timeout":
        left = "; ".join(progress.left() + result.move_errors) or "not confirmed"
        return f"{node} is not drained after {progress.elapsed:.0f}s: {left}"
    moved = f"; moved {len(result.moved)} leader(s)/copies off it" if result.moved else ""
    return (
        f"{node} drained in {progress.elapsed:.0f}s: it holds nothing and nothing depends on "
        f"it{moved}; safe to stop"
    )


def drain_cancelled(node: str) -> str:
    return (
        f"the drain of {node} was cancelled: recorded as given up (`nsqctl node list`); "
        f"leaders it moved stay moved (u here, or `nsqctl node restore {node}`, moves them back)"
    )


def drain_work(plan: DrainPlan, timeout: float = DEFAULT_TIMEOUT) -> Work:
    async def work(job: NodeJob) -> str:
        result = await run_drain(
            plan,
            timeout=timeout,
            interval=DEFAULT_INTERVAL,
            on_progress=lambda step: job.set_progress(step.line()),
            say=job.say,
        )
        job.failed = not result.ok
        for m in result.moved:
            what = "its copy" if m.copy else "leader"
            job.say(f"moved {m.topic} partition {m.partition} {what} to {m.target}")
        return drain_outcome(result)

    return work


def restore_question(record: DrainRecord) -> str:
    """The confirmation of a restore: what it will undo, from the drain's record."""
    lines = [f"About to restore nsqd {record.node} ({record.family}, drain {record.state}):"]
    if record.family == "original":
        lines.append(
            "  stop re-tombstoning it and have it reconnect to its nsqlookupds, which lists it "
            "again for its topics"
        )
    else:
        moves = [
            LeaderMove(m.topic, m.partition, m.target, record.node, copy=m.copy).describe()
            for m in reversed(record.moved)
        ]
        lines.extend(f"  {move}" for move in moves or ["(the drain moved no leader: nothing)"])
    lines.append(admin.confirmation(None).prompt + " (y/N)")
    return "\n".join(lines)


def restore_work(lookupd: Sequence[str], node: str, drain: NodeJob | None = None) -> Work:
    """Restore ``node``; a ``drain`` of it still running in this app is cancelled first,
    and has recorded where it stopped before the restore reads the record."""

    async def work(job: NodeJob) -> str:
        if drain is not None and drain.running:
            job.say(f"cancelling the drain of {node} running here first")
            drain.cancel()
            await asyncio.to_thread(drain.finished.wait, STOP_WAIT)
        result = await restore_node(lookupd, node, wait=DEFAULT_RESTORE_WAIT, say=job.say)
        for note in result.notes:
            job.say(note)
        if result.failed:
            job.failed = True
            return f"restore of {result.node} incomplete: {'; '.join(result.failed)}"
        return f"{result.node} restored ({result.family})"

    return work
