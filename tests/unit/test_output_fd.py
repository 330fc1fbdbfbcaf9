"""write_fully on a descriptor someone else left non-blocking: a full pipe answers EAGAIN,
and the write must wait for the reader rather than fail with part of a line out; and a
write waiting on a reader that stalled gives up when its WriteStop is set."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import tempfile
import termios
import threading

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


def test_a_write_to_a_stalled_reader_gives_up_at_the_stop_after_whole_lines() -> None:
    """Nobody reads the pipe: the write fills it and waits, until the stop (a signal,
    from another thread here) ends the wait. What went out is whole lines (each write
    after the wait cut at a line's end), and the write says how many bytes."""
    read_end, write_end = os.pipe()
    line = b"x" * 99 + b"\n"
    data = line * 4000  # 400 kB: far more than a pipe holds
    stop = WriteStop(write_end)
    assert stop.fileno is not None
    outcome: list[int | BaseException] = []

    def writer() -> None:
        try:
            outcome.append(write_fully(io.BytesIO(), write_end, data, stop))
        except BaseException as err:  # reported by the assertion below
            outcome.append(err)

    def unread() -> int:
        return int(struct.unpack("i", fcntl.ioctl(read_end, termios.FIONREAD, b"\0" * 4))[0])

    thread = threading.Thread(target=writer)
    thread.start()
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
