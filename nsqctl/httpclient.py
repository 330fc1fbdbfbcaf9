"""The httpx client for nsqlookupd's and nsqd's HTTP APIs.

Every URL nsqctl builds for them is plain ``http://`` (neither has an HTTPS option in
nsqctl), yet httpx loads the whole CA bundle into a fresh SSL context for each client it
creates, a visible part of every command's start-up (bench/README.md). These clients get
a context with no trusted roots instead, cheap to make, and one that fails closed should
an ``https://`` URL ever reach it (verification stays on; nothing would verify).
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx

from nsqctl.errors import describe_connect_failure, describe_exception


def http_client(**kwargs: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for plain-HTTP cluster APIs (same arguments)."""
    kwargs.setdefault("verify", ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    return httpx.AsyncClient(**kwargs)


def sync_http_client(**kwargs: Any) -> httpx.Client:
    """:func:`http_client` for synchronous callers: an ``httpx.Client``."""
    kwargs.setdefault("verify", ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    return httpx.Client(**kwargs)


def describe_http_error(err: BaseException) -> str:
    """One short reason for a failed request, for error lines that name the server: the
    common failures in words, anything else as its type and text."""
    if isinstance(err, httpx.ConnectError):
        return describe_connect_failure(err)
    if isinstance(err, httpx.TimeoutException):
        return "timed out"
    return describe_exception(err)
