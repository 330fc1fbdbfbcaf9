"""``nsqctl sandbox up`` / ``status`` at 80 columns: every address whole, no value wrapped
over several lines; the sandbox directory and log paths on lines of their own; a
SIGSTOPped node shown as stopped, not up. Real
servers (original family) in a temporary directory, stopped by ``sandbox down``."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.helpers.cli import clean_env, run_cli

pytestmark = pytest.mark.original


def test_sandbox_tables_read_at_80_columns(tmp_path: Path, original_bins: Path) -> None:
    directory = tmp_path / "a-sandbox-directory-with-a-long-name" / "sandbox"
    env = clean_env({"COLUMNS": "80", "NSQCTL_SERVER_CACHE": str(original_bins.parents[1])})
    up = run_cli(["sandbox", "up", "--nsqd", "2", "--dir", str(directory)], env=env)
    try:
        assert up.returncode == 0, up.stderr
        status = run_cli(["sandbox", "status", "--dir", str(directory)], env=env)
        assert status.returncode == 0, status.stderr
        state = json.loads(
            run_cli(["sandbox", "status", "--dir", str(directory), "--json"], env=env).stdout
        )
        for out in (up.stdout.decode(), status.stdout.decode()):
            lines = out.splitlines()
            for node in state["nodes"]:
                row = next(line for line in lines if f" {node['name']} " in line)
                assert str(node["pid"]) in row
                assert f"127.0.0.1:{node['http_port']}" in row
                if node.get("tcp_port"):
                    assert f"127.0.0.1:{node['tcp_port']}" in row
            table = [line for line in lines if not line.startswith(("directory", "logs", "export"))]
            assert all(len(line) <= 80 for line in table), out
            assert f"directory  {directory}" in lines
            assert f"logs       {directory / 'logs' / '<node>.log'}" in lines
        # a SIGSTOPped nsqd is alive but answers nothing: shown as stopped, not up
        hung = next(n for n in state["nodes"] if n["name"].startswith("nsqd"))
        os.kill(hung["pid"], signal.SIGSTOP)
        try:
            shown = run_cli(["sandbox", "status", "--dir", str(directory)], env=env)
            said = json.loads(
                run_cli(["sandbox", "status", "--dir", str(directory), "--json"], env=env).stdout
            )
        finally:
            os.kill(hung["pid"], signal.SIGCONT)
        row = next(line for line in shown.stdout.decode().splitlines() if str(hung["pid"]) in line)
        assert "stopped" in row and " up " not in row, row
        assert said["stopped"][hung["name"]] is True and said["running"][hung["name"]] is True
        assert not any(v for name, v in said["stopped"].items() if name != hung["name"])
    finally:
        down = run_cli(["sandbox", "down", "--dir", str(directory)], env=env)
        assert down.returncode == 0, down.stderr
