"""Looking at a channel's next messages without consuming them.

Redesign (youzan): its nsqd reads a message at a position of a partition's queue over
HTTP (``GET /message/get?search_mode=count|virtual_offset``), touching no channel. A
channel's next message is the one after its confirmed position, which ``/stats`` gives as
``message_count - depth`` (depth counts every unconfirmed message). :func:`peek` reads from
there, or from a byte offset (``offset``) or a publish time (``since``) of one partition,
and the channel is exactly as it was afterwards. Messages that were confirmed out of order
(a consumer FINed a later one first) are shown too, since the confirmed position has not
passed them yet. Bodies come through JSON as text: bytes that are not UTF-8 are replaced.

Original: nsqd has no such API (nsqio/nsq #956, #1311). :func:`borrow` takes messages
from the channel with a consumer and gives each back once with no delay: their attempt
counts rise by one and their order may change, which is why it has its own name.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from nsqctl import answers
from nsqctl.addresses import resolve_endpoints
from nsqctl.admin.base import NSQ_V1
from nsqctl.admin.placement import Placement, locate_topic
from nsqctl.admin.planners import select_nodes
from nsqctl.admin.requests import Node, admin_client, error_text
from nsqctl.connection import ConnectionConfig
from nsqctl.errors import (
    AnswerDecodeError,
    ConfigError,
    LeaderUnavailableError,
    LookupUnavailableError,
    NotFoundError,
    NsqctlError,
    TransportError,
)
from nsqctl.httpclient import describe_http_error
from nsqctl.message import Message
from nsqctl.nsqd_wire import U64_MAX, WireStoredMessage
from nsqctl.protocol.names import validate_channel, validate_topic
from nsqctl.protocol.raw_message import RawMessage, make_redesign_id
from nsqctl.stats.parse import parse_nsqd_info
from nsqctl.stats.read import fetch_nsqd_stats

DEFAULT_COUNT = 10
BORROW_WAIT = 5.0
"""Seconds :func:`borrow` waits for the messages the channel holds to arrive."""

NO_PEEK_ON_ORIGINAL = (
    "the original nsqd has no API to read a message without consuming it: only borrowing "
    "works there (messages are taken and given back at once, their attempts rise by one "
    "and their order may change)"
)


@dataclass(frozen=True)
class Peeked:
    """One message read in place: ``index`` is its position in the partition's queue
    (counting from 1), ``raw`` the message as a consumer would decode it."""

    topic: str
    partition: int
    nsqd: str
    index: int
    raw: RawMessage


@dataclass(frozen=True)
class PartitionWindow:
    """Where one partition was read: from ``start`` up to ``end`` (queue positions)."""

    partition: int
    nsqd: str
    start: int
    end: int

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "nsqd": self.nsqd,
            "start": self.start,
            "end": self.end,
        }


@dataclass(frozen=True)
class PeekResult:
    messages: tuple[Peeked, ...]
    windows: tuple[PartitionWindow, ...]
    unread: tuple[int, ...] = ()
    """Partitions asked for that were not read: the lookup names no leader for them (the
    nsqds holding them are down, or none is elected yet), so ``messages`` may not be the
    channel's next ones."""
    unanswered: tuple[tuple[int, str], ...] = ()
    """``(partition, why)``: partitions not read because their leader did not answer
    (hung, or died since the lookup); ``messages`` may not be the next ones either."""
    lookupds_down: tuple[str, ...] = ()
    """The nsqlookupds asked that did not answer (then every one asked): the leaders were
    found in the ``/stats`` of the nsqds given instead, so a partition led by an nsqd not
    given was not read and ``messages`` may not be the channel's next ones."""


async def _locate(
    topic: str,
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    client: httpx.AsyncClient,
) -> tuple[Placement, tuple[str, ...]]:
    """Where ``topic`` lives, and the nsqlookupds that did not answer: with every one
    silent, the nsqds given (``nsqd_http``) tell from their ``/stats`` what they hold, as
    the cluster views fall back to them; with none given, the lookup's error stands."""
    try:
        return await locate_topic(topic, lookupd_http, nsqd_http, client), ()
    except LookupUnavailableError:
        if not nsqd_http:
            raise
    return await locate_topic(topic, (), nsqd_http, client), tuple(lookupd_http)


