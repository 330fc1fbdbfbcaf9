"""When a message written into a pipe may be FINed: once its reader has handled it.

A write into a pipe only puts bytes in the kernel's pipe buffer (64 KiB on Linux). A
reader such as ``head -n 3`` then takes a whole buffer's worth in one ``read``, prints
three lines and exits: FINing at write time deletes every message it took and dropped,
and every message still in the pipe. So a message written into a pipe is *owed* until
the reader has taken its bytes (``ioctl(FIONREAD)`` says how many bytes are still unread)
and has shown it handled them. A sequential reader handles what one ``read`` returned
before it reads again, so:

- bytes taken by one check are handled once a later check sees more taken (the reader
  came back for more);
- when the reader took everything and sleeps waiting for more (in a read of the pipe, or
  in ``poll``/``select``/``epoll``: Linux shows where in each thread's ``wchan``; the
  reader is found through ``/proc/*/fd``), it handled what it took: without this the last
  lines of a quiet topic, and each message of an ordered subscription (one in flight
  per partition), would wait for the rule below;
- when the reader took everything and stays (no hangup) for :data:`GRACE` seconds, it
  handled what it took: a reader that drops what it read (``head``) exits at once, and
  a quiet topic must not leave its last lines in flight until nsqd's timeout (the
  fallback where the reader cannot be seen in ``/proc``).

What is owed when the reader goes is given back (REQ), once: a line it printed before
going may then come again (at-least-once), but nothing it never printed is lost. A
regular file or a terminal keeps what was written: there a write is handled at once.
A reader that stops reading (a paused pager) keeps what it has not taken in flight: past
nsqd's message timeout nsqd sends it again (at-least-once, as any slow consumer).
"""

from __future__ import annotations

import array
import fcntl
import os
import select
import stat
import termios
import time
from collections import deque
from collections.abc import Callable

from nsqctl.message import Message

__all__ = ["GRACE", "PipeAcks", "hangup_poll", "pipe_acks_for"]

GRACE = 0.5
"""Seconds a reader that took every byte must stay before what it took counts as handled:
far longer than ``head`` takes to exit once it has printed its lines."""


def hangup_poll(fd: int | None) -> select.poll | None:
    """A poll object that reports only errors on ``fd`` (event mask 0: POLLERR and
    POLLHUP always come), when ``fd`` is a pipe or socket, whose reader can go away."""
    if fd is None or not hasattr(select, "poll"):
        return None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        return None
    poller = select.poll()
    poller.register(fd, 0)
    return poller


def unread_bytes(fd: int) -> int:
    """Bytes written into the pipe ``fd`` that its reader has not taken yet."""
    buf = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf, True)
    return buf[0]


READER_SEARCH_INTERVAL = 1.0
"""Seconds between two searches of ``/proc`` for the pipe's readers while none of those
found is reading (a search reads every process's open files: some 30 ms)."""


def pipe_readers(fd: int) -> list[int]:
    """The processes (but this one) holding the pipe ``fd`` open for reading."""
    try:
        target = f"pipe:[{os.fstat(fd).st_ino}]"
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    own, found = os.getpid(), []
    for pid in pids:
        if int(pid) == own:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or not ours to look at
            continue
        for name in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}") != target:
                    continue
                with open(f"/proc/{pid}/fdinfo/{name}") as info:
                    flags = next(
                        int(line.split()[1], 8) for line in info if line.startswith("flags:")
                    )
            except (OSError, StopIteration, ValueError):
                continue
            if flags & os.O_ACCMODE == os.O_RDONLY:
                found.append(int(pid))
                break
    return found


def open_wchans(pid: int) -> list[int]:
    """The ``wchan`` file of each thread of ``pid``, opened once to be read again and again
    (one ``pread`` each). Every thread's, not only the process's (its main thread's): a
    program may read the pipe on a thread of its own while its main thread waits on
    something else (a ``subprocess.Popen`` reader thread, a worker pool)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            found.append(os.open(f"/proc/{pid}/task/{task}/wchan", os.O_RDONLY))
        except OSError:
            continue  # the thread ended meanwhile
    return found


WAITING_FOR_INPUT = (b"pipe_read", b"pipe_wait", b"poll", b"select")
"""Where, in ``/proc/PID/wchan``, a process sleeps when it waits for input: in a read of
the pipe (``anon_pipe_read``; ``pipe_read``, ``pipe_wait`` on older kernels) or in
``poll``/``select``/``epoll_wait`` (``poll_schedule_timeout``, ``do_epoll_wait``,
``ep_poll``, ``do_select``), as event loops and Python's ``communicate`` do."""


