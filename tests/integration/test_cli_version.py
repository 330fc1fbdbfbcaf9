"""``nsqctl version``: the client version and every reachable server's, never a traceback."""

from __future__ import annotations

import json
import socket
from typing import Any

from nsqctl import __version__
from nsqctl.errors import ConfigError
from nsqctl.servers.cluster import Cluster
from tests.helpers.cli import cli, invoke


def run(*args: str) -> Any:
    return invoke("version", *args)


def dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_no_cluster_prints_the_client_version_and_a_hint() -> None:
    result = run()
    assert result.exit_code == 0
    assert result.stdout == f"nsqctl {__version__}\n"
    assert "--lookupd" in result.stderr
    payload = json.loads(run("--json").stdout)
    assert payload["client"] == {"name": "nsqctl", "version": __version__}
    assert payload["servers"] == [] and "--lookupd" in payload["hint"]
    assert payload["complete"] is True  # no server was asked, so none went unread


def test_lists_lookupd_and_every_registered_nsqd(original_cluster: Cluster) -> None:
    result = run("--json", "--lookupd", original_cluster.lookupd_http[0])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["complete"] is True
    servers = json.loads(result.stdout)["servers"]
    assert [(s["role"], s["address"]) for s in servers if s["role"] == "nsqlookupd"] == [
        ("nsqlookupd", original_cluster.lookupd_http[0])
    ]
    assert {s["address"] for s in servers if s["role"] == "nsqd"} == set(original_cluster.nsqd_http)
    assert all(s["reachable"] and s["family"] == "original" for s in servers)
    assert all(s["version"].startswith("1.") for s in servers)


def test_unreachable_servers_are_listed_not_fatal(original_cluster: Cluster) -> None:
    dead_lookupd, dead_nsqd = dead_address(), dead_address()
    result = run(
        "--lookupd",
        dead_lookupd,
        "--nsqd-http",
        original_cluster.nsqd_http[0],
        "--nsqd-http",
        dead_nsqd,
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"nsqctl {__version__}"
    assert any(dead_lookupd in line and "unreachable" in line for line in lines)
    assert any(dead_nsqd in line and "unreachable" in line for line in lines)
    assert any(original_cluster.nsqd_http[0] in line and "(original)" in line for line in lines)
    # --json: the same list, said to be incomplete, as every view that could not see it all
    one_dead = run("--json", "--nsqd-http", original_cluster.nsqd_http[0], "--nsqd-http", dead_nsqd)
    assert one_dead.exit_code == 0, one_dead.output
    payload = json.loads(one_dead.stdout)
    assert payload["complete"] is False
    assert [s["reachable"] for s in payload["servers"]] == [True, False]


def test_bad_address_is_a_usage_error() -> None:
    assert isinstance(run("--lookupd", "no-port").exception, ConfigError)


def test_real_process_never_prints_a_traceback() -> None:
    proc = cli("version", "--lookupd", dead_address())
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "unreachable" in proc.stdout
