"""Listing topics and channels: the union over every lookupd (as nsqadmin), else over
the nsqds' ``/stats``.

With lookupds, the nsqds are asked too (one ``/stats`` poll, without clients): a lookupd
lists only what live nsqds registered, so when some are down the list is short, and the
listing says so (:mod:`nsqctl.stats.coverage`) rather than pass a short list, or "not
found", off as the whole truth. When no lookupd answers, the nsqds given are the list, and
it says it comes from them alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nsqctl.admin.base import TIMEOUT, topic_not_found
from nsqctl.admin.placement import fetch_stats, locate_topic
from nsqctl.admin.requests import admin_client
from nsqctl.errors import AdminError, NsqctlError
from nsqctl.lookup.client import LookupClient
from nsqctl.protocol.names import validate_topic
from nsqctl.protocol.raw_message import Family

if TYPE_CHECKING:
    from nsqctl.stats.view import ClusterView


@dataclass
class Listing:
    """Names gathered from several servers; ``errors`` names those that did not answer."""

    names: list[str]
    errors: dict[str, str] = field(default_factory=dict)
    family: Family | None = None
    warnings: list[str] = field(default_factory=list)
    """What the listing could not see (nsqds down, partitions without a live copy)."""


async def _from_lookupds(lookupd_http: Sequence[str], fetch: str, topic: str | None) -> Listing:
    """The union of the lookupds' answers, ``errors`` naming those that did not answer
    (every one: see :func:`every_lookupd_down`)."""
    names: set[str] = set()
    errors: dict[str, str] = {}
    async with LookupClient(list(lookupd_http), timeout=TIMEOUT) as lk:
        for address in lookupd_http:
            try:
                got = await (
                    lk.topics(address) if fetch == "topics" else lk.channels(topic or "", address)
                )
            except NsqctlError as err:
                errors[address] = str(err)
                continue
            names.update(got)
    return Listing(sorted(names), errors)


def every_lookupd_down(lookupd_http: Sequence[str], errors: dict[str, str]) -> AdminError | None:
    """The error of a listing no lookupd answered (each lookupd's reason, and that the
    nsqds' addresses would give the list instead); None when one answered."""
    if len(errors) < len(lookupd_http):
        return None
    why = (
        next(iter(errors.values()))
        if len(errors) == 1
        else "no nsqlookupd answered: " + "; ".join(f"{a}: {e}" for a, e in errors.items())
    )
    return AdminError(
        f"{why}; with the nsqds' HTTP addresses, the list comes from them instead",
        setting="nsqd_http",
    )


async def _without_lookupds(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
    down: AdminError,
    errors: dict[str, str],
    topic: str | None,
) -> tuple[ClusterView, Listing]:
    """When no lookupd answers: one poll of the nsqds given (re-raising ``down`` when there
    are none, or none answers), its blind spots as the listing's warnings (the lookupds'
    first, so the reader learns the list is the nsqds' alone)."""
    from nsqctl.stats.coverage import coverage, look_once

    if not nsqd_http:
        raise down
    view = await look_once(lookupd_http, nsqd_http, topic=topic)
    if not any(n.stats.state != "down" for n in view.nodes):
        raise down
    seen = coverage(view, topic)
    warnings = seen.lookupd_warnings("this list") or [
        f"nsqlookupd {a} did not answer ({e}): only the nsqds were asked; this list may be "
        "incomplete"
        for a, e in errors.items()
    ]
    return view, Listing([], warnings=[*warnings, *seen.nsqd_warnings("this list")])


async def _lookupds_and_nsqds(
    lookupd_http: Sequence[str], nsqd_http: Sequence[str], topic: str | None
) -> tuple[ClusterView, Listing, bool]:
    """The lookupds' names (the topics, or ``topic``'s channels) and one poll of the nsqds
    (of ``topic`` alone, when given), the listing warned of what the poll could not see;
    when no lookupd answers, the poll alone (:func:`_without_lookupds`), and True."""
    # the stats model loads only when a listing runs: not for every admin command's
    # start-up (and --help)
    from nsqctl.stats.coverage import coverage, look_once

    fetch = "topics" if topic is None else "channels"
    listing = await _from_lookupds(lookupd_http, fetch, topic)
    down = every_lookupd_down(lookupd_http, listing.errors)
    if down is not None:
        view, listing = await _without_lookupds(
            lookupd_http, nsqd_http, down, listing.errors, topic
        )
        return view, listing, True
    view = await look_once(lookupd_http, nsqd_http, topic=topic)
    listing.warnings = coverage(view, topic).warnings("this list")
    return view, listing, False


async def list_topics(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str],
) -> Listing:
    """Union of every lookupd's ``/topics`` (as nsqadmin), else of the nsqds' ``/stats``."""
    if lookupd_http:
        view, listing, _ = await _lookupds_and_nsqds(lookupd_http, nsqd_http, None)
        listing.names = sorted({*listing.names, *(t.name for t in view.topics)})
        return listing
    async with admin_client() as client:
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
) -> Listing:
    """Channels of ``topic``; an unknown topic raises :class:`TopicNotFoundError`."""
    validate_topic(topic)
    if lookupd_http:
        from nsqctl.stats.coverage import not_seen_warnings

        view, listing, nsqds_only = await _lookupds_and_nsqds(lookupd_http, nsqd_http, topic)
        # with the lookupds down, their words are all a "not found" has
        if nsqds_only and view.topic(topic) is None:
            raise AdminError(
                f"topic {topic!r} is on none of the nsqds that answered; "
                + "; ".join(listing.warnings)
            ) from None
        held = view.topic(topic)
        seen = [c.name for c in held.channels] if held is not None else []
        listing.names = sorted({*listing.names, *seen})
        if not listing.names and held is None:
            topics = await _from_lookupds(lookupd_http, "topics", None)
            failed = every_lookupd_down(lookupd_http, topics.errors)
            if failed is not None:
                raise failed
            if topic not in topics.names:
                blind = await not_seen_warnings(lookupd_http, nsqd_http)
                if blind:  # not seen is not absent: never advise creating it
                    raise AdminError(
                        f"topic {topic!r} not found on the nsqlookupds and nsqds that "
                        f"answered; {'; '.join(blind)}",
                    )
                raise topic_not_found(topic, [f"nsqlookupd {a}" for a in lookupd_http])
        return listing
    async with admin_client() as client:
        placement = await locate_topic(topic, (), nsqd_http, client)
    return Listing(list(placement.channels), dict(placement.unreachable), placement.family)
