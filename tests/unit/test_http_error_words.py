"""How a failed HTTP request to nsqd or nsqlookupd is worded: a host name that does not
resolve is not "connection refused or host unreachable" (nothing was connected to)."""

from __future__ import annotations

import socket

import httpx
import pytest

from nsqctl.errors import describe_connect_failure
from nsqctl.httpclient import describe_http_error


def _chained(inner: BaseException) -> httpx.ConnectError:
    """``inner`` wrapped as httpx wraps it (httpcore's ConnectError between them)."""
    try:
        try:
            raise inner
        except OSError as err:
            raise httpx.ConnectError(str(err)) from err
    except httpx.ConnectError as outer:
        return outer


@pytest.mark.parametrize(
    ("inner", "said"),
    [
        (
            socket.gaierror(socket.EAI_NONAME, "Name or service not known"),
            "host name not found: Name or service not known",
        ),
        (
            ConnectionRefusedError(111, "Connection refused"),
            "connection refused or host unreachable",
        ),
    ],
)
def test_a_connect_failure_says_which(inner: OSError, said: str) -> None:
    assert describe_http_error(_chained(inner)) == said


def test_the_lookup_fetchers_own_connect_failure_says_which_too() -> None:
    """nsqlookupd's GETs go over asyncio streams, not httpx: the resolver's error comes
    unwrapped, and is worded the same."""
    lookup = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    assert describe_connect_failure(lookup) == "host name not found: Name or service not known"
    refused = ConnectionRefusedError(111, "Connection refused")
    assert describe_connect_failure(refused) == "connection refused or host unreachable"


def test_a_chain_that_loops_ends() -> None:
    """A cause chain can loop (an error raised again while handling the one it caused):
    the walk ends, and says what it could not find."""
    first = ConnectionRefusedError(111, "Connection refused")
    second = httpx.ConnectError("refused")
    second.__cause__ = first
    first.__context__ = second
    assert describe_connect_failure(second) == "connection refused or host unreachable"
