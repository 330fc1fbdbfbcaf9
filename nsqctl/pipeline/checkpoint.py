"""Replay checkpoints: per ordering key, the sort position of the last acknowledged batch.

A replay sorts each key's messages deterministically, so "everything up to position X of
key K was acknowledged" is enough to resume without re-sending. Tasks write one small
JSON file per key (temporary name + rename) after each acknowledged batch; executors must
share the checkpoint directory's file system (local mode always does).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from nsqctl.errors import ConfigError
from nsqctl.paths import unusable_directory

Position = tuple[int, int, int]


def fingerprint(spec: dict[str, Any]) -> str:
    """A stable id of a replay's inputs (source, target, filters)."""
    text = json.dumps(spec, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def prepare(directory: Path, spec: dict[str, Any], restart: bool) -> int:
    """Create or check the checkpoint dir; returns how many keys already have progress.

    Raises :class:`ConfigError` before anything is published when the directory cannot be
    made, read or written, or holds a ``job.json`` that is not one: the replay could not
    record its progress, and a rerun would publish everything again."""
    try:
        return _prepare(directory, spec, restart)
    except OSError as err:
        raise ConfigError(
            f"cannot use {directory} as the replay checkpoint: {unusable_directory(err)}; give a "
            "writable directory as `checkpoint`",
            setting="checkpoint",
        ) from None
    except ValueError:  # a torn or foreign job.json (json's decode error is a ValueError)
        raise ConfigError(
            f"{directory / 'job.json'} is not a replay checkpoint: give another `checkpoint`, "
            "or `restart` to start it again",
            setting="checkpoint",
        ) from None


def _prepare(directory: Path, spec: dict[str, Any], restart: bool) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    job = directory / "job.json"
    fp = fingerprint(spec)
    if job.exists() and not restart:
        old = json.loads(job.read_text())
        if not isinstance(old, dict) or old.get("fingerprint") != fp:
            raise ConfigError(
                f"checkpoint {directory} belongs to another replay (different source, target "
                "or filters): use another `checkpoint` or `restart`"
            )
    if restart:
        for path in (directory / "keys").glob("*.json"):
            path.unlink()
    (directory / "keys").mkdir(exist_ok=True)
    job.write_text(json.dumps({"fingerprint": fp, "spec": spec}, default=str, indent=1))
    return len(list((directory / "keys").glob("*.json")))


class KeyCheckpoint:
    """Executor side: read and advance the positions of the keys one task handles."""

    def __init__(self, directory: str | None) -> None:
        self.directory = Path(directory) / "keys" if directory else None
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        self._cache: dict[str, tuple[Position, int] | None] = {}

    def _path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / (hashlib.sha1(key.encode()).hexdigest() + ".json")

    def _load(self, key: str) -> tuple[Position, int] | None:
        if key not in self._cache:
            path = self._path(key)
            state: tuple[Position, int] | None = None
            if path.exists():
                data = json.loads(path.read_text())
                a, b, c = (int(v) for v in data["position"])
                state = ((a, b, c), int(data.get("count", 0)))
            self._cache[key] = state
        return self._cache[key]

    def position(self, key: str) -> Position | None:
        """Sort position of the last acknowledged message of ``key`` (None: nothing yet)."""
        if self.directory is None:
            return None
        state = self._load(key)
        return None if state is None else state[0]

    def advance(self, key: str, position: Position, added: int) -> None:
        """Record that ``key`` is acknowledged up to ``position`` (``added`` more messages)."""
        if self.directory is None:
            return
        state = self._load(key)
        count = (state[1] if state else 0) + added
        self._cache[key] = (position, count)
        path = self._path(key)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"key": key, "position": list(position), "count": count}))
        os.replace(tmp, path)


def acknowledged(directory: Path) -> int:
    """Messages the checkpoint records as acknowledged, over all keys."""
    total = 0
    for path in (directory / "keys").glob("*.json"):
        total += int(json.loads(path.read_text()).get("count", 0))
    return total
