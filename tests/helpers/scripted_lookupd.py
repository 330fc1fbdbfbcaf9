"""Scripted fake nsqlookupds and nsqds on loopback: real HTTP/1.1 servers whose every
answer a test chooses, for the unit tests of the lookup client and of the admin flows.

The code under test is driven exactly as in production (the lookup client's own HTTP
client, the admin functions' httpx client, over real sockets): only the servers are
scripted. Fakes, not real servers, because what these tests need is what no real cluster
can be made to send, or not quickly: JSON of any shape (the property tests' arbitrary
bodies), a lookupd list naming chosen nodes (discovery), an HTTP 500 with an HTML body,
an answer that never comes (a timeout), each to a chosen request at a chosen moment, a
lookupd that stops listening and comes back on the same address, and for the admin
flows' planning logic a whole cluster in a chosen state (youzan's elections choosing
another copy, a move refused while an ISR settles, lookups still naming the old leader)
that a real cluster cannot be put in at will. One handler answers for every server
started on it, telling them apart by :attr:`Request.address`. Real servers' answers are
checked in tests/integration/test_lookup_original.py and the redesign integration tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit


@dataclass(frozen=True)
class Request:
    """A request as a server received it: which server (its ``HOST:PORT``), the path, the
    query, the headers (names lower-case), the method."""

    address: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    method: str = "GET"
    target: str = ""  # path and query as sent

    @property
    def url(self) -> str:
        """``http://HOST:PORT/path?query`` as the client asked for it."""
        return f"http://{self.address}{self.target}"


@dataclass(frozen=True)
class Reply:
    """An answer: ``body`` bytes are sent as they are, anything else as JSON."""

    status: int = 200
    body: Any = b""
    content_type: str = "application/json; charset=utf-8"


#: a handler's answer for "never answer" (the client's timeout ends the request)
HANG = Reply(status=0)
Handler = Callable[[Request], Reply]

REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    500: "Internal Server Error",
}


def closed_address() -> str:
    """A loopback ``HOST:PORT`` nothing listens on: a connect there is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class ScriptedLookupds:
    """Loopback servers (lookupds, nsqds) answering through ``handler``; :meth:`start` one
    per address needed (in the running event loop), :meth:`down`/:meth:`up` stop and resume
    listening, :meth:`aclose` ends them all. ``requests`` records every GET, in order."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self._servers: dict[str, asyncio.Server] = {}
        self._open: set[asyncio.StreamWriter] = set()

    async def start(self, count: int = 1) -> list[str]:
        """``count`` new lookupds; their addresses."""
        return [await self._listen(None) for _ in range(count)]

    async def down(self, address: str) -> None:
        """Stop listening on ``address``: connects are refused until :meth:`up`."""
        server = self._servers.pop(address)
        server.close()
        await server.wait_closed()

    async def up(self, address: str) -> None:
        """Listen on ``address`` again."""
        await self._listen(int(address.rsplit(":", 1)[1]))

    async def aclose(self) -> None:
        for address in list(self._servers):
            await self.down(address)
        for writer in list(self._open):  # a hung answer
            writer.close()

    async def __aenter__(self) -> ScriptedLookupds:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _listen(self, port: int | None) -> str:
        box: list[str] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._serve(box[0], reader, writer)

        server = await asyncio.start_server(serve, "127.0.0.1", port or 0)
        address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        box.append(address)
        self._servers[address] = server
        return address

    async def _serve(
        self, address: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._open.add(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line, *fields = head.decode("latin-1").split("\r\n")
            method, raw_target = line.split(" ")[:2]
            target = urlsplit(raw_target)
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (f.partition(":") for f in fields if f)
            }
            length = int(headers.get("content-length", "0") or 0)
            if length:
                await reader.readexactly(length)  # nsqd's and lookupd's APIs take the query
            request = Request(
                address, target.path, dict(parse_qsl(target.query)), headers, method, raw_target
            )
            self.requests.append(request)
            reply = self.handler(request)
            if reply is HANG:
                await reader.read()  # until the client gives up and closes
                return
            body = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            writer.write(
                f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Status')}\r\n"
                f"Content-Type: {reply.content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        finally:
            self._open.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
