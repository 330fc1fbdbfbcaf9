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
from pathlib import Path

import pytest

from tests.helpers.cli import run_cli

#: the lookup client's deadline for one request (LookupClient's default timeout)
LOOKUP_DEADLINE = 5.0
#: start-up of the console script and the event loop, on a busy machine
SLACK = 4.0


class _Html404(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body><h1>404 Not Found</h1></body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Html404)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts every connection and never writes a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


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
    web_server: str, args: list[str], tmp_path: Path
) -> None:
    extra = ["--out", str(tmp_path / "out")] if args[0] == "archive" else []
    started = time.monotonic()
    proc = run_cli([*args, *extra, "--lookupd", web_server], timeout=60)
    took = time.monotonic() - started
    err = proc.stderr.decode()
    assert proc.returncode == 1, (proc.returncode, err, proc.stdout)
    line = _one_error_line(err)
    assert web_server in line and "not an nsqlookupd" in line, line
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
    silent_server: str, args: list[str], tmp_path: Path
) -> None:
    extra = ["--out", str(tmp_path / "out")] if args[0] == "archive" else []
    started = time.monotonic()
    proc = run_cli([*args, *extra, "--lookupd", silent_server], timeout=60)
    took = time.monotonic() - started
    err = proc.stderr.decode()
    assert proc.returncode == 1, (proc.returncode, err)
    line = _one_error_line(err)
    assert silent_server in line and f"no answer within {LOOKUP_DEADLINE:g}s" in line, line
    assert took < LOOKUP_DEADLINE + SLACK, took


def test_tail_at_a_silent_nsqd_says_so_within_its_connect_timeout(silent_server: str) -> None:
    """An address that accepts and never answers the handshake, given as --nsqd: the
    connect timeout (5 s) counts from the start, not from after the handshake's own
    deadline (it said "within 5s" after 15 s)."""
    started = time.monotonic()
    out = run_cli(["tail", "t", "--nsqd", silent_server, "-n", "1"], timeout=60)
    took = time.monotonic() - started
    lines = out.stderr.decode().strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1, out.stderr
    assert "within 5s" in lines[0] and silent_server in lines[0], lines[0]
    assert took < 10, took  # the 5 s timeout, start-up, and a loaded machine's slack
