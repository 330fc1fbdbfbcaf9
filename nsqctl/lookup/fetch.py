"""The GET requests of :class:`~nsqctl.lookup.client.LookupClient`: h11 over asyncio
streams.

Every consumer and producer looks its topic up before it connects, so this request is
on the start-up path of ``tail``, ``pub`` and ``archive``. httpx costs that path its
import (httpx, httpcore, and anyio's asyncio backend set up on the first request: the
largest single part of ``tail -n 1`` in bench/README.md's start-up profile) and about
8 MB of resident memory, for what is here one small GET to a lookupd on the local
network. h11 (the sans-IO HTTP/1.1 state machine httpx itself sits on, a fraction of its
import) with asyncio's streams does that GET: one connection per request, closed after
it (a lookupd is asked a few times a minute at most).

The unit tests run it against scripted loopback servers, so what they exercise is what
commands run. A caller that holds an httpx client already (the stats poller, which asks
the same lookupds every poll) has the GETs sent through it instead
(:class:`ClientFetcher`): its connections stay open between polls, and its transport
(a recording's, a playback's) sees every request of the poll. Every failure is a
:class:`RequestError` with a short reason, so the lookup client judges failures one way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol
from urllib.parse import urlencode

import h11

from nsqctl.addresses import HostPort
from nsqctl.errors import TransportError, describe_connect_failure

if TYPE_CHECKING:
    import httpx

READ_SIZE = 64 * 1024


class RequestError(TransportError):
    """A GET that got no HTTP answer: refused, timed out, or not HTTP. ``str()`` is the
    reason, short enough for an error line that names the server; the failure under it
    is its ``__cause__``."""


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class Answer(NamedTuple):
    """An HTTP answer, whole."""

    path: str
    status_code: int
    content_type: str
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class Fetcher(Protocol):
    """What makes the lookup client's GETs: :class:`StreamFetcher` or
    :class:`ClientFetcher`."""

    async def get(
        self, address: str, path: str, params: Mapping[str, str] | None = None
    ) -> Answer: ...

    async def aclose(self) -> None: ...


def target(path: str, params: Mapping[str, str] | None) -> str:
    """The request target: ``path`` and its query."""
    return f"{path}?{urlencode(params)}" if params else path


class StreamFetcher:
    """GET over h11 and ``asyncio.open_connection``, one connection per request.

    ``timeout`` bounds connect and read each, as httpx's does; the lookup client bounds
    the whole request on top."""

    def __init__(self, *, timeout: float, headers: Mapping[str, str]) -> None:
        self.timeout = timeout
        self.headers = list(headers.items())

    async def get(self, address: str, path: str, params: Mapping[str, str] | None = None) -> Answer:
        hp = HostPort.parse(address)
        # asyncio.timeout, never wait_for: on 3.11 wait_for can swallow a cancel that lands
        # as the inner call completes (CPython gh-86296), and on loopback a connect or read
        # completes at once: a stopping consumer's lookup poller then never ended.
        try:
            async with asyncio.timeout(self.timeout):
                reader, writer = await asyncio.open_connection(hp.host, hp.port)
        except TimeoutError as err:
            raise RequestError("timed out") from err
        except OSError as err:
            raise RequestError(describe_connect_failure(err)) from err
        try:
            return await self._exchange(reader, writer, address, path, params)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _exchange(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        address: str,
        path: str,
        params: Mapping[str, str] | None,
    ) -> Answer:
        conn = h11.Connection(h11.CLIENT)
        request = h11.Request(
            method="GET",
            target=target(path, params),
            headers=[("Host", address), ("Connection", "close"), *self.headers],
        )
        writer.write(conn.send(request) + (conn.send(h11.EndOfMessage()) or b""))
        status, content_type, body = 0, "", bytearray()
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    try:
                        async with asyncio.timeout(self.timeout):
                            data = await reader.read(READ_SIZE)
                    except TimeoutError as err:
                        raise RequestError("timed out") from err
                    except OSError as err:
                        raise RequestError(f"connection lost: {err.strerror or err}") from err
                    conn.receive_data(data)  # b"": the server closed
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    for name, value in event.headers:
                        if name == b"content-type":
                            content_type = value.decode("latin-1")
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    return Answer(path, status, content_type, bytes(body))
                else:  # ConnectionClosed before the answer ended
                    raise RequestError("the server closed the connection mid-answer")
        except h11.RemoteProtocolError as err:
            raise RequestError(f"not an HTTP answer ({err})") from err

    async def aclose(self) -> None:
        return None  # nothing kept between requests


class ClientFetcher:
    """GET through the caller's httpx client (its pool, its transport); the client stays
    the caller's to close. Built only from a client the caller made, so httpx is never
    imported here for a caller without one."""

    def __init__(self, client: httpx.AsyncClient, *, headers: Mapping[str, str]) -> None:
        self.client = client
        self.headers = dict(headers)

    async def get(self, address: str, path: str, params: Mapping[str, str] | None = None) -> Answer:
        import httpx

        from nsqctl.httpclient import describe_http_error

        url = f"http://{address}{target(path, params)}"  # the query as StreamFetcher sends it
        try:
            resp = await self.client.get(url, headers=self.headers)
        except httpx.HTTPError as err:
            raise RequestError(describe_http_error(err)) from err
        return Answer(path, resp.status_code, resp.headers.get("content-type", ""), resp.content)

    async def aclose(self) -> None:
        return None  # the caller's client: it closes it