async def stored_message(
    client: httpx.AsyncClient, nsqd: str, params: dict[str, str]
) -> WireStoredMessage:
    """One message as nsqd ``nsqd`` stores it (``/message/get``); a body that is no
    message is an :class:`AnswerDecodeError` naming the nsqd and the field."""
    try:
        resp = await client.get(f"http://{nsqd}/message/get", params=params, headers=NSQ_V1)
    except httpx.HTTPError as err:
        raise TransportError(f"nsqd {nsqd} /message/get: {describe_http_error(err)}") from None
    if resp.status_code != 200:
        raise NsqctlError(f"nsqd {nsqd} /message/get answered {error_text(resp)}")
    found = answers.decode(
        resp.content, WireStoredMessage, role="nsqd", source=nsqd, path="/message/get"
    )
    if found is None or found.id is None:
        raise AnswerDecodeError(f"nsqd {nsqd} /message/get answered no message: {resp.text[:80]!r}")
    if max(found.id, found.trace_id or 0) > U64_MAX:
        raise AnswerDecodeError(f"nsqd {nsqd} /message/get answered an id beyond 64 bits")
    return found


def peeked(topic: str, partition: int, nsqd: str, body: WireStoredMessage) -> Peeked:
    """The message of a ``/message/get`` answer as the redesign's consumers see it."""
    internal_id, trace_id = body.id or 0, body.trace_id or 0
    raw = RawMessage(
        timestamp=body.timestamp or 0,
        attempts=body.attempts or 0,
        id=make_redesign_id(internal_id, trace_id),
        body=(body.body or "").encode(),
        internal_id=internal_id,
        trace_id=trace_id,
        ext_header=(body.ext or "").encode() or None,
        offset=body.offset or 0,
    )
    return Peeked(topic, partition, nsqd, body.queue_cnt_index or 0, raw)


async def _at(
    client: httpx.AsyncClient, topic: str, partition: int, nsqd: str, mode: str, pos: int
) -> Peeked:
    params = {
        "topic": topic,
        "partition": str(partition),
        "search_mode": mode,
        "search_pos": str(pos),
        "needext": "true",
    }
    return peeked(topic, partition, nsqd, await stored_message(client, nsqd, params))


async def _first_since(
    client: httpx.AsyncClient, topic: str, partition: int, nsqd: str, lo: int, hi: int, ts: int
) -> int:
    """The first queue position in ``lo..hi`` published at or after ``ts`` (ns); ``hi + 1``
    when none is. Publish times only grow along a partition's queue, so a binary search
    reads about log2(hi - lo) messages."""
    end = hi + 1
    while lo <= hi:
        mid = (lo + hi) // 2
        found = await _at(client, topic, partition, nsqd, "count", mid)
        if found.raw.timestamp >= ts:
            end, hi = mid, mid - 1
        else:
            lo = mid + 1
    return end


async def _window(
    client: httpx.AsyncClient,
    placement: Placement,
    nsqd: str,
    partition: int,
    channel: str | None,
    offset: int | None,
    since: float | None,
) -> PartitionWindow:
    topic = placement.topic
    stats = await fetch_nsqd_stats(client, nsqd, topic=topic, channel=channel)
    held = stats.topic(topic, partition)
    if held is None:
        raise NotFoundError(f"nsqd {nsqd} does not hold topic {topic} partition {partition}")
    if channel is not None and offset is None and since is None:
        ch = held.channel(channel)
        if ch is None:
            raise NotFoundError(
                f"topic {topic} partition {partition} has no channel {channel!r} (see "
                f"`channel_list({topic})`)"
            )
        return PartitionWindow(partition, nsqd, ch.message_count - ch.depth + 1, ch.message_count)
    end = held.message_count
    if offset is not None:
        try:
            start = (await _at(client, topic, partition, nsqd, "virtual_offset", offset)).index
        except NsqctlError as err:
            raise NotFoundError(
                f"partition {partition} has no message at byte offset {offset} ({err})",
                setting="offset",
            ) from None
        return PartitionWindow(partition, nsqd, start, end)
    assert since is not None
    # The oldest retained message: the one at the queue's retained start.
    first = await _at(client, topic, partition, nsqd, "virtual_offset", held.backend_start)
    start = await _first_since(client, topic, partition, nsqd, first.index, end, int(since * 1e9))
    return PartitionWindow(partition, nsqd, start, end)


