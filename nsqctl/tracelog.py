"""Opt-in trace log: one JSON object per line for traced publishes and consumed messages.

Schema (``nsqctl trace`` reads it; fields are stable, new ones may be added):

publish record (one per message)::

    {"kind": "publish", "time": <unix s float>, "topic", "partition", "nsqd",
     "internal_id", "trace_id", "offset", "size", "count"}

  For a message of an MPUB_TRACE batch, ``offset``, ``size`` and ``count`` describe the
  whole batch and ``batch_index`` is the message's place in it.

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

from nsqctl.errors import ConfigError, NsqctlError

__all__ = ["TraceLog", "TraceLogWriteError"]


class TraceLogWriteError(NsqctlError):
    """The trace log file could not be written (a full disk, an I/O error)."""


class TraceLog:
    """Writes trace records to a file (appended, line-buffered) or to a logger.

    A write that fails does not raise: records are written while messages are being
    answered, and an exception there would leave a message marked answered whose FIN
    was never sent. The first failure is kept in :attr:`error` (naming the file and the
    cause) and the file is closed; whoever runs the log checks it and stops.
    """

    def __init__(
        self, path: str | Path | None = None, *, logger: logging.Logger | None = None
    ) -> None:
        if path is None and logger is None:
            raise ValueError("a trace log needs a path or a logger")
        self.path = Path(path) if path is not None else None
        self._logger = logger
        self._lock = threading.Lock()
        self._fh: IO[str] | None = None
        self.error: TraceLogWriteError | None = None
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
                try:
                    self._fh.write(line + "\n")
                except OSError as err:
                    self._failed(err)

    def _failed(self, err: OSError) -> None:
        """Keep the first failure and stop writing (called with the lock held)."""
        if self.error is None:
            self.error = TraceLogWriteError(
                f"cannot write the trace log {self.path}: {err.strerror or err}"
            )
        self._close_file()

    def _close_file(self) -> None:
        fh, self._fh = self._fh, None
        if fh is None:
            return
        try:
            fh.close()  # flushes what is still buffered (Python closes the file anyway)
        except OSError as err:
            self._failed(err)

    def publish(self, receipt: Any) -> None:
        """Record a traced publish receipt (a :class:`nsqctl.producer.Receipt`): one record
        per message, so each trace id can be found (an MPUB_TRACE reply has trace id 0)."""
        record = {
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
        trace_ids = getattr(receipt, "trace_ids", ())
        if len(trace_ids) != receipt.count:  # no per-message trace ids known: as it is
            self.write(record)
            return
        for index, trace_id in enumerate(trace_ids):  # a batch's internal ids are consecutive
            where = {"batch_index": index} if receipt.count > 1 else {}
            self.write(
                {
                    **record,
                    "internal_id": receipt.internal_id + index,
                    "trace_id": trace_id,
                    **where,
                }
            )

    def close(self) -> None:
        """Close the file; a failure to flush its last lines is kept in :attr:`error`."""
        with self._lock:
            self._close_file()
