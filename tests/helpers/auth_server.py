"""A tiny HTTP auth server for nsqd's ``--auth-http-address``, run in a thread.

nsqd (internal/auth/authorizations.go, v1.3.0) sends
``GET /auth?remote_ip=...&tls=true|false&secret=...&common_name=...`` and, on HTTP 200,
decodes ``{"ttl", "identity", "identity_url", "authorizations": [{"topic",
"channels", "permissions"}]}``; it rejects a TTL <= 0, permissions other than
"subscribe"/"publish" and regexps that do not compile. Anything but 200 makes nsqd
answer the client ``E_AUTH_FAILED``. (nsqd's HTTP client follows a 403 whose JSON body
names an ``https_port``; ours is plain text, so a 403 is simply a failure.)

Only ever listens on 127.0.0.1.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["AuthServer"]


@dataclass
class AuthServer:
    """Grants publish + subscribe on everything to ``good_secret``; 403 otherwise.

    Use as a context manager (or call :meth:`start` / :meth:`stop`). ``queries`` holds
    every query nsqd sent (one dict per request, single values).
    """

    good_secret: str
    identity: str = "nsqctl-test-identity"
    identity_url: str = "https://example.invalid/who"
    ttl: int = 3600
    queries: list[dict[str, str]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def address(self) -> str:
        assert self._server is not None, "start() the auth server first"
        host, port = self._server.server_address[:2]
        assert isinstance(host, str)  # an AF_INET server's address
        return f"{host}:{port}"

    def state_for(self, secret: str) -> dict[str, Any] | None:
        """The JSON nsqd expects for ``secret``, or None for a refused one."""
        if secret != self.good_secret:
            return None
        return {
            "ttl": self.ttl,
            "identity": self.identity,
            "identity_url": self.identity_url,
            "authorizations": [
                {"permissions": ["subscribe", "publish"], "topic": ".*", "channels": [".*"]}
            ],
        }

    def start(self) -> AuthServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
                with owner._lock:
                    owner.queries.append(query)
                state = owner.state_for(query.get("secret", "")) if url.path == "/auth" else None
                if state is None:
                    body, status, ctype = b"forbidden", 403, "text/plain"
                else:
                    body, status, ctype = json.dumps(state).encode(), 200, "application/json"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="nsqd-auth-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> AuthServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