async def peek(
    topic: str,
    channel: str | None = None,
    *,
    lookupd_http: Sequence[str] = (),
    nsqd_http: Sequence[str] = (),
    count: int = DEFAULT_COUNT,
    partition: int | None = None,
    offset: int | None = None,
    since: float | None = None,
) -> PeekResult:
    """The next ``count`` messages of ``channel`` (by publish time over its partitions),
    read in place on a redesign cluster: nothing is consumed or moved.

    ``offset`` (a byte offset of the queue, as ``tail``'s start offsets) or ``since`` (Unix
    seconds) read one ``partition`` from there instead of from a channel's position (then
    ``channel`` may be None).
    On the original family this raises :class:`ConfigError` (setting ``borrow``): see
    :func:`borrow`.
    """
    validate_topic(topic)
    if channel is not None:
        validate_channel(channel)
    elif offset is None and since is None:
        raise ConfigError(
            "name a channel, or a partition and a start offset or time", setting="channel"
        )
    if count < 1:
        raise ConfigError("count must be at least 1", setting="count")
    if (offset is not None or since is not None) and partition is None:
        raise ConfigError(
            "a start offset or time belongs to one partition: name the partition",
            setting="partition",
        )
    if offset is not None and since is not None:
        raise ConfigError("give a start offset or a start time, not both", setting="offset")
    async with admin_client() as client:
        placement, lookupds_down = await _locate(topic, lookupd_http, nsqd_http, client)
        if placement.family != "redesign":
            raise ConfigError(NO_PEEK_ON_ORIGINAL, setting="borrow")
        unread = _leaderless(placement, partition)
        if partition is not None and unread:
            raise LeaderUnavailableError(
                f"topic {topic!r} partition {partition} has no leader (the nsqds holding "
                "it are down or not answering, or none is elected yet), so it cannot be "
                f"read now: `lookup({topic})` shows its copies",
                partition,
            )
        if lookupds_down and partition is not None:
            _given_lead(placement, partition)
        nodes = select_nodes(placement, partition=partition)
        answers = await asyncio.gather(
            *(
                _window(client, placement, n.address, n.partition or 0, channel, offset, since)
                for n in nodes
            ),
            return_exceptions=True,
        )
        windows, unanswered = _read_windows(topic, nodes, answers, partition)
        found: list[Peeked] = []
        for w in windows:
            for index in range(w.start, min(w.end, w.start + count - 1) + 1):
                found.append(await _at(client, topic, w.partition, w.nsqd, "count", index))
    found.sort(key=lambda m: (m.raw.timestamp, m.partition, m.index))
    return PeekResult(tuple(found[:count]), tuple(windows), unread, unanswered, lookupds_down)


def _read_windows(
    topic: str,
    nodes: Sequence[Node],
    answers: Sequence[PartitionWindow | BaseException],
    partition: int | None,
) -> tuple[list[PartitionWindow], tuple[tuple[int, str], ...]]:
    """The windows of the leaders that answered, and why each other partition was not
    read. A leader that cannot be reached leaves its partition unread, as one with no
    leader does; any other failure, a partition asked for alone, or none read raises."""
    windows: list[PartitionWindow] = []
    unanswered: list[tuple[int, str]] = []
    for node, answer in zip(nodes, answers, strict=True):
        if isinstance(answer, PartitionWindow):
            windows.append(answer)
        elif not isinstance(answer, TransportError):
            raise answer
        elif partition is None:
            unanswered.append((node.partition or 0, str(answer)))
        else:
            raise TransportError(
                f"topic {topic!r} partition {partition} was not read: its leader did not "
                f"answer ({answer}): check that nsqd (`lookup({topic})`), or peek again once "
                "nsqlookupd has elected another"
            )
    if unanswered and not windows:
        why = "; ".join(text for _, text in unanswered)
        raise TransportError(
            f"no leader of topic {topic!r} answered ({why}): check those nsqds "
            f"(`lookup({topic})`); nsqlookupd drops a hung or dead one within seconds, "
            "and the partitions still led can be read then"
        )
    return windows, tuple(unanswered)


def _given_lead(placement: Placement, partition: int) -> None:
    """Refuse ``partition`` when no nsqd given leads it and no nsqlookupd answered: it
    may well exist, led by an nsqd not given, so "no such partition" would be wrong."""
    if not any(n.partition == partition for n in placement.nsqds):
        raise LeaderUnavailableError(
            f"topic {placement.topic!r} partition {partition} is led by none of the nsqds "
            "given, and no nsqlookupd answered to say which nsqd leads it: give that "
            "nsqd's HTTP address, or peek again once nsqlookupd answers",
            partition,
        )


def _leaderless(placement: Placement, partition: int | None) -> tuple[int, ...]:
    """The partitions of ``placement`` (only ``partition`` when given) with no leader."""
    return tuple(p for p in placement.leaderless if partition is None or p == partition)


