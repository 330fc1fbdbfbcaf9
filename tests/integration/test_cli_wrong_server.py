"""A ``--lookupd`` address where something other than nsqlookupd answers: one line naming
the address and saying it is not an nsqlookupd, exit 1, within the lookup deadline.

The servers here are real ones of another kind (Python's ``http.server`` answering an HTML
404, and a socket that accepts and never answers); that is the mistake under test.
"""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.helpers.cli import run_cli

#: the lookup client's deadline for one request (LookupClient's default timeout)
LOOKUP_DEADLINE = 5.0
#: what the command does after its deadline (the error line, exit), on a busy machine; a
#: second deadline (a retry) would exceed it
SLACK = 4.0


@dataclass
class Listener:
    """A server of the wrong kind on loopback, and when the command first reached it.

    Durations are measured from that first contact, not from the command's start: the
    interpreter's start-up, seconds on a loaded machine, is not what the deadline bounds."""

    address: str
    contacts: list[float] = field(default_factory=list)

    def since_first_contact(self) -> float:
        assert self.contacts, f"nothing ever connected to {self.address}"
        return time.monotonic() - self.contacts[0]


class _Html404(http.server.BaseHTTPRequestHandler):
    listener: Listener

    def do_GET(self) -> None:
        self.listener.contacts.append(time.monotonic())
        body = b"<html><body><h1>404 Not Found</h1></body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web_server() -> Iterator[Listener]:
    listener = Listener("")
    handler = type("Html404", (_Html404,), {"listener": listener})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    listener.address = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent_server() -> Iterator[Listener]:
    """Accepts every connection and never writes a byte."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    listener = Listener(f"127.0.0.1:{sock.getsockname()[1]}")
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            listener.contacts.append(time.monotonic())
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        sock.close()


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("nsqctl: error: "), err
    assert "Traceback" not in err
    return lines[0]


#: archive needs the archive extra (pyarrow): it runs in the spark step, which has it
NEEDS_PYARROW = pytest.mark.spark

WEB_SERVER_COMMANDS = [
    pytest.param(["tail", "t", "-n", "1"], id="tail"),
    pytest.param(["archive", "t", "--exit-when-idle", "1"], id="archive", marks=NEEDS_PYARROW),
    pytest.param(["version"], id="version"),
    pytest.param(["version", "--json"], id="version --json"),
]


@pytest.mark.parametrize("args", WEB_SERVER_COMMANDS)
def test_web_server_as_lookupd_is_named_as_not_an_nsqlookupd(
    web_server: Listener, args: list[str], tmp_path: Path
) -> None:
    extra = ["--out", str(tmp_path / "out")] if args[0] == "archive" else []
    proc = run_cli([*args, *extra, "--lookupd", web_server.address], timeout=60)
    took = web_server.since_first_contact()
    err = proc.stderr.decode()
    assert proc.returncode == 1, (proc.returncode, err, proc.stdout)
    line = _one_error_line(err)
    assert web_server.address in line and "not an nsqlookupd" in line, line
    assert took < LOOKUP_DEADLINE + SLACK, took
    assert not any((tmp_path / "out").rglob("*.parquet"))


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["tail", "t", "-n", "1"], id="tail"),
        pytest.param(["archive", "t"], id="archive", marks=NEEDS_PYARROW),
    ],
)
def test_silent_lookupd_fails_within_the_lookup_deadline(
    silent_server: Listener, args: list[str], tmp_path: Path
) -> None:
    extra = ["--out", str(tmp_path / "out")] if args[0] == "archive" else []
    proc = run_cli([*args, *extra, "--lookupd", silent_server.address], timeout=60)
    took = silent_server.since_first_contact()
    err = proc.stderr.decode()
    assert proc.returncode == 1, (proc.returncode, err)
    line = _one_error_line(err)
    assert silent_server.address in line, line
    assert f"no answer within {LOOKUP_DEADLINE:g}s" in line, line
    assert took < LOOKUP_DEADLINE + SLACK, took


def test_tail_at_a_silent_nsqd_says_so_within_its_connect_timeout(
    silent_server: Listener,
) -> None:
    """An address that accepts and never answers the handshake, given as --nsqd: the
    connect timeout (5 s) counts from the start, not from after the handshake's own
    deadline (it said "within 5s" after 15 s)."""
    out = run_cli(["tail", "t", "--nsqd", silent_server.address, "-n", "1"], timeout=60)
    took = silent_server.since_first_contact()
    lines = out.stderr.decode().strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1, out.stderr
    assert "within 5s" in lines[0] and silent_server.address in lines[0], lines[0]
    assert took < 10, took  # the 5 s timeout and a loaded machine's slack, not 15 s
