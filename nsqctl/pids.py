"""Whether a process runs, known by its id alone: a drain's, recorded in ``drains.json`` by
another ``nsqctl`` (:mod:`nsqctl.admin.drain.records`), and the servers a sandbox started
(:mod:`nsqctl.servers.process`, which also checks the id still runs the same program)."""

from __future__ import annotations

import os
from pathlib import Path


def _zombie(pid: int) -> bool:
    """Dead and not yet reaped by its parent: ``kill(pid, 0)`` still succeeds on it."""
    try:
        return ") Z" in Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc, or gone meanwhile: kill(pid, 0) had the last word


def pid_alive(pid: int, *, signallable: bool = False) -> bool:
    """Whether process ``pid`` runs (a zombie does not). ``signallable``: only a process
    this one may signal counts, not another user's: for one about to be stopped or paused,
    where a process of another user under that id is not the one that was started."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        if signallable:
            return False
    return not _zombie(pid)


def pid_stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP, or a debugger): alive, but it answers
    nothing, so it must not be shown as running like the others. False without /proc."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("T", "t")
