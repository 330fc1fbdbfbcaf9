"""The nsqds of a cluster for ``nsqctl node list``: those the nsqlookupds list, those given
directly, and whether each answers.

An nsqlookupd lists an nsqd only while it is registered: an original lookupd forgets a
killed one at once, and one that is down lists none. So the list is checked against one
``/stats`` poll (:mod:`nsqctl.stats.coverage`), every nsqd carries its state, and a
lookupd that did not answer is a warning, never an empty list passed off as the cluster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nsqctl.admin.base import TIMEOUT
from nsqctl.admin.listing import every_lookupd_down
from nsqctl.errors import NsqctlError
from nsqctl.lookup.client import LookupClient


@dataclass(frozen=True)
class NodeEntry:
    """One nsqd: its addresses, its state in the poll, whether a lookupd lists it."""

    http: str
    tcp: str | None
    state: str
    """``up``, ``slow``, ``unhealthy``, ``not answering`` (a hung nsqd) or ``down``."""
    registered: bool


@dataclass
class NodeListing:
    nodes: list[NodeEntry]
    warnings: list[str] = field(default_factory=list)
    """What the list could not see (nsqlookupds down or without etcd)."""


async def list_nodes(
    lookupd_http: Sequence[str],
    nsqd_http: Sequence[str] = (),
) -> NodeListing:
    """Every nsqd the lookupds list or ``nsqd_http`` names, with its state; raises
    :class:`~nsqctl.errors.AdminError` when no lookupd answers and no nsqd given does."""
    from nsqctl.stats.coverage import coverage, look_once
    from nsqctl.stats.poller import NOT_ANSWERING

    registered: dict[str, str] = {}
    errors: dict[str, str] = {}
    async with LookupClient(list(lookupd_http), timeout=TIMEOUT, discover=False) as lk:
        for address in lookupd_http:
            try:
                peers = await lk.peers(address)
            except NsqctlError as err:
                errors[address] = str(err)
                continue
            registered.update((p.http_key, str(p.tcp_address)) for p in peers)
    down = every_lookupd_down(lookupd_http, errors)
    if down is not None and not nsqd_http:
        raise down
    view = await look_once(lookupd_http, nsqd_http)
    if down is not None and all(n.stats.state == "down" for n in view.nodes):
        raise down
    warnings = coverage(view).lookupd_warnings("this list") or [
        f"nsqlookupd {a} did not answer ({e}): this list may be incomplete"
        for a, e in errors.items()
    ]
    nodes = []
    for node in view.nodes:
        state: str = node.stats.state
        if state == "down" and node.stats.error.startswith(NOT_ANSWERING):
            state = NOT_ANSWERING
        nodes.append(
            NodeEntry(node.address, registered.get(node.address), state, node.address in registered)
        )
    polled = {n.http for n in nodes}
    nodes += [NodeEntry(h, t, "unknown", True) for h, t in registered.items() if h not in polled]
    return NodeListing(sorted(nodes, key=lambda n: n.http), warnings)
