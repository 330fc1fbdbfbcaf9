"""Opt-in trace log: one JSON object per line for traced publishes and consumed messages.

Schema (``nsqctl trace`` reads it; fields are stable, new ones may be added):

publish record::

    {"kind": "publish", "time": <unix s float>, "topic", "partition", "nsqd",
     "internal_id", "trace_id", "offset", "size", "count"}

consume record::

    {"kind": "consume", "time", "topic", "channel", "partition", "nsqd" (remote address),
     "local_address", "id" (hex), "internal_id", "trace_id", "attempts",
     "timestamp" (message ns), "offset", "size", "outcome": "FIN"|"REQ"|"timeout"|"giving-up",
     "handler_ms"}
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import IO, Any

from nsqctl.errors import ConfigError


class TraceLog:
    """Writes trace records to a file (appended, line-buffered) or to a logger."""

    def __init__(
        self, path: str | Path | None = None, *, logger: logging.Logger | None = None
    ) -> None:
        if path is None and logger is None:
            raise ValueError("a trace log needs a path or a logger")
        self.path = Path(path) if path is not None else None
        self._logger = logger
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = self.path.open("a", buffering=1, encoding="utf-8")
            except OSError as err:
                raise ConfigError(
                    f"cannot open the trace log {self.path}: {err.strerror or err}"
                ) from None

    def write(self, record: dict[str, Any]) -> None:
        record.setdefault("time", time.time())
        line = json.dumps(record, separators=(",", ":"), default=str)
        if self._logger is not None:
            self._logger.info(line)
        if self._fh is not None:
            with self._lock:
                self._fh.write(line + "\n")

    def publish(self, receipt: Any) -> None:
        """Record a traced publish receipt (a :class:`nsqctl.producer.Receipt`)."""
        self.write(
            {
                "kind": "publish",
                "topic": receipt.topic,
                "partition": receipt.partition,
                "nsqd": receipt.nsqd,
                "internal_id": receipt.internal_id,
                "trace_id": receipt.trace_id,
                "offset": receipt.offset,
                "size": receipt.size,
                "count": receipt.count,
            }
        )

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
