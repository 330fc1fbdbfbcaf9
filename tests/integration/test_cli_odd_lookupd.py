"""An nsqlookupd that answers JSON of the wrong shape: each command says so in one line
naming the lookupd and the field, exits non-zero, and shows no traceback and no garbage
(a topic called ``x`` from ``"topics": "x"``, an empty line from ``[null]``, a connect to
port 99999).

The lookupd is the scripted fake of :mod:`tests.helpers.odd_lookupd`: no real lookupd can
be made to send these bodies (see its docstring).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.cli import run_cli
from tests.helpers.odd_lookupd import odd_lookupd

NO_NODES: dict[str, list[object]] = {"producers": []}
PORT_99999 = {
    "channels": [],
    "producers": [{"broadcast_address": "127.0.0.1", "tcp_port": 99999, "http_port": 4151}],
}


def _one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


@pytest.mark.parametrize(
    ("answers", "args", "field"),
    [
        pytest.param(
            {"/nodes": {"producers": 5}}, ["node", "list"], "`$.producers`", id="node-list"
        ),
        pytest.param(
            {"/nodes": {"producers": 5}, "/info": {"version": "1.3.0"}},
            ["version"],
            "`$.producers`",
            id="version",
        ),
        pytest.param(
            {"/nodes": {"producers": 5}, "/info": {"version": "1.3.0"}},
            ["topic", "create", "t"],
            "`$.producers`",
            id="topic-create",
        ),
        pytest.param(
            {"/lookup": PORT_99999, "/nodes": NO_NODES},
            ["pub", "t", "hello"],
            "`$.producers[0].tcp_port`",
            id="pub-port-99999",
        ),
        pytest.param(
            {"/lookup": {"producers": 5}, "/nodes": NO_NODES},
            ["pub", "t", "hello"],
            "`$.producers`",
            id="pub-producers-5",
        ),
        pytest.param(
            {"/topics": {"topics": "x"}, "/nodes": NO_NODES},
            ["topic", "list"],
            "`$.topics`",
            id="topic-list-string",
        ),
        pytest.param(
            {"/topics": {"topics": [None]}, "/nodes": NO_NODES},
            ["topic", "list"],
            "`$.topics[0]`",
            id="topic-list-null",
        ),
    ],
)
def test_a_wrong_shape_is_one_line_naming_the_lookupd_and_the_field(
    answers: dict[str, Any], args: list[str], field: str
) -> None:
    with odd_lookupd(answers) as lookupd:
        proc = run_cli([*args, "--lookupd", lookupd])
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    line = _one_line(err)
    assert line.startswith("nsqctl: error: "), line
    assert f"nsqlookupd {lookupd} answered" in line and field in line, line
    assert proc.stdout.decode().strip() == ""  # no topic "x", no empty name listed


def test_check_reports_a_wrong_shape_as_unknown_naming_the_lookupd_and_the_field() -> None:
    """``check`` is a monitoring plugin: its one line goes to stdout, with the plugin
    convention's exit 3 (UNKNOWN: the cluster could not be judged)."""
    with odd_lookupd({"/nodes": {"producers": 5}}) as lookupd:
        proc = run_cli(["check", "--lookupd", lookupd])
    out = proc.stdout.decode()
    assert proc.returncode == 3, (out, proc.stderr.decode())
    line = _one_line(out)
    assert line.startswith("UNKNOWN: "), line
    assert f"nsqlookupd {lookupd} answered /nodes" in line and "`$.producers`" in line, line
    assert proc.stderr.decode().strip() == ""


def test_a_wrong_shape_from_the_redesign_leader_while_waiting_for_writes_is_one_line() -> None:
    """A redesign ``topic create`` waits on the lookupd leader's ``/lookup`` until every
    partition is writable; a ``partitions`` that is no object ends the wait with one line
    naming the leader and the field (it was a ``TypeError`` traceback)."""
    answers: dict[str, Any] = {
        "/nodes": {"producers": [PORT_99999["producers"][0] | {"tcp_port": 4150}]},
        "/lookup": {"channels": [], "producers": [], "partitions": 5},
        "/topic/create": "OK",
    }
    with odd_lookupd(answers) as lookupd:
        host, port = lookupd.split(":")
        answers["/listlookup"] = {
            "lookupdleader": {"ID": "l", "NodeIP": host, "HttpPort": port, "TcpPort": "1"},
            "lookupdnodes": [{"ID": "l", "NodeIP": host, "HttpPort": port, "TcpPort": "1"}],
        }
        proc = run_cli(["topic", "create", "t", "--wait", "5", "--lookupd", lookupd])
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    line = _one_line(err)
    assert line.startswith("nsqctl: error: "), line
    assert f"nsqlookupd {lookupd} answered /lookup" in line and "`$.partitions`" in line, line
