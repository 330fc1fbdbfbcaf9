"""A tail whose reader stalls: its standard output a socket nobody reads."""

from __future__ import annotations

import fcntl
import signal
import socket
import struct
import subprocess
import termios
from collections.abc import Sequence

from tests.helpers.cli import NSQCTL, clean_env
from tests.helpers.wait import eventually


def unread(sock: socket.socket) -> int:
    """Bytes waiting in ``sock`` (FIONREAD)."""
    return int(struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0" * 4))[0])


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
            last = [-1]

            def stalled() -> bool:  # the socket full: the same bytes at two looks
                now = unread(ours)
                held = now > 0 and now == last[0]
                last[0] = now
                return held

            eventually(stalled, 30, "the tail waiting on the full socket")
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
