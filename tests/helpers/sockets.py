"""TCP connections read from /proc (Linux): whether a client really closed its sockets,
what a stopped server's clients sent it, seen from outside the program under test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ESTABLISHED = "01"


@dataclass(frozen=True)
class TcpRow:
    """One IPv4 TCP socket of the machine (a row of /proc/net/tcp)."""

    local_port: int
    remote_port: int
    state: str  # the kernel's hex state: ESTABLISHED is "01"
    receive_queue: int  # bytes received and not yet read
    inode: str


def tcp_table() -> Iterator[TcpRow]:
    with open("/proc/net/tcp") as table:
        next(table)
        for row in table:
            fields = row.split()
            yield TcpRow(
                local_port=int(fields[1].rsplit(":", 1)[1], 16),
                remote_port=int(fields[2].rsplit(":", 1)[1], 16),
                state=fields[3],
                receive_queue=int(fields[4].split(":")[1], 16),
                inode=fields[9],
            )


def _socket_inodes() -> set[str]:
    inodes: set[str] = set()
    fds = Path("/proc/self/fd")
    for fd in os.listdir(fds):
        try:
            target = os.readlink(fds / fd)
        except OSError:  # closed while listed
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def connections_to(port: int) -> int:
    """How many of this process's established TCP connections (IPv4) have ``port`` as
    their remote port."""
    mine = _socket_inodes()
    return sum(
        1
        for row in tcp_table()
        if row.state == ESTABLISHED and row.remote_port == port and row.inode in mine
    )
