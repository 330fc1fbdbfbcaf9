"""The record of node drains on this machine: ``drains.json`` in the state directory.

A drain runs for minutes in one process while the dashboard (another process) shows its
state, and ``nsqctl node restore`` (a third) must find what the drain did to undo it: the
leaders it moved, the lookupds it tombstoned on. So the record lives in a file, one entry
per nsqd HTTP address, rewritten whole under an exclusive lock (read, change one entry,
replace the file) so that two writers never lose each other's entry.

States: ``draining`` (a drain process runs, or was killed: ``pid`` tells which),
``drained`` (it finished: safe to stop the node), ``stopped`` (it gave up: at its
timeout, because something blocks it, or interrupted; ``detail`` says which and what is
left; shown as "gave up"), ``restored`` (undone; a running drain sees this and stops). A
running drain also keeps ``remaining`` and ``eta`` current (every few seconds), so another
process can show its progress.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from nsqctl.paths import state_dir as default_state_dir
from nsqctl.pids import pid_alive

DrainStateName = Literal["draining", "drained", "stopped", "restored"]
STATES: tuple[DrainStateName, ...] = ("draining", "drained", "stopped", "restored")
FILE_NAME = "drains.json"


@dataclass(frozen=True)
class MovedLeader:
    """A redesign partition leadership the drain moved off the node (restore moves it back)."""

    topic: str
    partition: int
    source: str  # the drained nsqd (HTTP address)
    target: str  # where leadership went (with ``copy``: where the node's copy went)
    copy: bool = False  # the node's in-sync copy moved, not leadership


@dataclass(frozen=True)
class DrainRecord:
    node: str  # nsqd HTTP address
    family: str  # "original" | "redesign"
    state: DrainStateName
    started: float  # unix time
    updated: float
    lookupd: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()
    moved: tuple[MovedLeader, ...] = ()
    pid: int = 0
    last_tombstone: float | None = None  # unix time of the last tombstone sent (original)
    detail: str = ""  # one line: why it stopped, what is left
    remaining: int | None = None  # messages left on the node at the last look
    eta: float | None = None  # seconds to empty at the drain rate then (None: not falling)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["lookupd"] = list(self.lookupd)
        out["topics"] = list(self.topics)
        out["moved"] = [asdict(m) for m in self.moved]
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> DrainRecord:
        state: DrainStateName = next((s for s in STATES if s == obj.get("state")), "stopped")
        return cls(
            node=str(obj["node"]),
            family=str(obj.get("family", "original")),
            state=state,
            started=float(obj.get("started", 0.0)),
            updated=float(obj.get("updated", 0.0)),
            lookupd=tuple(str(a) for a in obj.get("lookupd") or ()),
            topics=tuple(str(t) for t in obj.get("topics") or ()),
            moved=tuple(
                MovedLeader(
                    str(m["topic"]),
                    int(m["partition"]),
                    str(m["source"]),
                    str(m["target"]),
                    bool(m.get("copy", False)),
                )
                for m in obj.get("moved") or ()
            ),
            pid=int(obj.get("pid", 0)),
            last_tombstone=(
                float(obj["last_tombstone"]) if obj.get("last_tombstone") is not None else None
            ),
            detail=str(obj.get("detail", "")),
            remaining=int(obj["remaining"]) if obj.get("remaining") is not None else None,
            eta=float(obj["eta"]) if obj.get("eta") is not None else None,
        )


def state_word(state: str) -> str:
    """A state as operators read it: ``stopped`` (the file's word, kept for the records
    already written) means the drain gave up, not that the nsqd was stopped."""
    return "gave up" if state == "stopped" else state


def running_elsewhere(record: DrainRecord | None) -> bool:
    """A drain of the record's node runs in another process now."""
    return (
        record is not None
        and record.state == "draining"
        and record.pid != os.getpid()
        and pid_alive(record.pid)
    )


@dataclass
class DrainBook:
    """Every record of ``drains.json`` (node → record)."""

    records: dict[str, DrainRecord] = field(default_factory=dict)


def drains_path(state_dir: Path | None = None) -> Path:
    return (state_dir or default_state_dir()) / FILE_NAME


def _parse(text: str) -> DrainBook:
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError:
        return DrainBook()  # a torn or hand-edited file: start over rather than fail a drain
    book = DrainBook()
    for obj in (data.get("drains") or {}).values() if isinstance(data, dict) else ():
        with contextlib.suppress(KeyError, TypeError, ValueError):
            record = DrainRecord.from_json(obj)
            book.records[record.node] = record
    return book


def read_drains(state_dir: Path | None = None) -> dict[str, DrainRecord]:
    """node → its drain record ({} without a file)."""
    try:
        return _parse(drains_path(state_dir).read_text()).records
    except OSError:
        return {}


def drain_states(state_dir: Path | None = None) -> Mapping[str, str]:
    """node (nsqd HTTP address) → its drain state, for the dashboard's node screen."""
    return {node: state_word(record.state) for node, record in read_drains(state_dir).items()}


def drain_labels(state_dir: Path | None = None) -> Mapping[str, str]:
    """node → what the dashboard's node screen shows: the state, and for a running drain
    its progress at the drain's last look (messages left, time to empty at its pace)."""
    labels: dict[str, str] = {}
    for node, record in read_drains(state_dir).items():
        label = state_word(record.state)
        if record.state == "draining" and record.remaining is not None:
            eta = "not falling" if record.eta is None else f"~{record.eta:.0f}s"
            label = f"draining: {record.remaining} left, {eta}"
        labels[node] = label
    return labels


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def update_drain(
    node: str,
    change: Callable[[DrainRecord | None], DrainRecord | None],
    state_dir: Path | None = None,
) -> DrainRecord | None:
    """Read the book, replace ``node``'s record by ``change(old)`` (None: drop it), write
    it back atomically, all under the lock; the new record."""
    path = drains_path(state_dir)
    with _locked(path):
        try:
            book = _parse(path.read_text())
        except OSError:
            book = DrainBook()
        new = change(book.records.get(node))
        if new is None:
            book.records.pop(node, None)
        else:
            book.records[node] = replace(new, updated=time.time())
        tmp = path.with_suffix(".tmp")
        doc = {"drains": {n: r.to_json() for n, r in sorted(book.records.items())}}
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, path)
    return book.records.get(node)
