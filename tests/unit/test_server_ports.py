"""Ports for local clusters: handed out below the kernel's ephemeral range, in turn across
processes, skipping ports something already holds."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from nsqctl.servers import process


def _ephemeral_floor() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A counter file of this test's own, so other test workers' clusters do not move it."""
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    return tmp_path


def test_ports_come_from_below_the_ephemeral_range_and_never_twice(counter: Path) -> None:
    first, second = process.free_ports(4), process.free_ports(4)
    floor = _ephemeral_floor()
    assert all(process.POOL_START <= port < floor for port in first + second)
    assert len(set(first + second)) == 8


def test_a_held_port_is_skipped(counter: Path) -> None:
    (probe,) = process.free_ports(1)
    holder = socket.socket()
    holder.bind(("127.0.0.1", probe + 1))  # the next port the pool would hand out
    holder.listen()
    try:
        ports = process.free_ports(2)
    finally:
        holder.close()
    assert probe + 1 not in ports and ports == [probe + 2, probe + 3]


def test_concurrent_processes_get_disjoint_ports(counter: Path) -> None:
    """Two test workers starting clusters at once share the counter file's lock."""
    code = (
        "import sys, tempfile\n"
        "from nsqctl.servers import process\n"
        f"tempfile.tempdir = {str(counter)!r}\n"
        "print(*[p for _ in range(20) for p in process.free_ports(5)])\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) for _ in range(3)
    ]
    outputs = [p.communicate(timeout=60)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    ports = [int(port) for out in outputs for port in out]
    assert len(ports) == 300 and len(set(ports)) == 300


def test_wraps_round_to_the_start_of_the_pool(counter: Path) -> None:
    floor = _ephemeral_floor()
    (counter / f"nsqctl-next-port-{os.getuid()}").write_text(str(floor - 1))
    order = [floor - 1, *range(process.POOL_START, process.POOL_START + 10)]
    expected = [port for port in order if not process.port_in_use(port)][:2]
    assert process.free_ports(2) == expected
