"""HOST:PORT parsing: accepted forms, canonical output, and one-line actionable errors."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from nsqctl import addresses
from nsqctl.addresses import (
    HostPort,
    NsqdAddress,
    parse_address,
    parse_addresses,
    resolve_endpoints,
)
from nsqctl.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "host", "port", "canonical"),
    [
        ("127.0.0.1:4161", "127.0.0.1", 4161, "127.0.0.1:4161"),
        ("  localhost:4150 ", "localhost", 4150, "localhost:4150"),
        ("nsqd-0.nsqd.svc.cluster.local:4150", "nsqd-0.nsqd.svc.cluster.local", 4150, None),
        ("my_nsqd:1", "my_nsqd", 1, None),
        ("[::1]:4150", "::1", 4150, "[::1]:4150"),
        ("[2001:DB8::0001]:65535", "2001:db8::1", 65535, "[2001:db8::1]:65535"),
    ],
)
def test_parse_ok(text: str, host: str, port: int, canonical: str | None) -> None:
    hp = parse_address(text)
    assert (hp.host, hp.port) == (host, port)
    assert str(hp) == (canonical or text.strip())
    assert parse_address(str(hp)) == hp  # round trip


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("127.0.0.1", "missing ':PORT'"),
        ("127.0.0.1:", "missing port"),
        (":4150", "missing host"),
        ("host:abc", "not a number"),
        ("host:0", "out of range"),
        ("host:70000", "out of range"),
        ("::1:4150", "need brackets"),
        ("[::1]4150", "missing ':PORT'"),
        ("[::1:4150", "missing ']'"),
        ("[nothex]:4150", "not an IPv6"),
        ("http://127.0.0.1:4161", "scheme"),
        ("bad host:4150", "not a valid hostname"),
        ("-lead.example:4150", "not a valid hostname"),
    ],
)
def test_parse_errors_are_one_actionable_line(text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_address(text)
    msg = str(info.value)
    assert msg.startswith(f"bad address {text!r}: ")
    assert reason in msg
    assert msg.endswith("expected HOST:PORT, e.g. 127.0.0.1:4161")
    assert "\n" not in msg


def test_error_example_is_configurable() -> None:
    with pytest.raises(ConfigError, match=r"e\.g\. 127\.0\.0\.1:4150$"):
        parse_address("nope", example="127.0.0.1:4150")


def test_non_string_rejected() -> None:
    with pytest.raises(ConfigError, match="expected a HOST:PORT string"):
        parse_address(4150)  # type: ignore[arg-type]


def test_parse_addresses_comma_list_dedup_and_order() -> None:
    got = parse_addresses("b:2, a:1,b:2,")
    assert got == [HostPort("b", 2), HostPort("a", 1)]
    assert parse_addresses(["a:1", HostPort("a", 1), "[::1]:3"]) == [
        HostPort("a", 1),
        HostPort("::1", 3),
    ]
    with pytest.raises(ConfigError):
        parse_addresses(["a:1", ""])


def test_value_type_properties() -> None:
    hp = NsqdAddress("::1", 4151)
    assert hp.http_url == "http://[::1]:4151"
    assert HostPort.parse("x:1") == HostPort("x", 1)
    assert sorted([HostPort("b", 1), HostPort("a", 2)])[0].host == "a"
    assert len({HostPort("a", 1), HostPort("a", 1)}) == 1


def test_resolved_endpoints_meet_for_one_server_named_two_ways() -> None:
    """localhost is resolved (no name off this machine is asked); an IP and a text that is
    no address each stand for themselves."""
    got = asyncio.run(resolve_endpoints(["localhost:4151", "127.0.0.1:4151", "nonsense"]))
    assert HostPort("127.0.0.1", 4151) in got["localhost:4151"]
    assert got["127.0.0.1:4151"] == {HostPort("127.0.0.1", 4151)}
    assert got["nonsense"] == {HostPort("nonsense", 0)}


@pytest.fixture
def hung_resolver(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """``socket.getaddrinfo`` that blocks until the test ends (as a resolver that never
    answers): a DNS server cannot be made to hang on loopback. Set once asked."""
    asked = threading.Event()
    release = threading.Event()

    def blocked(*_args: object, **_kwargs: object) -> list[object]:
        asked.set()
        release.wait()
        raise OSError("released")

    monkeypatch.setattr(socket, "getaddrinfo", blocked)
    yield asked
    release.set()


def run_bounded(main: Callable[[], Coroutine[Any, Any, object]]) -> object:
    """``asyncio.run(main())`` in a daemon thread, so that a run held forever fails the
    test instead of hanging it (a bound on a hang, not a speed)."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(asyncio.run(main()))
        except BaseException as err:  # any outcome is handed to the test
            out.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "asyncio.run is held by the hung lookup"
    return out[0]


def test_a_hung_resolver_holds_neither_the_command_nor_its_exit(
    hung_resolver: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name whose lookup never answers stands for itself after the timeout, and the run
    that asked ends: no thread left that asyncio.run or the interpreter would join."""
    monkeypatch.setattr(addresses, "RESOLVE_TIMEOUT", 0.05)
    got = run_bounded(lambda: resolve_endpoints(["hung.example:4151"]))
    assert hung_resolver.is_set()
    assert got == {"hung.example:4151": {HostPort("hung.example", 4151)}}
    holding = [t for t in threading.enumerate() if t.is_alive() and not t.daemon]
    assert holding == [threading.main_thread()], holding


def test_a_cancel_during_a_hung_lookup_is_not_swallowed(hung_resolver: threading.Event) -> None:
    async def main() -> str:
        task = asyncio.create_task(resolve_endpoints(["hung.example:4151"]))
        while not hung_resolver.is_set():
            await asyncio.sleep(0.01)  # until the lookup is under way
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        return "swallowed"

    assert run_bounded(main) == "cancelled"
