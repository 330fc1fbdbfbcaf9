"""Writing command output straight to its file descriptor, whole.

Not through the buffered stream: a signal (SIGTERM, Ctrl-C) that interrupts a blocking
write to a full pipe makes it return part way, and the buffered stream then dropped the
bytes it had kept back (a line cut short, yet its message FINed); and a reader that goes
away part way through must be noticed (BrokenPipeError), not lost in the buffer. A
descriptor left non-blocking by whatever shares it (a parent shell's tool, a terminal
multiplexer) answers a full pipe with EAGAIN: the write waits until it takes bytes again,
as a blocking one would, instead of failing with part of a line out.

A reader that stalls (``| less`` scrolled back, a stopped process, a terminal paused with
Ctrl-S) must not hold a stop: a write that waits in the kernel cannot be ended from the
writer's side (a signal only makes Python retry it), so writes given a
:class:`WriteStop` wait in ``poll`` for the descriptor to take bytes, or for the stop,
and then write at most a pipe's atomic size (``PIPE_BUF``), cut at a line's end where it
can: each write after ``poll`` takes the descriptor without waiting, unless another
writer of a shared non-blocking descriptor took the room first (EAGAIN): that write
waits in ``poll`` under the stop again.
"""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
import weakref
from typing import BinaryIO

__all__ = ["WriteStop", "stream_fd", "write_fully"]

_CHUNK = select.PIPE_BUF


class WriteStop:
    """What ends the writes to ``fd`` that wait on a stalled reader: :meth:`set` (from a
    signal handler too) makes them return early from then on, whenever the descriptor
    takes no bytes. Only for a descriptor whose reader can stall (a pipe, a socket, a
    terminal); for another (a file, ``/dev/null``) :attr:`fileno` is None and writes are
    not watched. Safe for writers on several threads (a poll object each: one cannot be
    polled from two threads at once)."""

    def __init__(self, fd: int | None) -> None:
        self.fileno: int | None = None
        self._fd = -1
        self._wake = -1
        self._local = threading.local()
        self._owner: WriteStop | None = None  # whose stop pipe this one shares
        if fd is None or not _can_stall(fd):
            return
        self._fd = fd
        self.fileno, self._wake = os.pipe()
        os.set_blocking(self._wake, False)
        weakref.finalize(self, _close_both, self.fileno, self._wake)

    def watching(self, fd: int) -> WriteStop:
        """The same stop for writes to ``fd`` as well (standard error beside standard
        output, perhaps the same stalled pipe: ``2>&1 | less``): set with this one.
        Unwatched when this one is, or when ``fd`` cannot stall."""
        other = WriteStop(None)
        if self.fileno is not None and _can_stall(fd):
            other._fd, other.fileno, other._wake = fd, self.fileno, self._wake
            other._owner = self  # the pipe is closed with its owner, not before
        return other

    def wait(self) -> bool:
        """Until the descriptor takes bytes (True, also for an error or a hang-up there,
        which the write then meets) or, while it takes none, the stop is set (False)."""
        poller = getattr(self._local, "poller", None)
        if poller is None:
            assert self.fileno is not None  # only watched writes wait
            poller = self._local.poller = select.poll()
            poller.register(self._fd, select.POLLOUT)
            poller.register(self.fileno, select.POLLIN)
        events = poller.poll()  # one or both of the two descriptors
        fd = self._fd
        return events[0][0] == fd or (len(events) > 1 and events[1][0] == fd)

    def is_set(self) -> bool:
        """Whether :meth:`set` was called (its byte waits in the stop pipe)."""
        assert self.fileno is not None  # only watched writes ask
        poller = select.poll()  # not select(): the pipe's descriptor may be past FD_SETSIZE
        poller.register(self.fileno, select.POLLIN)
        return bool(poller.poll(0))

    def set(self) -> None:
        """Stop the writes that wait (idempotent)."""
        if self._wake >= 0:
            # BlockingIOError: set so often that the pipe is full, which is set all the same
            with contextlib.suppress(OSError):
                os.write(self._wake, b"x")


def _can_stall(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


def _close_both(read_end: int, write_end: int) -> None:
    for end in (read_end, write_end):
        os.close(end)


def stream_fd(out: BinaryIO) -> int | None:
    """The file descriptor ``out`` writes to; None for an in-memory stream (CliRunner)."""
    try:
        return out.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def write_fully(out: BinaryIO, fd: int | None, data: bytes, stop: WriteStop | None = None) -> int:
    """All of ``data`` to ``fd`` (``out``'s, from :func:`stream_fd`), looping over partial
    writes; through ``out`` itself when it has no descriptor. The bytes written: all of
    them, unless a ``stop`` watching ``fd`` was set while ``fd`` took no bytes."""
    if fd is None:
        out.write(data)
        out.flush()
        return len(data)
    if stop is not None and stop.fileno is not None:
        return _write_watched(fd, data, stop)
    try:
        written = os.write(fd, data)
    except BlockingIOError:
        written = 0
    if written == len(data):  # the usual case: no memoryview needed
        return written
    view = memoryview(data)[written:]
    while view:
        view = view[_write_some(fd, view) :]
    return len(data)


def _write_some(fd: int, data: bytes | memoryview) -> int:
    """Bytes of ``data`` written to ``fd``, waiting while a non-blocking one is full."""
    while True:
        try:
            return os.write(fd, data)
        except BlockingIOError:
            select.select([], [fd], [])


def _write_watched(fd: int, data: bytes, stop: WriteStop) -> int:
    """:func:`write_fully` under ``stop`` (watching ``fd``)."""
    size = len(data)
    written = 0
    if size <= _CHUNK:  # the usual case, a line: one wait, one write
        written = _write_when_taken(fd, data, stop)
        if written in (0, size):
            return written
    view = memoryview(data)
    while written < size:
        end = written + _CHUNK
        if end < size:
            line_end = data.rfind(b"\n", written, end)
            end = line_end + 1 if line_end >= written else end
        some = _write_when_taken(fd, view[written:end], stop)
        if not some:
            return written
        written += some
    return written


def _write_when_taken(fd: int, data: bytes | memoryview, stop: WriteStop) -> int:
    """Bytes of ``data`` (not empty) written to ``fd`` once it takes them; 0 when ``stop``
    was set while it took none. A non-blocking descriptor shared with another writer can
    answer EAGAIN although poll said it takes bytes (the other writer filled it in
    between): that waits under the stop again, never in a wait the stop cannot end."""
    while True:
        if not stop.wait():
            return 0
        try:
            return os.write(fd, data)
        except BlockingIOError:
            if stop.is_set():  # set, and the descriptor took nothing: as wait() does
                return 0
