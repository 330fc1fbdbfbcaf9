"""A tail whose reader stalls: its standard output a socket nobody reads."""

from __future__ import annotations

import fcntl
import signal
import socket
import struct
import subprocess
import termios
from collections.abc import Callable, Sequence

from tests.helpers.cli import NSQCTL, clean_env
from tests.helpers.wait import eventually


def unread(end: socket.socket | int) -> int:
    """Bytes waiting in ``end``, a socket or a pipe's read end (FIONREAD)."""
    fd = end if isinstance(end, int) else end.fileno()
    return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0])


def stalled(end: socket.socket | int) -> Callable[[], bool]:
    """A check for :func:`eventually`: the writer into ``end`` waits on it, full (the
    same bytes unread at two looks)."""
    last = [-1]

    def check() -> bool:
        now = unread(end)
        held = now > 0 and now == last[0]
        last[0] = now
        return held

    return check


def interrupted_while_stalled(args: Sequence[str]) -> list[bytes]:
    """``nsqctl ARGS`` (a tail) into a socket nobody reads (as ``| less`` scrolled back, a
    stopped reader); once it waits on the full socket, SIGINT: it must end, exit 0, no
    traceback. The lines it printed."""
    ours, theirs = socket.socketpair()
    with ours:
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # full far sooner
        tail = subprocess.Popen(
            [NSQCTL, *args], stdout=theirs.fileno(), stderr=subprocess.PIPE, env=clean_env()
        )
        theirs.close()
        try:
            eventually(stalled(ours), 30, "the tail waiting on the full socket")
            assert tail.poll() is None
            tail.send_signal(signal.SIGINT)
            _, err = tail.communicate(timeout=30)  # a hang: the stop waited for the reader
        finally:
            if tail.poll() is None:
                tail.kill()
                tail.wait()
        printed = bytearray()
        while chunk := ours.recv(65536):
            printed.extend(chunk)
    stderr = err.decode()
    assert tail.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]
    return bytes(printed).splitlines()