async def borrow(
    topic: str,
    channel: str,
    count: int,
    show: Callable[[list[Message]], None],
    *,
    lookupd_http: Sequence[str] = (),
    nsqd_tcp: Sequence[str] = (),
    nsqd_http: Sequence[str] = (),
    wait: float = BORROW_WAIT,
    config: ConnectionConfig | None = None,
    on_taking: Callable[[int], None] | None = None,
    on_paused: Callable[[Sequence[tuple[str, int]]], None] | None = None,
    on_lookupds_down: Callable[[Sequence[str]], None] | None = None,
) -> list[Message]:
    """Take up to ``count`` messages from ``channel``, hand them to ``show``, then give
    each back exactly once with no delay (REQ 0, no backoff) and disconnect.

    Ends when ``count`` arrived, or as many as the channel held (its depth in ``/stats``)
    did, or after ``wait`` seconds (then fewer than ``on_taking`` heard: another consumer
    of the channel took them first). Each given-back message's attempts rise by one when
    it is next delivered, and it may come after messages published later. Returns the
    messages borrowed (all answered). On the redesign this raises :class:`ConfigError`
    (setting ``borrow``): :func:`peek` reads there without consuming. ``on_taking`` hears
    how many will be taken, once the channel was found and before any is (the moment to
    warn about attempts and order). A paused channel delivers nothing: the messages
    waiting on an nsqd where it is paused are not counted or borrowed, and ``on_paused``
    hears those nsqds with their depths (before ``on_taking``). With every nsqlookupd
    silent, the nsqds given by both addresses (``nsqd_tcp`` and ``nsqd_http``) are
    borrowed from instead, and ``on_lookupds_down`` hears the nsqlookupds first: an nsqd
    not given holding the topic is then not counted or borrowed from. With nsqlookupd
    answering, an nsqd given by both addresses that holds the topic but that no
    nsqlookupd lists (taken off the lookup, as a drain does) is counted and borrowed from
    too: what is counted is what is consumed from.
    """
    validate_topic(topic)
    validate_channel(channel)
    if count < 1:
        raise ConfigError("count must be at least 1", setting="count")
    if not lookupd_http and not (nsqd_tcp and nsqd_http):
        raise ConfigError(
            "borrowing finds the topic's nsqds through nsqlookupd, or needs both their TCP "
            "and HTTP addresses",
            setting="lookupd_http",
        )
    # without the TCP addresses the nsqds could be counted but not borrowed from
    held, nodes, paused, down, unlisted = await _waiting(
        topic, channel, lookupd_http, nsqd_http if nsqd_tcp else (), nsqd_tcp
    )
    if down and on_lookupds_down is not None:
        on_lookupds_down(down)
    if paused and on_paused is not None:
        on_paused(paused)
    target = min(count, held)
    if on_taking is not None:
        on_taking(target)
    if target == 0:
        show([])
        return []
    return await _take(
        topic,
        channel,
        count,
        target,
        show,
        lookupd_http=() if down else lookupd_http,
        nsqd_tcp=nsqd_tcp if down or not lookupd_http else unlisted,
        nodes=nodes,
        wait=wait,
        config=config,
    )


async def _waiting(
    topic: str,
    channel: str,
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    nsqd_tcp: Sequence[str],
) -> tuple[int, int, list[tuple[str, int]], tuple[str, ...], tuple[str, ...]]:
    """How many messages wait in ``channel`` over the topic's nsqds where it is not paused
    (their depths in ``/stats``), how many nsqds hold the topic, ``(nsqd, depth)`` of
    each where it is paused, the nsqlookupds that did not answer (:func:`_locate`), and
    the TCP addresses (of ``nsqd_tcp``) of the nsqds given that answer but that the
    answering lookup does not list (:attr:`Placement.unlisted`): the consumer reaches
    those directly. One whose TCP address is not among ``nsqd_tcp`` could not be
    consumed from, so it is not counted either: counted and consumed are one set, or
    the borrow would wait for messages that never come and blame another consumer.
    Refuses the redesign."""
    async with admin_client() as client:
        placement, down = await _locate(topic, lookupd_http, nsqd_http, client)
        if placement.family == "redesign":
            raise ConfigError(
                "the redesign reads messages in place, without consuming them: peek "
                "without borrowing",
                setting="borrow",
            )
        direct = {} if down else await _tcp_addresses(client, placement.unlisted, nsqd_tcp)
        nsqds = [
            n.address
            for n in placement.nsqds
            if n.address not in placement.unlisted or n.address in direct
        ]
        held = 0
        paused: list[tuple[str, int]] = []
        for address in nsqds:
            try:
                stats = await fetch_nsqd_stats(client, address, topic=topic, channel=channel)
            except NsqctlError as err:
                raise TransportError(nothing_borrowed(str(err))) from err
            ch = stats.channel(topic, channel)
            if ch is not None and ch.paused:
                paused.append((address, ch.depth))
            else:
                held += ch.depth if ch is not None else 0
    return held, len(nsqds), paused, down, tuple(direct.values())


