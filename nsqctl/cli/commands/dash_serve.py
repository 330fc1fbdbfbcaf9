"""``nsqctl dash --serve``: the dashboard for browsers, through textual-serve.

textual-serve (an aiohttp server) starts one dashboard process per browser session and
relays its screen over a websocket. What it leaves to us, for a dashboard that reads (and
may act on) a cluster:

- where it listens: loopback unless told otherwise, and beyond loopback only with a token
  (anyone who can reach the port would otherwise see, and with actions change, the cluster);
- the token: asked of every request, from ``?token=``, ``Authorization: Bearer`` or the
  cookie the first authorised page sets (the page's own script, websocket and static files
  are fetched without the query; the cookie holds a value derived from the token, never
  the token), compared in constant time;
- which pages may talk to it: a websocket is not bound by the same-origin rule, so any web
  page open in the operator's browser could drive a loopback dashboard; a request whose
  Origin is not the server itself is refused, and without a token so is one whose Host is not
  a loopback name (a DNS name rebound to 127.0.0.1 would otherwise pass the Origin check);
- logs: no access log (its request lines carry ``?token=``), one start line, which names the
  token's place, never the token.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import importlib.util
import ipaddress
import os
import shlex
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import typer

from nsqctl.cli.commands.dash_served import SERVED_ENV, ServedDash
from nsqctl.errors import ConfigError, TransportError

#: Where the token may come from besides ``--token`` (the safe place: not in argv).
TOKEN_ENV = "NSQCTL_DASH_TOKEN"
#: Shorter tokens are refused: the token is all that guards a non-loopback dashboard.
MIN_TOKEN_LENGTH = 16
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")


@dataclass(frozen=True)
class Bind:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def netloc(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def is_loopback(host: str) -> bool:
    """A loopback address, or ``localhost``. Any other name counts as beyond loopback
    (it is not resolved: what it resolves to may change after the check)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_bind(text: str) -> Bind:
    """``PORT`` (on 127.0.0.1), ``HOST:PORT`` or ``[IPV6]:PORT``."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.removeprefix("[").removesuffix("]")
    if sep and not host:
        raise ConfigError(f"--serve {text!r}: no host before ':': give PORT or HOST:PORT")
    if ":" in host and not text.strip().startswith("["):
        raise ConfigError(f"--serve {text!r}: write an IPv6 address in brackets, [::1]:8080")
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigError(f"--serve {text!r}: the port must be 0-65535: give PORT or HOST:PORT")
    return Bind(host, port)


def check_token(bind: Bind, token: str | None) -> None:
    """Refuse, before anything listens, a bind beyond loopback without a token, and a
    token too short to guard anything."""
    if token is None:
        if not bind.loopback:
            raise ConfigError(
                f"--serve {bind.netloc} is beyond loopback and needs a token: "
                f"set {TOKEN_ENV} (or --token), or serve on 127.0.0.1"
            )
        return
    if len(token) < MIN_TOKEN_LENGTH:
        raise ConfigError(
            f"the dashboard token is shorter than {MIN_TOKEN_LENGTH} characters: make one "
            "with `python -c 'import secrets; print(secrets.token_urlsafe())'`"
        )


def require_extra() -> None:
    # the archive extras' error, so callers meet one class for a missing extra; imported
    # here, as its package is not one `dash --help` should load
    from nsqctl.pipeline.engine import MissingExtraError

    if importlib.util.find_spec("textual_serve") is None:
        raise MissingExtraError(
            "dash --serve needs textual-serve, which is not installed: pip install 'nsqctl[serve]'"
        )


def session_value(token: str) -> str:
    """The cookie's value: derived from the token, so a stored cookie does not reveal it."""
    return hmac.new(token.encode(), b"nsqctl dash session", hashlib.sha256).hexdigest()


Handler = Callable[[Any], Awaitable[Any]]


