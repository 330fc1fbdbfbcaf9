"""When a message written into a pipe counts as handled by its reader: on a real pipe
(``os.pipe``), with a clock the test moves. The reader end is this process's own, so no
other process is found reading it: the rules seen here are "came back for more" and the
grace period."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

from nsqctl.cli.output.pipe_acks import GRACE, PipeAcks, hangup_poll
from tests.helpers.wait import eventually


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        with contextlib.suppress(OSError):
            os.close(fd)


def _acks(w: int, clock: Clock) -> PipeAcks:
    hangup = hangup_poll(w)
    assert hangup is not None
    return PipeAcks(w, hangup, clock)


def _written(msgs: list[Any]) -> list[object]:
    """Messages ``acks`` gave back: the strings this test wrote in their place."""
    return list(msgs)


def _write(acks: PipeAcks, w: int, msgs: list[Any]) -> None:
    data = b"".join(b"%s\n" % m.encode() for m in msgs)
    os.write(w, data)
    acks.wrote(len(data), msgs)


def test_taken_bytes_count_once_the_reader_comes_back_or_stays(pipe: tuple[int, int]) -> None:
    r, w = pipe
    clock = Clock()
    acks = _acks(w, clock)
    _write(acks, w, ["a", "b"])
    _write(acks, w, ["c"])
    assert acks.handled() == []  # nothing taken yet
    os.read(r, 4)  # a and b: taken, not yet known to be handled
    assert acks.handled() == []
    os.read(r, 2)  # it came back for more: a and b were handled
    assert _written(acks.handled()) == ["a", "b"]
    assert acks.handled() == []  # c taken, everything taken: the grace period runs
    clock.now += GRACE
    assert _written(acks.handled()) == ["c"]
    assert acks.owed == 0


def test_what_a_reader_that_went_away_took_is_given_back(pipe: tuple[int, int]) -> None:
    r, w = pipe
    clock = Clock()
    acks = _acks(w, clock)
    _write(acks, w, ["a", "b", "c"])
    os.read(r, 6)  # took everything, as head does, then goes
    os.close(r)
    clock.now += GRACE
    assert acks.reader_gone()
    assert acks.handled() == []
    assert _written(acks.take_all()) == ["a", "b", "c"]
    assert acks.owed == 0


def test_a_reader_thread_waiting_in_another_process_counts_as_handled() -> None:
    """The reading thread is not the process's main thread (which sleeps elsewhere), as in a
    program reading ``subprocess.Popen(...).stdout`` on a thread: its wait for more in a
    read of the pipe shows it handled what it took, without the grace period (the clock
    here never moves)."""
    import subprocess
    import sys

    r, w = os.pipe()
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys, threading, time\n"
            "fd = int(sys.argv[1])\n"
            "threading.Thread(target=lambda: [os.read(fd, 65536) for _ in iter(int, 1)],"
            " daemon=True).start()\n"
            "time.sleep(60)\n",
            str(r),
        ],
        pass_fds=[r],
    )
    os.close(r)
    try:
        acks = _acks(w, Clock())
        _write(acks, w, ["a", "b"])
        handled: list[Any] = []

        def taken() -> bool:
            nonlocal handled
            handled = acks.handled()
            return bool(handled)

        eventually(taken, 20, "the reader to take both messages", step=0.02)
        assert handled == ["a", "b"]
        acks.close()
    finally:
        reader.kill()
        reader.wait()
        os.close(w)


class _Answered:
    """A stand-in message with the one attribute forget_answered reads."""

    def __init__(self, outcome: str | None) -> None:
        self.outcome = outcome


def test_messages_answered_elsewhere_are_no_longer_owed(pipe: tuple[int, int]) -> None:
    """A consumer closing on a failed start gives back what tail kept, owed ones too:
    the pipe must not count them (a later FIN of them would raise)."""
    _, w = pipe
    acks = _acks(w, Clock())
    given_back, open_ = _Answered("REQ"), _Answered(None)
    os.write(w, b"a\nb\n")
    acks.wrote(4, [given_back, open_])  # type: ignore[list-item]
    acks.forget_answered()
    assert acks.owed == 1 and acks.take_all() == [open_]  # type: ignore[comparison-overlap]