def nothing_borrowed(reason: str) -> str:
    """Why a borrow stopped before taking anything: an nsqd holding the topic could not
    say how many messages its channel holds (``reason``, the /stats reader's words, which
    name it). Without that count the borrow cannot know when it is done, so it takes
    nothing; the words say so, and the two ways on."""
    return (
        f"{reason}: nothing was borrowed; run it again when it answers, or leave it out "
        "by giving only the nsqds that answer (`nsqd_tcp` and `nsqd_http`, without "
        "`lookupd_http`)"
    )


async def _tcp_addresses(
    client: httpx.AsyncClient, nsqd_http: Sequence[str], nsqd_tcp: Sequence[str]
) -> dict[str, str]:
    """Each of ``nsqd_http`` that answers ``/info`` with the entry of ``nsqd_tcp`` naming
    its TCP port (by the endpoints they reach, so ``localhost`` meets ``127.0.0.1``)."""
    if not nsqd_http or not nsqd_tcp:
        return {}
    owns: dict[str, tuple[str, str]] = {}
    for address in nsqd_http:
        try:
            resp = await client.get(f"http://{address}/info", headers=NSQ_V1)
            resp.raise_for_status()
            broadcast = parse_nsqd_info(resp.json(), address)
        except (httpx.HTTPError, ValueError, NsqctlError):
            continue  # not reachable over TCP by us either: left out, as not consumable
        port = broadcast.rsplit(":", 1)[1]
        owns[address] = (broadcast, f"{address.rsplit(':', 1)[0]}:{port}")
    # one resolution of every name at once, not one round per nsqd
    reach = await resolve_endpoints([*(t for own in owns.values() for t in own), *nsqd_tcp])
    found: dict[str, str] = {}
    for address, own in owns.items():
        mine = reach[own[0]] | reach[own[1]]
        match = next((t for t in nsqd_tcp if reach[t] & mine), None)
        if match is not None:
            found[address] = match
    return found


async def _take(
    topic: str,
    channel: str,
    count: int,
    target: int,
    show: Callable[[list[Message]], None],
    *,
    lookupd_http: Sequence[str],
    nsqd_tcp: Sequence[str],
    nodes: int,
    wait: float,
    config: ConnectionConfig | None,
) -> list[Message]:
    """Consume until ``target`` messages arrived or ``wait`` seconds passed, show them,
    then give each back once (REQ 0, after RDY 0) and disconnect. With both
    ``lookupd_http`` and ``nsqd_tcp``, the lookup's nsqds and the nsqds ``nsqd_tcp`` names
    (given, but not listed by the lookup) are consumed from, by one consumer each."""
    from nsqctl.consumer import Consumer, ConsumerOptions  # the consumer only when borrowing

    taken: list[Message] = []
    done = asyncio.Event()

    def take(msg: Message) -> None:
        msg.disable_auto_response()
        if done.is_set() or len(taken) >= count:
            msg.requeue(delay=0, backoff=False)  # sent before nsqd saw RDY 0: straight back
            return
        taken.append(msg)
        if len(taken) >= target:
            done.set()

    # The consumer shares its window among its connections (max_in_flight // nsqds) and a
    # borrowed message holds its place until the end: with a window of ``count`` each
    # nsqd could lend only its share, fewer than asked. So every nsqd gets a window of
    # ``count``; what arrives beyond it is given straight back (attempts + 1 there too).
    window = ConsumerOptions(max_in_flight=count * max(1, nodes))
    consumers: list[Consumer] = []
    if lookupd_http:
        consumers.append(
            Consumer(
                topic, channel, take, lookupd_http=list(lookupd_http), options=window, config=config
            )
        )
    if nsqd_tcp:
        consumers.append(
            Consumer(topic, channel, take, nsqd_tcp=list(nsqd_tcp), options=window, config=config)
        )
    started = time.monotonic()
    try:
        for consumer in consumers:
            await consumer.start()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(0.0, wait - (time.monotonic() - started))):
                await done.wait()
        # RDY 0 before anything goes back, or nsqd would hand it straight back to us.
        for consumer in consumers:
            consumer.set_max_in_flight(0)
        done.set()
        try:
            show(list(taken))
        finally:
            for msg in taken:
                if not msg.has_responded:
                    msg.requeue(delay=0, backoff=False)
    finally:
        for consumer in consumers:
            await consumer.stop(timeout=5)
    for consumer in consumers:
        if consumer.error is not None:
            raise consumer.error
    return taken
