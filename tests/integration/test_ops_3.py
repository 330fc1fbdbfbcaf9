"""Operations against real servers: the sandbox's start over ports a moment ago used."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from nsqctl.servers import process
from tests.helpers.cli import clean_env, run_cli
from tests.helpers.sockets import tcp_table

TIME_WAIT = "06"  # the kernel's hex state in /proc/net/tcp


@pytest.mark.original
def test_sandbox_up_again_on_the_same_ports_while_they_sit_in_time_wait(
    tmp_path: Path, original_bins: Path
) -> None:
    """`sandbox down` then `sandbox up --port-base` on the same base within the minute a
    stopped server's connections stay in TIME-WAIT: the real servers bind those ports, so
    the start must not refuse them as in use."""
    directory = tmp_path / "sandbox"
    env = clean_env({"NSQCTL_SERVER_CACHE": str(original_bins.parents[1])})
    base = process.free_ports(4)[0]
    up = ["sandbox", "up", "--port-base", str(base), "--dir", str(directory), "--json"]
    first = run_cli(up, env=env)
    try:
        assert first.returncode == 0, first.stderr
        (nsqd,) = [n for n in json.loads(first.stdout)["nodes"] if n["role"] == "nsqd"]
        port = nsqd["tcp_port"]
        # A client connected across the stop: nsqd closes its end first, so that end
        # (local port = nsqd's port) stays in TIME-WAIT once the client closes too.
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"  V2")
            down = run_cli(["sandbox", "down", "--dir", str(directory)], env=env)
            assert down.returncode == 0, down.stderr
            assert client.recv(1) == b""
        assert any(r.local_port == port and r.state == TIME_WAIT for r in tcp_table())
        again = run_cli(up, env=env)
        assert again.returncode == 0, again.stderr
        (restarted,) = [n for n in json.loads(again.stdout)["nodes"] if n["role"] == "nsqd"]
        assert restarted["tcp_port"] == port and restarted["pid"] != nsqd["pid"]
        with socket.create_connection(("127.0.0.1", port)):
            pass  # the new nsqd listens on the very port
    finally:
        run_cli(["sandbox", "down", "--dir", str(directory)], env=env)
