"""Writing command output straight to its file descriptor, whole.

Not through the buffered stream: a signal (SIGTERM, Ctrl-C) that interrupts a blocking
write to a full pipe makes it return part way, and the buffered stream then dropped the
bytes it had kept back (a line cut short, yet its message FINed); and a reader that goes
away part way through must be noticed (BrokenPipeError), not lost in the buffer. A
descriptor left non-blocking by whatever shares it (a parent shell's tool, a terminal
multiplexer) answers a full pipe with EAGAIN: the write waits until it takes bytes again,
as a blocking one would, instead of failing with part of a line out.
"""

from __future__ import annotations

import os
import select
from typing import BinaryIO

__all__ = ["stream_fd", "write_fully"]


def stream_fd(out: BinaryIO) -> int | None:
    """The file descriptor ``out`` writes to; None for an in-memory stream (CliRunner)."""
    try:
        return out.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def write_fully(out: BinaryIO, fd: int | None, data: bytes) -> None:
    """All of ``data`` to ``fd`` (``out``'s, from :func:`stream_fd`), looping over partial
    writes; through ``out`` itself when it has no descriptor."""
    if fd is None:
        out.write(data)
        out.flush()
        return
    try:
        written = os.write(fd, data)
    except BlockingIOError:
        written = 0
    if written == len(data):  # the usual case: no memoryview needed
        return
    view = memoryview(data)[written:]
    while view:
        view = view[_write_some(fd, view) :]


def _write_some(fd: int, data: memoryview) -> int:
    """Bytes of ``data`` written to ``fd``, waiting while a non-blocking one is full."""
    while True:
        try:
            return os.write(fd, data)
        except BlockingIOError:
            select.select([], [fd], [])
