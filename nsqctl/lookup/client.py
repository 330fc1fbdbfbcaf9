"""Async nsqlookupd client: discovery, concurrent lookups, merging, failure priority, polling.

One round of :meth:`LookupClient.lookup`:

1. ``/listlookup`` on a known lookupd (redesign) to learn every lookupd in the cluster. A
   404 marks that address as an original lookupd and it is not asked again; an empty or
   ``null`` answer (standalone redesign) or a failure just means "use what we know".
2. ``/lookup?topic=T&access=r|w[&metainfo=true]`` on every lookupd concurrently (the
   known ones while step 1 is under way, the discovered ones after it), with
   ``Accept: application/vnd.nsq; version=1.0`` (youzan compares the header exactly).
3. Merge with :func:`nsqctl.lookup.topology.merge_answers`.

Failure priority (the seed article's "priority of accessing that lookup address may
decrease"): after ``failure_threshold`` consecutive failures a lookupd is skipped for
``min(2 ** (failures - failure_threshold), max_skip_rounds)`` rounds, then retried. A
configured lookupd is never forgotten; a discovered one is dropped after
``forget_after`` consecutive failures (``/listlookup`` re-adds it when it returns). If
every lookupd is in its skip window, all are asked anyway: a round never asks nobody.

When no lookupd answers, the last known topology for that topic/access comes back with
``stale=True`` and one warning is logged per outage. Only when nothing was ever known does
:class:`LookupUnavailableError` escape.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from nsqctl.addresses import HostPort, parse_addresses
from nsqctl.errors import ConfigError, LookupUnavailableError, describe_exception
from nsqctl.lookup.fetch import (
    Answer,
    ClientFetcher,
    Fetcher,
    RequestError,
    StreamFetcher,
    target,
)
from nsqctl.lookup.topology import (
    LookupAnswer,
    LookupdList,
    LookupProtocolError,
    Peer,
    SourceStatus,
    Topology,
    answer_from_wire,
    listing_from_wire,
    merge_answers,
    nodes_from_wire,
    not_nsq_answer,
)

__all__ = [
    "ACCEPT_V1",
    "Access",
    "ListLookupRefusedError",
    "LookupAnsweredError",
    "LookupClient",
    "LookupUnavailableError",
    "NotNsqlookupdError",
    "TopologyCallback",
    "describe_lookup_error",
]

if TYPE_CHECKING:
    import httpx

    from nsqctl.lookup.wire import W, WireLookup

log = logging.getLogger("nsqctl.lookup")

ACCEPT_V1 = "application/vnd.nsq; version=1.0"

Access = Literal["r", "w"]
TopologyCallback = Callable[[Topology], Awaitable[None] | None]


class NotNsqlookupdError(LookupProtocolError):
    """The address answers HTTP, but not as nsqlookupd does (another web server)."""


class LookupAnsweredError(LookupProtocolError):
    """A lookupd answered ``/lookup`` with an error status and no lookup answer: it runs,
    but could not answer (youzan's nsqlookupd answers 500, in etcd's words, while it
    cannot reach etcd and does not know the topic)."""


class ListLookupRefusedError(LookupUnavailableError):
    """A redesign nsqlookupd answered ``/listlookup`` with an error: it runs, but cannot
    read the lookupds from etcd (it answers HTTP 500 with etcd's error when etcd is down),
    so it serves the topology it last knew and cannot elect leaders. ``reason`` is the
    lookupd's own words."""

    def __init__(self, address: str, status: int, reason: str) -> None:
        super().__init__(
            f"nsqlookupd {address} answered /listlookup with HTTP {status}"
            + (f": {reason}" if reason else "")
        )
        self.address = address
        self.status = status
        self.reason = reason


def error_message(body: bytes) -> str:
    """The ``message`` of an NSQ error body, "" when there is none. Read leniently: youzan's
    nsqlookupd leaves etcd's newline unescaped in it."""
    try:
        found = json.loads(body, strict=False)
    except ValueError:
        return ""
    message = found.get("message") if isinstance(found, dict) else None
    return message.strip() if isinstance(message, str) else ""


def describe_lookup_error(err: BaseException) -> str:
    """One short reason for a failed lookupd request."""
    if isinstance(err, LookupProtocolError | RequestError):
        return str(err)
    return describe_exception(err)


class _Health:
    """One lookupd's standing. A plain class (never compared or printed), not a
    dataclass: Python 3.11 compiles a dataclass's methods as its module loads."""

    __slots__ = ("configured", "failures", "is_original", "last_error", "skip_rounds")

    def __init__(self, configured: bool) -> None:
        self.configured = configured
        self.failures = 0
        self.skip_rounds = 0
        self.last_error = ""
        self.is_original = False  # /listlookup said 404


class LookupClient:
    """Talks to a set of nsqlookupd HTTP addresses; see the module doc for the policy."""

    def __init__(
        self,
        lookupd_http_addresses: Sequence[str | HostPort] | str,
        *,
        timeout: float = 5.0,
        poll_interval: float = 60.0,
        jitter: float = 0.3,
        failure_threshold: int = 2,
        max_skip_rounds: int = 16,
        forget_after: int = 5,
        discover: bool = True,
        http: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
    ) -> None:
        addresses = parse_addresses(lookupd_http_addresses, example="127.0.0.1:4161")
        if not addresses:
            raise ConfigError("no nsqlookupd address given: pass at least one, e.g. 127.0.0.1:4161")
        if poll_interval <= 0:
            raise ConfigError(f"bad poll interval {poll_interval!r}: must be > 0 seconds")
        if not 0 <= jitter <= 1:
            raise ConfigError(f"bad poll jitter {jitter!r}: must be between 0 and 1")
        if timeout <= 0:
            raise ConfigError(f"bad lookup timeout {timeout!r}: must be > 0 seconds")
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.jitter = jitter
        self.failure_threshold = max(1, failure_threshold)
        self.max_skip_rounds = max(0, max_skip_rounds)
        self.forget_after = max(1, forget_after)
        self.discover = discover
        self._rng = rng or random.Random()
        self._health: dict[str, _Health] = {str(a): _Health(configured=True) for a in addresses}
        self._last: dict[tuple[str, str, bool], Topology] = {}
        self._warned: set[tuple[str, str, bool]] = set()
        self._refresh = asyncio.Event()
        headers = {"Accept": ACCEPT_V1}
        # ``http``: the caller's httpx client (the stats poller's), its connections kept
        # between polls; without one each GET is a short h11 connection and httpx stays
        # unimported
        self._fetch: Fetcher = (
            StreamFetcher(timeout=timeout, headers=headers)
            if http is None
            else ClientFetcher(http, headers=headers)
        )

    # ----------------------------------------------------------------- lifecycle

    async def aclose(self) -> None:
        await self._fetch.aclose()

    async def __aenter__(self) -> LookupClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ----------------------------------------------------------------- state

    @property
    def addresses(self) -> list[str]:
        """Every lookupd currently known (configured first, then discovered)."""
        return list(self._health)

    def health(self) -> dict[str, dict[str, Any]]:
        """A snapshot of per-lookupd failure counters, for status displays and tests."""
        return {
            a: {
                "configured": h.configured,
                "failures": h.failures,
                "skip_rounds": h.skip_rounds,
                "last_error": h.last_error,
                "is_original": h.is_original,
            }
            for a, h in self._health.items()
        }

    def last_known(
        self, topic: str, access: Access = "r", metainfo: bool = True
    ) -> Topology | None:
        return self._last.get((topic, access, metainfo))

    def request_refresh(self) -> None:
        """Wake pollers now (e.g. a producer saw E_FAILED_ON_NOT_LEADER)."""
        self._refresh.set()

    def _record_success(self, address: str) -> None:
        h = self._health.get(address)
        if h is not None:
            h.failures, h.skip_rounds, h.last_error = 0, 0, ""

    def _record_failure(self, address: str, error: str) -> None:
        h = self._health.get(address)
        if h is None:
            return
        h.failures += 1
        h.last_error = error
        # each failed request, at debug level: the warning comes once per outage
        log.debug("nsqlookupd %s: %s (%d failure(s) in a row)", address, error, h.failures)
        if not h.configured and h.failures >= self.forget_after:
            log.info("forgetting discovered nsqlookupd %s after %d failures", address, h.failures)
            del self._health[address]
            return
        if h.failures >= self.failure_threshold:
            h.skip_rounds = min(2 ** (h.failures - self.failure_threshold), self.max_skip_rounds)

    def _round_targets(self) -> list[str]:
        """Addresses to ask this round; consumes one skip round from each skipped lookupd."""
        due: list[str] = []
        for address, h in self._health.items():
            if h.skip_rounds > 0:
                h.skip_rounds -= 1
            else:
                due.append(address)
        return due or list(self._health)

    # ----------------------------------------------------------------- HTTP

    async def _get(self, address: str, path: str, params: dict[str, str] | None = None) -> Answer:
        """One GET, bounded as a whole by ``timeout``: the fetcher bounds each phase
        (connect, each read) on their own, so a server that trickles bytes would outlast
        it."""
        try:
            async with asyncio.timeout(self.timeout):
                resp = await self._fetch.get(address, path, params)
        except TimeoutError:
            raise RequestError(f"timed out: no answer within {self.timeout:g}s") from None
        # what httpx logged for each request, for NSQCTL_LOG=debug (and tests that count)
        log.debug("GET http://%s%s: HTTP %d", address, target(path, params), resp.status_code)
        reason = not_nsq_answer(path, resp.status_code, resp.content_type, resp.content)
        if reason is not None:
            raise NotNsqlookupdError(f"not an nsqlookupd: {reason}")
        return resp

    @staticmethod
    def _decode(resp: Answer, address: str, kind: type[W]) -> W | None:
        """The body as ``kind`` (:mod:`nsqctl.lookup.wire`); a body that is not JSON at
        all is another server's (:class:`NotNsqlookupdError`). The decoding (msgspec) is
        loaded on the first answer, not with the client: admin commands' ``--help`` imports
        the client."""
        from nsqctl.lookup.wire import decode, is_json

        try:
            return decode(resp.content, kind, source=address, path=resp.path)
        except LookupProtocolError as exc:
            if not is_json(resp.content):
                raise NotNsqlookupdError(
                    f"not an nsqlookupd: {resp.path} answered HTTP {resp.status_code} "
                    "with a body that is not JSON"
                ) from None
            raise exc from None

    async def _discover(self, candidates: list[str], failed: dict[str, str]) -> None:
        """Ask ``/listlookup`` until one lookupd answers; add the lookupds it lists."""
        for address in candidates:
            h = self._health.get(address)
            if h is None or h.is_original:
                continue
            try:
                resp = await self._get(address, "/listlookup")
            except (RequestError, NotNsqlookupdError) as exc:
                failed[address] = describe_lookup_error(exc)
                continue
            if resp.status_code == 404:
                h.is_original = True
                return
            from nsqctl.lookup.wire import WireListLookup

            try:
                listing: LookupdList | None = (
                    listing_from_wire(self._decode(resp, address, WireListLookup))
                    if resp.status_code == 200
                    else None
                )
            except LookupProtocolError as exc:
                log.debug("ignoring bad /listlookup from %s: %s", address, exc)
                continue
            if listing is None:
                if resp.status_code == 200:
                    return  # standalone redesign lookupd: nothing to discover
                continue
            for node in listing.nodes:
                key = str(node.http_address)
                if key not in self._health:
                    log.info("discovered nsqlookupd %s via %s", key, address)
                    self._health[key] = _Health(configured=False)
            return

    async def _lookup_one(
        self, address: str, topic: str, access: Access, metainfo: bool, consistent: bool = False
    ) -> LookupAnswer:
        params = {"topic": topic, "access": access}
        if metainfo:
            params["metainfo"] = "true"
        if consistent:
            params["consistent"] = "true"
        from nsqctl.lookup.wire import WireLookup

        resp = await self._get(address, "/lookup", params)
        if resp.status_code >= 500 or resp.status_code not in (200, 404):
            wire: WireLookup | None = None
            with contextlib.suppress(LookupProtocolError):
                wire = self._decode(resp, address, WireLookup)
            # A legacy-mode redesign reports "not found" as 500 + status_txt; let the parser judge.
            if wire is not None and (wire.status_txt is not None or wire.message is not None):
                return answer_from_wire(wire, source=address, http_status=200)
            reason = error_message(resp.content)
            raise LookupAnsweredError(
                f"{address} answered HTTP {resp.status_code}" + (f": {reason}" if reason else "")
            )
        wire = self._decode(resp, address, WireLookup) if resp.status_code == 200 else None
        return answer_from_wire(wire, source=address, http_status=resp.status_code)

    # ----------------------------------------------------------------- lookup

    async def lookup(
        self, topic: str, access: Access = "r", metainfo: bool = True, consistent: bool = False
    ) -> Topology:
        """One discovery round for ``topic``; see the module doc for failure handling.

        ``consistent`` (youzan's nsqlookupd): list a partition only on the leader etcd
        names. Without it, ``access=r`` keeps a killed leader listed until its
        registration expires, long after the election chose a new leader, so a consumer
        would not find the new leader before then. nsqio's nsqlookupd ignores it.
        """
        if access not in ("r", "w"):
            raise ConfigError(f"bad lookup access {access!r}: use 'r' (consume) or 'w' (publish)")
        if not topic:
            raise ConfigError("empty topic name: pass the topic to look up")
        failed: dict[str, str] = {}
        results = await self._ask_round(topic, access, metainfo, consistent, failed)
        answers, sources = self._tally(results, failed)
        # every lookupd failed by answering with an error: they run, so "is it running,
        # is that its port" would send the operator the wrong way
        running = len(failed) == len(results) > 0 and all(
            isinstance(r, LookupAnsweredError) for r in results.values()
        )
        return self._topology((topic, access, metainfo), answers, sources, failed, running)

    async def _ask_round(
        self, topic: str, access: Access, metainfo: bool, consistent: bool, failed: dict[str, str]
    ) -> dict[str, LookupAnswer | BaseException]:
        """``/lookup`` on every lookupd due this round and every one ``/listlookup`` finds
        meanwhile: each one's answer or failure, in the order asked. A lookupd whose
        ``/listlookup`` failed is left out, that failure in ``failed``."""
        targets = self._round_targets()

        def ask(address: str) -> asyncio.Task[LookupAnswer]:
            return asyncio.ensure_future(
                self._lookup_one(address, topic, access, metainfo, consistent)
            )

        # The known lookupds are asked while /listlookup is under way (one round trip
        # less before a client's first connect); a lookupd whose /listlookup failed keeps
        # that failure and its /lookup answer is not used, as if it had not been asked.
        asked = {a: ask(a) for a in targets}
        try:
            if self.discover:
                before = set(self._health)
                await self._discover(targets, failed)
                for address in self._health:
                    if address not in before:
                        asked[address] = ask(address)
            results = await asyncio.gather(*asked.values(), return_exceptions=True)
        finally:  # cancelled, or a bug in the listing: no request outlives its round
            for task in asked.values():
                if not task.done():
                    task.cancel()
                elif not task.cancelled():
                    task.exception()  # retrieved: asyncio would log a failure left unread
        return {a: r for a, r in zip(asked, results, strict=True) if a not in failed}

    def _tally(
        self, results: dict[str, LookupAnswer | BaseException], failed: dict[str, str]
    ) -> tuple[list[LookupAnswer], list[SourceStatus]]:
        """The answers of a round, and the status of every lookupd asked (those that
        answered, then those that failed, adding to ``failed``), each counted in its
        health; an exception other than a lookupd's failure is a bug and raised."""
        answers: list[LookupAnswer] = []
        sources: list[SourceStatus] = []
        for address, result in results.items():
            if isinstance(result, LookupAnswer):
                answers.append(result)
                self._record_success(address)
                sources.append(
                    SourceStatus(address, ok=True, topic_not_found=result.topic_not_found)
                )
            elif isinstance(result, RequestError | LookupProtocolError):
                failed[address] = describe_lookup_error(result)
            else:
                raise result  # a bug, not a lookupd failure: don't hide it
        for address, error in failed.items():
            self._record_failure(address, error)
            sources.append(SourceStatus(address, ok=False, error=error))
        return answers, sources

    def _topology(
        self,
        key: tuple[str, str, bool],
        answers: list[LookupAnswer],
        sources: list[SourceStatus],
        failed: dict[str, str],
        running: bool = False,
    ) -> Topology:
        """The round's answers merged and kept as the last known topology of ``key``
        (topic, access, metainfo); with none, the last known one marked stale (one warning
        per outage), or :class:`LookupUnavailableError` when nothing was ever known."""
        topic = key[0]
        if answers:
            topo = merge_answers(answers, topic=topic, sources=sources)
            self._last[key] = topo
            if key in self._warned:
                self._warned.discard(key)
                log.info("nsqlookupd reachable again for topic %r", topic)
            return topo
        tried = ", ".join(f"{a} ({e})" for a, e in failed.items()) or ", ".join(self._health)
        last = self._last.get(key)
        if last is not None:
            if key not in self._warned:
                self._warned.add(key)
                log.warning(
                    "no nsqlookupd answered for topic %r (tried %s); using the last known topology",
                    topic,
                    tried,
                )
            return last.as_stale(sources)
        if running:
            raise LookupUnavailableError(
                f"no nsqlookupd could answer for topic {topic!r} (tried {tried}): each runs but "
                "answered with an error; a redesign nsqlookupd does so for a topic it does not "
                "know while it cannot reach etcd: bring etcd back (`check()` names the nsqlookupds "
                "that cannot reach it), else see the nsqlookupd's log"
            )
        raise LookupUnavailableError(
            f"no nsqlookupd answered for topic {topic!r} (tried {tried}): check that nsqlookupd is "
            "running and that the address is its HTTP port (default 4161, not the TCP port 4160)"
        )

    def next_delay(self) -> float:
        """Poll interval with random jitter: ``interval * (1 ± jitter)``."""
        return self.poll_interval * (1.0 + self.jitter * self._rng.uniform(-1.0, 1.0))

    async def poll(
        self, topic: str, access: Access = "r", metainfo: bool = True
    ) -> AsyncIterator[Topology]:
        """Yield a topology now, then every ``next_delay()`` seconds or on ``request_refresh()``.

        :class:`LookupUnavailableError` propagates (nothing was ever known): the caller
        decides whether to retry or give up.
        """
        while True:
            self._refresh.clear()
            yield await self.lookup(topic, access, metainfo)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.next_delay()):  # not wait_for: see fetch.py
                    await self._refresh.wait()

    def start_polling(
        self,
        topic: str,
        callback: TopologyCallback,
        *,
        access: Access = "r",
        metainfo: bool = True,
        consistent: bool = False,
    ) -> asyncio.Task[None]:
        """Run :meth:`poll` in a task, calling ``callback`` (sync or async) with each topology.

        Unlike :meth:`poll`, an unreachable cluster is logged and retried after the next
        delay, so a background poller never dies; so is a ``callback`` that raises (a
        warning naming the exception; the traceback rides on the log record). Cancel the
        task to stop it.
        """

        async def run() -> None:
            while True:
                self._refresh.clear()
                try:
                    topo = await self.lookup(topic, access, metainfo, consistent)
                except LookupUnavailableError as exc:
                    log.warning("%s", exc)
                else:
                    try:
                        result = callback(topo)
                        if inspect.isawaitable(result):
                            await result
                    except Exception as exc:
                        # A bug in what the caller does with a topology. One line says
                        # what failed and why; the traceback rides on the record for a
                        # handler that prints it (a CLI's shows it only when debugging).
                        log.warning(
                            "handling the lookup's answer for topic %r failed (%s); the "
                            "next poll tries again",
                            topic,
                            describe_exception(exc),
                            exc_info=exc,
                        )
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.next_delay()):  # not wait_for: see fetch.py
                        await self._refresh.wait()

        return asyncio.create_task(run(), name=f"nsqctl-lookup-poll:{topic}")

    # ----------------------------------------------------------------- other endpoints

    async def _first_answer(
        self, path: str, params: dict[str, str] | None = None, address: str | None = None
    ) -> tuple[str, Answer]:
        """GET ``path`` from ``address`` or from the first lookupd that answers 200."""
        candidates = (
            [address] if address else sorted(self._health, key=lambda a: self._health[a].failures)
        )

        errors: list[str] = []
        for addr in candidates:
            try:
                resp = await self._get(addr, path, params)
            except (RequestError, NotNsqlookupdError) as exc:
                self._record_failure(addr, describe_lookup_error(exc))
                errors.append(f"{addr} ({describe_lookup_error(exc)})")
                continue
            if resp.status_code != 200:
                msg = error_message(resp.content)
                errors.append(f"{addr} (HTTP {resp.status_code}{': ' + msg if msg else ''})")
                continue
            self._record_success(addr)
            return addr, resp
        raise LookupUnavailableError(
            f"no nsqlookupd answered {path} (tried {', '.join(errors)}): check that nsqlookupd "
            "is running and that the address is its HTTP port (default 4161)"
        )

    async def _first(
        self,
        path: str,
        kind: type[W],
        params: dict[str, str] | None = None,
        address: str | None = None,
    ) -> tuple[str, W | None]:
        """``path``'s answer from the first lookupd that answers (and which one it was),
        decoded as ``kind``."""
        addr, resp = await self._first_answer(path, params, address)
        return addr, self._decode(resp, addr, kind)

    async def ping(self, address: str | None = None) -> bool:
        """True when a lookupd (``address`` or any) answers ``/ping`` with ``OK``."""
        try:
            _, resp = await self._first_answer("/ping", address=address)
        except LookupUnavailableError:
            return False
        return resp.text.strip() == "OK"

    async def info(self, address: str | None = None) -> dict[str, Any]:
        """``/info``: ``version`` (and ``ha_support`` on the redesign)."""
        from nsqctl.lookup.wire import WireInfo

        _, wire = await self._first("/info", WireInfo, address=address)
        if wire is None:
            return {}
        found = {"version": wire.version, "ha_support": wire.ha_support}
        return {k: v for k, v in found.items() if v is not None}

    async def topics(self, address: str | None = None) -> list[str]:
        from nsqctl.lookup.wire import WireTopics

        _, wire = await self._first("/topics", WireTopics, address=address)
        return list(wire.topics or []) if wire is not None else []

    async def channels(self, topic: str, address: str | None = None) -> list[str]:
        from nsqctl.lookup.wire import WireChannels

        _, wire = await self._first("/channels", WireChannels, {"topic": topic}, address=address)
        return list(wire.channels or []) if wire is not None else []

    async def peers(self, address: str | None = None) -> list[Peer]:
        """``/nodes``: every nsqd registered with a lookupd (``address`` or the first that
        answers)."""
        from nsqctl.lookup.wire import WireNodes

        addr, wire = await self._first("/nodes", WireNodes, address=address)
        return nodes_from_wire(wire, source=addr)

    async def nodes(self, address: str | None = None) -> list[dict[str, Any]]:
        """``/nodes`` producers as dicts of :class:`Peer`'s fields, decoded and checked."""
        return [dataclasses.asdict(p) for p in await self.peers(address)]

    async def listlookup(self, address: str | None = None) -> LookupdList | None:
        """Redesign ``/listlookup``; ``None`` from an original (404) or standalone lookupd.

        Asked of one ``address``, a lookupd that answers with an error raises
        :class:`ListLookupRefusedError` (it runs, but cannot reach etcd)."""
        from nsqctl.lookup.wire import WireListLookup

        candidates = [address] if address else list(self._health)
        errors: list[str] = []
        for addr in candidates:
            try:
                resp = await self._get(addr, "/listlookup")
            except (RequestError, NotNsqlookupdError) as exc:
                errors.append(f"{addr} ({describe_lookup_error(exc)})")
                continue
            if resp.status_code == 404:
                return None
            if resp.status_code == 200:
                return listing_from_wire(self._decode(resp, addr, WireListLookup))
            reason = error_message(resp.content)
            if address is not None:
                raise ListLookupRefusedError(addr, resp.status_code, reason)
            errors.append(f"{addr} (HTTP {resp.status_code}{': ' + reason if reason else ''})")
        raise LookupUnavailableError(
            f"no nsqlookupd answered /listlookup (tried {', '.join(errors)}): check that "
            "nsqlookupd is running and that the address is its HTTP port (default 4161)"
        )