def guard(bind: Bind, token: str | None) -> Any:
    """The aiohttp middleware that enforces Host, Origin and the token on every request."""
    from aiohttp import web

    session = session_value(token) if token else ""
    names = {bind.netloc.rpartition(":")[0].lower(), *LOOPBACK_NAMES}

    def port_of(request: web.Request) -> int:
        """The port that took the request (``--serve HOST:0`` binds one at random)."""
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        return int(sockname[1]) if sockname else bind.port

    def presented(request: web.Request) -> bool | None:
        """Whether the request carries the token (None: it carries nothing)."""
        assert token is not None
        given = request.query.get("token")
        auth = request.headers.get("Authorization", "")
        if given is None and auth[:7].lower() == "bearer ":
            given = auth[7:].strip()
        if given is not None:
            return hmac.compare_digest(given.encode(), token.encode())
        value = request.cookies.get(f"nsqctl_dash_{port_of(request)}")
        if value is not None:
            return hmac.compare_digest(value.encode(), session.encode())
        return None

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> Any:
        host = request.host.lower()
        if token is None and host not in {f"{n}:{port_of(request)}" for n in names}:
            raise web.HTTPForbidden(text="this dashboard answers to its loopback address only")
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc.lower() != host:
            raise web.HTTPForbidden(text="requests from other sites are refused")
        if token is None:
            return await handler(request)
        ok = presented(request)
        if ok is None:
            raise web.HTTPUnauthorized(
                text="this dashboard needs its token: ?token= or Authorization: Bearer",
                headers={"WWW-Authenticate": 'Bearer realm="nsqctl dash"'},
            )
        if not ok:
            raise web.HTTPForbidden(text="wrong token")
        response = await handler(request)
        if isinstance(response, web.StreamResponse) and not response.prepared:
            # per port: a cookie is per host, and other servers may listen on this one
            cookie = f"nsqctl_dash_{port_of(request)}"
            response.set_cookie(cookie, session, httponly=True, samesite="Strict", path="/")
        return response

    return middleware


def token_typed(ctx: typer.Context) -> bool:
    """Whether the command's ``--token`` came from its command line (not :data:`TOKEN_ENV`):
    a value equal to the environment's may still have been typed, and shows in ps. By
    name: typer runs on its own copy of click (0.26+) or on click."""
    source = ctx.get_parameter_source("token")
    return source is not None and source.name == "COMMANDLINE"


def token_warning(typed: bool) -> str | None:
    """The warning for a token given as ``--token`` (``typed``): the process list shows it
    to every user of the machine for as long as the dashboard serves."""
    if not typed:
        return None
    return (
        "nsqctl dash: warning: the --token value shows in the process list (ps) to every "
        f"user of this machine while the dashboard serves; set {TOKEN_ENV} instead"
    )


def public_url(bind: Bind, port: int, token: bool) -> str:
    """The URL the start line gives: with the token's place (never the token)."""
    host = bind.host
    if host in ("0.0.0.0", "::"):
        host = socket.gethostname()
    netloc = Bind(host, port).netloc
    return f"http://{netloc}/" + (f"?token=${TOKEN_ENV}" if token else "")


def serve(bind: Bind, token: str | None, spec: ServedDash) -> None:
    """Serve until interrupted. The token leaves the environment first: the session
    processes inherit it, and they have no use for it."""
    require_extra()
    os.environ.pop(TOKEN_ENV, None)
    os.environ[SERVED_ENV] = spec.to_env()
    command = shlex.join([sys.executable, "-m", "nsqctl.cli.commands.dash_served"])
    server = build_server(command, bind, token, spec.read_only)
    asyncio.run(server.run())


def build_server(command: str, bind: Bind, token: str | None, read_only: str | None) -> Any:
    # textual-serve (and aiohttp) load only for --serve, and only with the extra
    import aiohttp_jinja2
    from aiohttp import web
    from textual_serve.server import Server, to_int

    class DashServer(Server):
        async def _make_app(self) -> web.Application:
            app: web.Application = await super()._make_app()
            app.middlewares.append(guard(bind, token))
            return app

        async def on_startup(self, app: web.Application) -> None:
            """Quiet: the start line comes once the port is bound."""

        @aiohttp_jinja2.template("app_index.html")
        async def handle_index(self, request: web.Request) -> dict[str, Any]:
            # The page's URLs follow the address the browser used, not the bind
            # address (0.0.0.0 is no address a browser can open), and the scheme a
            # TLS-terminating proxy says it used (an https page may not open ws://).
            proto = request.headers.get("X-Forwarded-Proto", request.scheme).lower()
            http, ws = ("https", "wss") if proto == "https" else ("http", "ws")
            return {
                "font_size": to_int(request.query.get("fontsize", "16"), 16),
                "app_websocket_url": f"{ws}://{request.host}/ws",
                "config": {"static": {"url": f"{http}://{request.host}/static/"}},
                "application": {"name": self.title},
            }

        async def run(self) -> None:
            self.initialize_logging()
            runner = web.AppRunner(await self._make_app(), access_log=None)
            await runner.setup()
            try:
                site = web.TCPSite(runner, bind.host, bind.port)
                try:
                    await site.start()
                except OSError as exc:
                    raise TransportError(
                        f"cannot listen on {bind.netloc}: {exc.strerror or exc}"
                    ) from None
                port = runner.addresses[0][1]
                print(
                    f"nsqctl dash: serving on {public_url(bind, port, token is not None)}"
                    f" ({'read-only' if read_only else 'actions allowed'};"
                    " Ctrl+C stops)",
                    flush=True,
                )
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                await stop.wait()
            finally:
                with contextlib.suppress(Exception):
                    await runner.cleanup()

    return DashServer(command, host=bind.host, port=bind.port, title="nsqctl dash")
