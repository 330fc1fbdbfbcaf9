"""``HOST:PORT`` parsing shared by every layer (nsqd TCP/HTTP, nsqlookupd HTTP).

Users type addresses on the command line and in config files, so a bad one must fail early
with one line that says what is wrong and what a good one looks like. IPv6 hosts must be
bracketed (``[::1]:4150``): an unbracketed ``::1:4150`` is ambiguous.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nsqctl.errors import ConfigError

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "HostPort",
    "NsqdAddress",
    "parse_address",
    "parse_addresses",
    "require_cluster",
    "resolve_endpoints",
]

#: How long one host name may take to resolve before it is taken to stand for itself.
RESOLVE_TIMEOUT = 5.0

# RFC 1123 labels; underscores are tolerated because container/compose names use them.
_LABEL = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$")


@dataclass(frozen=True, order=True)
class HostPort:
    """An immutable ``host:port`` pair; ``str()`` gives the canonical form (v6 in brackets)."""

    host: str
    port: int

    def __str__(self) -> str:
        if ":" in self.host:
            return f"[{self.host}]:{self.port}"
        return f"{self.host}:{self.port}"

    @property
    def http_url(self) -> str:
        """Base URL for the HTTP API served on this address."""
        return f"http://{self}"

    @classmethod
    def parse(cls, text: str, *, example: str = "127.0.0.1:4161") -> HostPort:
        """Parse ``text``; see :func:`parse_address`."""
        return parse_address(text, example=example)


# The same value type names an nsqd endpoint; the alias keeps call sites self-describing.
NsqdAddress = HostPort


def _bad(text: str, why: str, example: str) -> ConfigError:
    return ConfigError(f"bad address {text!r}: {why}; expected HOST:PORT, e.g. {example}")


def _check_host(text: str, host: str, example: str) -> str:
    if not host:
        raise _bad(text, "missing host", example)
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if len(host) > 253 or not all(_LABEL.match(label) for label in host.rstrip(".").split(".")):
        raise _bad(text, f"{host!r} is not a valid hostname or IP address", example)
    return host


def _check_port(text: str, port: str, example: str) -> int:
    if not port:
        raise _bad(text, "missing port", example)
    if not port.isdigit():
        raise _bad(text, f"port {port!r} is not a number", example)
    value = int(port)
    if not 1 <= value <= 65535:
        raise _bad(text, f"port {value} is out of range 1-65535", example)
    return value


def parse_address(text: str, *, example: str = "127.0.0.1:4161") -> HostPort:
    """Parse ``HOST:PORT`` (IPv4, hostname or ``[v6]:port``) or raise :class:`ConfigError`.

    ``example`` is shown in the error so nsqd (4150) and lookupd (4161) callers can each
    suggest the right port.
    """
    if not isinstance(text, str):
        raise ConfigError(f"bad address {text!r}: expected a HOST:PORT string, e.g. {example}")
    raw = text.strip()
    if not raw:
        raise _bad(text, "empty", example)
    if "://" in raw:
        raise _bad(text, "drop the URL scheme", example)
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0:
            raise _bad(text, "missing ']' after IPv6 host", example)
        host, rest = raw[1:end], raw[end + 1 :]
        if not rest.startswith(":"):
            raise _bad(text, "missing ':PORT' after ']'", example)
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _bad(text, f"{host!r} is not an IPv6 address", example) from None
        return HostPort(str(ipaddress.IPv6Address(host)), _check_port(text, rest[1:], example))
    if raw.count(":") > 1:
        raise _bad(text, "IPv6 hosts need brackets, like [::1]:4150", example)
    host, sep, port = raw.rpartition(":")
    if not sep:
        raise _bad(text, "missing ':PORT'", example)
    return HostPort(_check_host(text, host, example), _check_port(text, port, example))


def parse_addresses(
    values: str | Iterable[str | HostPort], *, example: str = "127.0.0.1:4161"
) -> list[HostPort]:
    """Parse a list (or one comma-separated string) of addresses, dropping duplicates in order."""
    items: Iterable[str | HostPort] = values.split(",") if isinstance(values, str) else values
    seen: dict[HostPort, None] = {}
    for item in items:
        if isinstance(item, HostPort):
            seen.setdefault(item, None)
            continue
        if isinstance(item, str) and not item.strip() and isinstance(values, str):
            continue  # tolerate "a,b," from shells and env vars
        seen.setdefault(parse_address(item, example=example), None)
    return list(seen)


def require_cluster(lookupd_http: object, nsqd_tcp: object) -> None:
    """A client needs somewhere to find the cluster: refuse neither address list given (a
    :class:`ConfigError` naming the library settings, for the Consumer and the Producer)."""
    if not lookupd_http and not nsqd_tcp:
        raise ConfigError(
            "no cluster given: pass lookupd_http= (nsqlookupd HTTP addresses) or "
            "nsqd_tcp= (nsqd TCP addresses)",
            setting="lookupd_http",
        )


async def _resolve_host(host: str) -> frozenset[str]:
    """The IPs ``host`` names; an IP is itself (never asked of a resolver), and a name that
    does not resolve (in :data:`RESOLVE_TIMEOUT`) stands for itself only, so it still
    matches its own spelling."""
    try:
        return frozenset({str(ipaddress.ip_address(host))})
    except ValueError:
        pass
    # loaded here: every command parses addresses, and asyncio would cost each one's
    # start-up (``config --help`` too) for the few that compare nsqds by what they reach
    import asyncio

    try:
        async with asyncio.timeout(RESOLVE_TIMEOUT):
            infos = await _getaddrinfo(host)
    except (OSError, TimeoutError):
        return frozenset({host})
    return frozenset({str(ipaddress.ip_address(info[4][0])) for info in infos} or {host})


def _getaddrinfo(host: str) -> asyncio.Future[list[Any]]:
    """``socket.getaddrinfo`` of ``host`` in a daemon thread of its own. Not the loop's
    default executor: ``asyncio.run`` joins its threads at shutdown with no bound, and a
    ``ThreadPoolExecutor``'s threads are joined at interpreter exit, so a resolver that
    hangs would hold the command past :data:`RESOLVE_TIMEOUT` (and hung lookups would fill
    the shared executor). A daemon thread left behind by a timeout holds nothing."""
    import asyncio
    import contextlib
    import socket
    import threading

    loop = asyncio.get_running_loop()
    found: asyncio.Future[list[Any]] = loop.create_future()

    def deliver(result: list[Any] | None, error: OSError | None) -> None:
        if found.done():  # timed out or cancelled meanwhile
            return
        if error is not None:
            found.set_exception(error)
        else:
            found.set_result(result or [])

    def lookup() -> None:
        result: list[Any] | None = None
        error: OSError | None = None
        try:
            result = list(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM))
        except OSError as err:
            error = err
        # a closed loop raises RuntimeError: nobody waits for this answer any more
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(deliver, result, error)

    threading.Thread(target=lookup, name=f"resolve {host}", daemon=True).start()
    return found


async def resolve_endpoints(texts: Iterable[str]) -> dict[str, frozenset[HostPort]]:
    """Each ``HOST:PORT`` of ``texts`` with the ``IP:PORT`` endpoints it reaches, so that one
    server named two ways (``localhost:4151`` and ``127.0.0.1:4151``; a hostname and the IP
    a lookup reports) is known to be one: two texts name one server when their sets meet.
    Each host name is resolved once, all concurrently; a text that is not an address
    reaches nothing but its own spelling."""
    import asyncio  # loaded here: see _resolve_host

    parsed: dict[str, HostPort | None] = {}
    for text in texts:
        try:
            parsed[text] = parse_address(text)
        except ConfigError:
            parsed[text] = None
    hosts = sorted({hp.host for hp in parsed.values() if hp is not None})
    ips = dict(zip(hosts, await asyncio.gather(*map(_resolve_host, hosts)), strict=True))
    return {
        text: frozenset({HostPort(text, 0)})
        if hp is None
        else frozenset(HostPort(ip, hp.port) for ip in ips[hp.host])
        for text, hp in parsed.items()
    }
