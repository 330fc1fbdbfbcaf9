"""One nsqd's ``/stats``, read once: for callers that check a topic's or a channel's
counters at one moment (tests, benchmarks, tools) rather than follow a cluster over time
(:class:`~nsqctl.stats.poller.StatsPoller`). The same request and the same parser as the
poller's, so every reader of ``/stats`` sees the same records::

    node = read_nsqd_stats("127.0.0.1:4151", topic="orders", channel="audit")
    audit = node.channel("orders", "audit")  # a ChannelStats, or None
"""

from __future__ import annotations

import time

import httpx

from nsqctl.errors import TransportError
from nsqctl.httpclient import describe_http_error, sync_http_client
from nsqctl.lookup.client import ACCEPT_V1
from nsqctl.stats.model import NodeStats
from nsqctl.stats.parse import StatsProtocolError, parse_nsqd_body

TIMEOUT = 10.0

ClientScope = str | tuple[str, str]
"""Whose client connections to list: a topic's (every channel), or ``(topic, channel)``."""


def stats_params(
    topic: str | None = None, channel: str | None = None, *, clients: bool = True
) -> dict[str, str]:
    """``/stats`` query parameters: JSON narrowed to ``topic`` (and its ``channel``) when
    given, with every client listed or (``clients`` False) none.

    The redesign lists clients for ``needClients=true`` and leaves them out for ``false``,
    the original lists them unless told ``include_clients=false``; each ignores the
    other's parameter (nsqd/http.go ``doStats`` of both). On a big cluster the clients are
    most of the body.
    """
    params = {"format": "json", "needClients": "true"}
    if not clients:
        params.update(needClients="false", include_clients="false")
    if topic:
        params["topic"] = topic
        if channel:
            params["channel"] = channel
    return params


def scope_params(scope: ClientScope) -> dict[str, str]:
    """``/stats`` query parameters listing the clients of ``scope`` only."""
    return stats_params(scope) if isinstance(scope, str) else stats_params(*scope)


def _node(address: str, resp: httpx.Response, fetched_at: float) -> NodeStats:
    if resp.status_code != 200:
        raise StatsProtocolError(f"nsqd {address} /stats answered HTTP {resp.status_code}")
    try:
        return parse_nsqd_body(resp.content, address, fetched_at=fetched_at)
    except ValueError as err:
        # bad JSON, or a field that does not fit (msgspec's message names it)
        raise StatsProtocolError(f"nsqd {address} /stats is unreadable: {err}") from None


async def fetch_nsqd_stats(
    client: httpx.AsyncClient,
    address: str,
    *,
    topic: str | None = None,
    channel: str | None = None,
) -> NodeStats:
    """nsqd ``address`` (HTTP) ``/stats`` as a :class:`NodeStats`.

    Raises :class:`TransportError` when it cannot be asked, :class:`StatsProtocolError`
    when it answers something else than its stats.
    """
    fetched_at = time.monotonic()
    try:
        resp = await client.get(
            f"http://{address}/stats",
            params=stats_params(topic, channel),
            headers={"Accept": ACCEPT_V1},
        )
    except httpx.HTTPError as err:
        raise TransportError(f"nsqd {address} /stats: {describe_http_error(err)}") from None
    return _node(address, resp, fetched_at)


def read_nsqd_stats(
    address: str,
    *,
    topic: str | None = None,
    channel: str | None = None,
    timeout: float = TIMEOUT,
) -> NodeStats:
    """:func:`fetch_nsqd_stats` for synchronous callers (blocks for up to ``timeout``)."""
    fetched_at = time.monotonic()
    try:
        with sync_http_client(timeout=timeout, headers={"Accept": ACCEPT_V1}) as client:
            resp = client.get(f"http://{address}/stats", params=stats_params(topic, channel))
    except httpx.HTTPError as err:
        raise TransportError(f"nsqd {address} /stats: {describe_http_error(err)}") from None
    return _node(address, resp, fetched_at)
