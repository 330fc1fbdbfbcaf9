"""A scripted fake nsqlookupd that answers each endpoint with the body a test chooses.

A fake, not a real lookupd, because what is under test is an answer no real lookupd can be
made to give: JSON of the wrong shape (``{"producers": 5}``, a producer whose
``tcp_port`` is 99999, a topic list that is a string or holds ``null``). The real
nsqlookupd of either family builds its answers from typed Go structs, so no command line
flag, registration or state makes it send those. Endpoints not scripted answer as an
nsqlookupd answers a path it does not route (HTTP 404, ``{"message": "NOT_FOUND"}``), and
``/ping`` answers ``OK`` as both families do. A POST to a scripted path (an admin action
on the redesign's lookupd leader) answers ``OK``, as a lookupd does when it did it.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit


def _body(value: Any) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


@contextmanager
def odd_lookupd(answers: Mapping[str, Any]) -> Iterator[str]:
    """Serve ``answers`` (path → JSON value, or bytes sent as they are) on loopback;
    yields the ``HOST:PORT`` to pass as ``--lookupd``. ``answers`` is read at each
    request, so a test may add one naming the fake's own address once it is known."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            scripted = {"/ping": b"OK", **answers}
            if path in scripted:
                status, body = 200, _body(scripted[path])
            else:
                status, body = 404, b'{"message":"NOT_FOUND"}'
            self._send(status, body)

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if path in answers:
                self._send(200, b"OK")
            else:
                self._send(404, b'{"message":"NOT_FOUND"}')

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
