"""write_fully on a descriptor someone else left non-blocking: a full pipe answers EAGAIN,
and the write must wait for the reader rather than fail with part of a line out; and a
write waiting on a reader that stalled gives up when its WriteStop is set."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import select
import struct
import tempfile
import termios
import threading

import pytest

from nsqctl.cli.output.fd import WriteStop, write_fully
from tests.helpers.wait import eventually


def test_a_full_non_blocking_pipe_gets_every_byte_once_the_reader_reads() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    data = bytes(range(256)) * 4096  # 1 MiB: far more than a pipe holds
    got = bytearray()

    def reader() -> None:
        while chunk := os.read(read_end, 65536):
            got.extend(chunk)

    failure: list[BaseException] = []

    def writer() -> None:
        try:
            write_fully(io.BytesIO(), write_end, data)
        except BaseException as err:  # reported by the assertion below
            failure.append(err)
        finally:
            os.close(write_end)

    # The writer fills the pipe before anyone reads: its first writes meet EAGAIN.
    write_thread = threading.Thread(target=writer)
    write_thread.start()
    read_thread = threading.Thread(target=reader)
    read_thread.start()
    write_thread.join(30)
    read_thread.join(30)
    os.close(read_end)
    assert not failure, failure
    assert bytes(got) == data


def _writing(
    fd: int, data: bytes, stop: WriteStop
) -> tuple[threading.Thread, list[int | BaseException]]:
    """A thread started writing ``data`` to ``fd`` under ``stop``, and where what the
    write returned (or raised) goes."""
    outcome: list[int | BaseException] = []

    def writer() -> None:
        try:
            outcome.append(write_fully(io.BytesIO(), fd, data, stop))
        except BaseException as err:  # reported by the caller's assertion
            outcome.append(err)

    thread = threading.Thread(target=writer)
    thread.start()
    return thread, outcome


def test_a_write_to_a_stalled_reader_gives_up_at_the_stop_after_whole_lines() -> None:
    """Nobody reads the pipe: the write fills it and waits, until the stop (a signal,
    from another thread here) ends the wait. What went out is whole lines (each write
    after the wait cut at a line's end), and the write says how many bytes."""
    read_end, write_end = os.pipe()
    line = b"x" * 99 + b"\n"
    data = line * 4000  # 400 kB: far more than a pipe holds
    stop = WriteStop(write_end)
    assert stop.fileno is not None
    thread, outcome = _writing(write_end, data, stop)

    def unread() -> int:
        return int(struct.unpack("i", fcntl.ioctl(read_end, termios.FIONREAD, b"\0" * 4))[0])

    try:
        last = [-1]

        def full() -> bool:  # the same bytes in the pipe at two looks
            now, held = unread(), unread() == last[0]
            last[0] = now
            return held and now > 0

        eventually(full, 10, "the pipe full")
        assert thread.is_alive()
        stop.set()
        thread.join(10)
        assert not thread.is_alive(), "the stop did not end the wait"
        (written,) = outcome
        assert isinstance(written, int), written
        assert 0 < written == unread() < len(data) and written % len(line) == 0
    finally:
        if thread.is_alive():
            os.read(read_end, len(data))  # let it finish rather than hang the run
        for end in (read_end, write_end):
            os.close(end)


def test_a_file_is_never_watched() -> None:
    """A regular file's writes never wait on a reader: no stop pipe, no poll per write."""
    with tempfile.TemporaryFile() as f:
        assert WriteStop(f.fileno()).fileno is None


class _RacedStop(WriteStop):
    """A stop whose ``race``-th wait that finds the pipe taking bytes is beaten to them:
    another writer of the shared descriptor fills the pipe between the poll and the
    write, so the write meets EAGAIN right after poll said it would not. That race cannot
    be forced from outside (the other writer would have to run exactly between two calls
    of the writing thread), so the other writer runs here, inside the wait."""

    def __init__(self, fd: int, race: int) -> None:
        super().__init__(fd)
        self._fd_written = fd
        self._race = race
        self.raced = threading.Event()

    def wait(self) -> bool:
        takes = super().wait()
        if takes:
            self._race -= 1
            if self._race == 0:
                with contextlib.suppress(BlockingIOError):
                    while True:  # the other writer's bytes, until the pipe is full
                        os.write(self._fd_written, b"o" * 512)
                self.raced.set()
        return takes


@pytest.mark.parametrize(
    ("race", "expected"),
    [(1, 0), (2, select.PIPE_BUF)],
    ids=["the-first-write", "after-a-whole-line"],
)
def test_a_stop_ends_a_write_that_met_eagain_after_poll_said_the_pipe_takes_bytes(
    race: int, expected: int
) -> None:
    """A non-blocking pipe shared with another writer, and nobody reading: the other
    writer fills it between our poll and our write. The write then waits again under the
    stop (not in a wait the stop cannot end), and the stop, set from another thread,
    ends it promptly with the bytes written so far: none when the race was at the first
    line, the whole first line when it was at the second."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    first, second = b"a" * (select.PIPE_BUF - 1) + b"\n", b"b" * (select.PIPE_BUF - 1) + b"\n"
    data = first + second if race == 2 else first
    stop = _RacedStop(write_end, race)
    thread, outcome = _writing(write_end, data, stop)
    got = b""
    try:
        assert stop.raced.wait(10), "the other writer never ran"
        stop.set()
        thread.join(5)
        assert not thread.is_alive(), "the stop did not end the write that met EAGAIN"
        assert outcome == [expected]
        os.set_blocking(read_end, False)
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(read_end, 65536):
                got += chunk
        assert (got.count(b"a"), got.count(b"b")) == (expected and select.PIPE_BUF - 1, 0)
    finally:
        if thread.is_alive():  # the old wait: reading lets it write and end
            os.read(read_end, 65536)
            thread.join(10)
        for end in (read_end, write_end):
            os.close(end)
