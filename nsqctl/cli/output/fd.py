"""Writing command output straight to its file descriptor, whole.

Not through the buffered stream: a signal (SIGTERM, Ctrl-C) that interrupts a blocking
write to a full pipe makes it return part way, and the buffered stream then dropped the
bytes it had kept back (a line cut short, yet its message FINed); and a reader that goes
away part way through must be noticed (BrokenPipeError), not lost in the buffer.
"""

from __future__ import annotations

import os
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
    written = os.write(fd, data)
    if written == len(data):  # the usual case: no memoryview needed
        return
    view = memoryview(data)[written:]
    while view:
        view = view[os.write(fd, view) :]