def waiting_for_input(wchan: int) -> bool:
    """The process whose ``wchan`` file this is sleeps waiting for input (see
    :data:`WAITING_FOR_INPUT`): it has handled what it read before."""
    try:
        where = os.pread(wchan, 64, 0)
    except OSError:  # the process is gone
        return False
    return any(mark in where for mark in WAITING_FOR_INPUT)


def pipe_acks_for(fd: int | None, hangup: select.poll | None) -> PipeAcks | None:
    """A :class:`PipeAcks` when ``fd`` is a pipe whose unread bytes can be counted."""
    if fd is None or hangup is None or not hasattr(termios, "FIONREAD"):
        return None
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return None
        unread_bytes(fd)
    except OSError:
        return None
    return PipeAcks(fd, hangup)


class PipeAcks:
    """The messages written into one pipe and not FINed yet, in write order."""

    def __init__(
        self, fd: int, hangup: select.poll, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._fd = fd
        self._hangup = hangup
        self._clock = clock
        self.written = 0  # bytes written into the pipe
        self._owed: deque[tuple[int, list[Message]]] = deque()  # (end offset, batch)
        self._owed_count = 0
        self._taken = 0  # bytes the reader had taken at the last check
        self._taken_at = clock()  # when that changed
        self._readers: list[int] = []  # their threads' /proc/PID/task/TID/wchan, open
        self._searched_at = float("-inf")

    @property
    def owed(self) -> int:
        """Messages written and not yet handed out to FIN."""
        return self._owed_count

    def wrote(self, size: int, batch: list[Message]) -> None:
        """``batch`` was written into the pipe as ``size`` bytes."""
        self.written += size
        self._owed.append((self.written, batch))
        self._owed_count += len(batch)

    def reader_gone(self) -> bool:
        return bool(self._hangup.poll(0))

    def handled(self) -> list[Message]:
        """The messages the reader has handled since the last call (to FIN), by the rules
        in the module doc; none once the reader is gone."""
        if not self._owed:
            return []
        try:
            taken = self.written - unread_bytes(self._fd)
        except OSError:
            return []
        now = self._clock()
        drained = taken == self.written
        if drained and self._reader_waiting(now):
            safe = taken  # it took everything and is back for more (so it is there)
        elif taken > self._taken:
            safe = self._taken  # it came back for more: what it had before is handled
        elif drained and now - self._taken_at >= GRACE and not self.reader_gone():
            safe = taken
        else:
            return []
        if taken != self._taken:
            self._taken, self._taken_at = taken, now
        done: list[Message] = []
        owed = self._owed
        while owed and owed[0][0] <= safe:
            done.extend(owed.popleft()[1])
        self._owed_count -= len(done)
        return done

    def _reader_waiting(self, now: float) -> bool:
        """Some reader of the pipe sleeps waiting for more (see the module doc). The
        readers are looked for again (at most once a :data:`READER_SEARCH_INTERVAL`)
        while none is: ``(sleep 1; wc -l)`` reads in a process that starts later."""
        if any(waiting_for_input(wchan) for wchan in self._readers):
            return True
        if now - self._searched_at < READER_SEARCH_INTERVAL:
            return False
        self._searched_at = now
        self.close()
        self._readers = [wchan for pid in pipe_readers(self._fd) for wchan in open_wchans(pid)]
        return any(waiting_for_input(wchan) for wchan in self._readers)

    def close(self) -> None:
        """Close the ``/proc`` files held open."""
        for wchan in self._readers:
            os.close(wchan)
        self._readers = []

    def unread(self) -> int:
        """Messages whose bytes have not all been taken by the reader."""
        try:
            taken = self.written - unread_bytes(self._fd)
        except OSError:
            taken = 0
        return sum(len(batch) for end, batch in self._owed if end > taken)

    def forget_answered(self) -> None:
        """Drop the owed messages something else has answered (a consumer closing on a
        failed start gives back every message a handler kept): nothing may FIN them now."""
        owed: deque[tuple[int, list[Message]]] = deque()
        for end, batch in self._owed:
            owed.append((end, [msg for msg in batch if msg.outcome is None]))
        self._owed = owed
        self._owed_count = sum(len(batch) for _, batch in owed)

    def take_all(self) -> list[Message]:
        """Every owed message (to give back), forgetting them."""
        out = [msg for _, batch in self._owed for msg in batch]
        self._owed.clear()
        self._owed_count = 0
        return out
