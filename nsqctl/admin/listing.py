"""Listing topics and channels: the union over every lookupd (as nsqadmin), else over
the nsqds' ``/stats``.

With lookupds, the nsqds are asked too (one ``/stats`` poll, without clients): a lookupd
lists only what live nsqds registered, so when some are down the list is short, and the
listing says so (:mod:`nsqctl.stats.coverage`) rather than pass a short list, or "not
found", off as the whole truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from nsqctl.admin.base import TIMEOUT, topic_not_found
from nsqctl.admin.placement import fetch_stats, locate_topic
from nsqctl.admin.requests import admin_client
from nsqctl.errors import AdminError, NsqctlError
from nsqctl.lookup.client import LookupClient
from nsqctl.protocol.message import Family
from nsqctl.protocol.names import validate_topic


@dataclass
class Listing:
    """Names gathered from several servers; ``errors`` names those that did not answer."""

    names: list[str]
    errors: dict[str, str] = field(default_factory=dict)
    family: Family | None = None
    warnings: list[str] = field(default_factory=list)
    """What the listing could not see (nsqds down, partitions without a live copy)."""


async def _from_lookupds(
    lookupd_http: Sequence[str], fetch: str, topic: str | None, transport: Any
) -> Listing:
    names: set[str] = set()
    errors: dict[str, str] = {}
    async with LookupClient(list(lookupd_http), timeout=TIMEOUT, transport=transport) as lk:
        for address in lookupd_http:
            try:
                got = await (
                    lk.topics(address) if fetch == "topics" else lk.channels(topic or "", address)
                )
            except NsqctlError as err:
                errors[address] = str(err)
                continue
            names.update(got)
    if len(errors) == len(lookupd_http):
        if len(errors) == 1:
            raise AdminError(next(iter(errors.values())))
        raise AdminError(
            "no nsqlookupd answered: " + "; ".join(f"{a}: {e}" for a, e in errors.items())
        )
    return Listing(sorted(names), errors)


async def list_topics(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Listing:
    """Union of every lookupd's ``/topics`` (as nsqadmin), else of the nsqds' ``/stats``."""
    if lookupd_http:
        # the stats model loads only when a listing runs: not for every admin command's
        # start-up (and --help)
        from nsqctl.stats.coverage import coverage, look_once

        listing = await _from_lookupds(lookupd_http, "topics", None, transport)
        view = await look_once(lookupd_http, nsqd_http, transport=transport)
        listing.names = sorted({*listing.names, *(t.name for t in view.topics)})
        listing.warnings = coverage(view).warnings("this list")
        return listing
    async with admin_client(transport) as client:
        stats = await fetch_stats(client, nsqd_http)
    if not stats.nodes:
        raise AdminError(
            "no nsqd answered: " + "; ".join(stats.errors.values()),  # each names its nsqd
            setting="nsqd_http",
        )
    names = {t.topic for node in stats.nodes.values() for t in node.topics}
    return Listing(sorted(n for n in names if n), dict(stats.errors))


async def list_channels(
    topic: str,
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Listing:
    """Channels of ``topic``; an unknown topic raises :class:`TopicNotFoundError`."""
    validate_topic(topic)
    if lookupd_http:
        from nsqctl.stats.coverage import coverage, look_once, not_seen_warnings

        listing = await _from_lookupds(lookupd_http, "channels", topic, transport)
        view = await look_once(lookupd_http, nsqd_http, topic=topic, transport=transport)
        held = view.topic(topic)
        seen = [c.name for c in held.channels] if held is not None else []
        listing.names = sorted({*listing.names, *seen})
        listing.warnings = coverage(view, topic).warnings("this list")
        if not listing.names:
            topics = await _from_lookupds(lookupd_http, "topics", None, transport)
            known = topic in topics.names or held is not None
            if not known:
                blind = await not_seen_warnings(lookupd_http, nsqd_http, transport=transport)
                if blind:  # not seen is not absent: never advise creating it
                    raise AdminError(
                        f"topic {topic!r} not found on the nsqlookupds and nsqds that "
                        f"answered; {'; '.join(blind)}",
                    )
                raise topic_not_found(topic, [f"nsqlookupd {a}" for a in lookupd_http])
        return listing
    async with admin_client(transport) as client:
        placement = await locate_topic(topic, (), nsqd_http, client)
    return Listing(list(placement.channels), dict(placement.unreachable), placement.family)
