"""One poll of a cluster over HTTP: lookupds, then every nsqd's ``/stats`` concurrently.

A node that is slow or dead costs at most ``timeout`` and is reported as such; it never
holds up the others. nsqds found once (configured or via lookupd ``/nodes``) stay known
for the session, so one that dies and drops out of lookupd is still shown as ``down``.
Decoding and parsing run in a worker thread so a large payload does not stall a UI loop.

On the redesign, ISR and catch-up come from ``/coordinator/stats``, which lists nothing
unless asked for one topic. So, like youzan's own nsqadmin, the poller asks only for the
topics in focus (the one ``nsqctl stat`` names, the one the dashboard shows), each of the
nsqds leading one of its partitions; their node ids are turned into HTTP addresses with
lookupd ``/nodes`` (or, without a lookupd, each nsqd's ``/info``, asked once).

A redesign topic's partition count comes from lookupd ``/lookup?metainfo=true``: the
nsqds' ``/stats`` cannot show a partition whose only copies are on nsqds that are down.
Each topic is asked once per session, and again only while the partitions the nsqds report
differ from that count (an outage, or partitions added), so a whole cluster costs nothing
after the first poll. When no nsqlookupd has answered a topic's meta (every one down since
the session began), the partitions an nsqd now down held when it last answered still say
they exist (``unseen_partitions``), at no request more. A topic an nsqd holds that
nsqlookupd answers as not found (no meta: deleted while that nsqd was down, whose copy it
serves again) is asked again each poll while it is held, and named in the snapshot
(``deleted_topics``), so the views call it what it is instead of a partition with no
leader.

Client connections are most of a big cluster's ``/stats`` and of the time spent reading
it, while the dashboard shows them for one topic at a time. So a poller told which topics'
clients are shown (``clients``: topics or ``(topic, channel)`` pairs; ``None``, the
default, lists every client, as ``nsqctl stat`` and the rules need) asks each nsqd for its
stats without clients and, at the same time, for those with theirs, whose records then
replace the first answer's.

An original topic whose every nsqd is down or not answering is in no ``/stats`` that came
back, so it would vanish from every view. The poller keeps it (``unseen_topics``), from
two sources, asked only while some known nsqd did not answer (a whole cluster costs no
request more):

- what each nsqd listed when it last answered (its topics and their channels): free, and
  the only source that names the holder of a topic on an nsqd that was killed, since
  nsqlookupd drops a disconnected nsqd's producers at once;
- nsqlookupd: ``/topics`` (one request a poll) lists every topic registered, and
  ``/lookup`` (once per topic, while it stays unseen, and only for a topic the first
  source does not know) names the producers still registered (a hung nsqd keeps its
  connection, so its registrations) and the channels. A topic it answers with no
  producer is on a killed nsqd or a registration nsqlookupd kept after its last
  producer left, which nothing tells apart: it is put on the nsqds that did not answer
  as that guess (:mod:`nsqctl.stats.unseen`); one whose ``/lookup`` no nsqlookupd
  answered is put on them too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace

import httpx

from nsqctl.addresses import parse_addresses
from nsqctl.errors import NsqctlError
from nsqctl.httpclient import describe_http_error, http_client
from nsqctl.lookup.client import ACCEPT_V1, ListLookupRefusedError, LookupClient
from nsqctl.lookup.topology import TopicMeta, Topology
from nsqctl.stats.model import (
    ClusterSnapshot,
    ClusterStability,
    CoordInfo,
    LookupdStatus,
    NodeStats,
    UnseenTopic,
)
from nsqctl.stats.parse import (
    decode,
    nsqd_tcp_to_http,
    parse_cluster_stats,
    parse_coordinator_stats,
    parse_nsqd_body,
    parse_nsqd_info,
    resolve_node_ids,
)
from nsqctl.stats.read import ClientScope, scope_params, stats_params
from nsqctl.stats.unseen import place_unseen

DEFAULT_TIMEOUT = 2.0
SLOW_AFTER = 1.0
NOT_ANSWERING = "not answering"
"""How a node that timed out is described (its ``NodeStats.error`` starts with it)."""
COORDINATOR_CONCURRENCY = 8
"""At most this many ``/coordinator/stats`` requests at once (focus on every topic)."""


class StatsPoller:
    """Fetches a :class:`ClusterSnapshot`; ``topic``/``channel`` narrow the ``/stats`` asked.

    ``focus`` names the topics whose ISR to ask (``None``: every topic); ``topic`` is always
    in focus. ``clients`` names whose client connections to list: topics, or ``(topic,
    channel)`` for one channel's (``None``: every topic's; ignored when ``topic`` narrows
    the poll, which lists its clients).
    Every request of a poll, the lookupds' too, goes through one httpx client, whose
    connections stay open between polls; ``transport`` is its transport (httpx's), for
    recording polls and replaying them (:mod:`nsqctl.stats.recording`).
    """

    def __init__(
        self,
        lookupd_http: Sequence[str] = (),
        nsqd_http: Sequence[str] = (),
        *,
        topic: str | None = None,
        channel: str | None = None,
        focus: Iterable[str] | None = (),
        clients: Iterable[ClientScope] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        slow_after: float = SLOW_AFTER,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not lookupd_http and not nsqd_http:
            raise NsqctlError("no cluster to poll: give lookupd or nsqd HTTP addresses")
        self.topic = topic
        self.channel = channel
        self.timeout = timeout
        self.slow_after = slow_after
        self._focus: frozenset[str] | None = None
        self.set_focus(focus)
        self._clients: tuple[ClientScope, ...] | None = None
        self.set_clients(clients)
        self._lookupd = [str(a) for a in parse_addresses(list(lookupd_http))]
        self._known: dict[str, None] = {
            str(a): None for a in parse_addresses(list(nsqd_http), example="127.0.0.1:4151")
        }
        self._tcp_to_http: dict[str, str] = {}  # nsqd ``host:tcp_port`` → polled HTTP address
        self._info_asked: set[str] = set()
        self._meta: dict[str, TopicMeta] = {}  # redesign topic → its meta, from nsqlookupd
        # redesign topic → partition → the leader nsqlookupd lists, for the topics asked
        # this poll (see :attr:`ClusterSnapshot.listed_leaders`)
        self._listed_leaders: dict[str, dict[int, str]] = {}
        self._meta_answered: set[str] = set()  # topics a lookupd answered the meta of
        self._answered: dict[str, NodeStats] = {}  # nsqd → its last answer to /stats
        self._listed: dict[str, UnseenTopic] = {}  # unseen topic → its nsqlookupd /lookup
        self._redesign = False  # a redesign nsqd answered once (its topic_meta covers this)
        self._gone: set[str] = set()  # topics a lookupd last answered as not found
        self._http = http_client(
            timeout=timeout, headers={"Accept": ACCEPT_V1}, transport=transport
        )
        self._lookup = (
            LookupClient(self._lookupd, timeout=timeout, http=self._http) if self._lookupd else None
        )
        # the metas: one /lookup per topic, so no /listlookup before each (``_lookup``
        # learns the lookupds once per poll already)
        self._meta_lookup = (
            LookupClient(self._lookupd, timeout=timeout, http=self._http, discover=False)
            if self._lookupd
            else None
        )

    @property
    def known_nsqd(self) -> list[str]:
        return list(self._known)

    def set_focus(self, topics: Iterable[str] | None) -> None:
        """Topics whose ISR and catch-up later polls ask for; ``None`` for every topic."""
        self._focus = None if topics is None else frozenset(topics)

    def focused(self, topic: str) -> bool:
        return self._focus is None or topic in self._focus or topic == self.topic

    def set_clients(self, scopes: Iterable[ClientScope] | None) -> None:
        """Whose client connections later polls list (topics, or ``(topic, channel)``);
        ``None`` for every topic's."""
        self._clients = None if scopes is None else tuple(dict.fromkeys(scopes))

    async def aclose(self) -> None:
        await self._http.aclose()
        if self._lookup is not None:
            await self._lookup.aclose()
        if self._meta_lookup is not None:
            await self._meta_lookup.aclose()

    async def __aenter__(self) -> StatsPoller:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------- lookupd

    async def _lookupds(self, errors: list[str]) -> tuple[list[LookupdStatus], str | None]:
        """Ping every lookupd, learn nsqds from ``/nodes`` and the leader from ``/listlookup``.

        The three run at once, so a dead lookupd costs one timeout per poll, not three.
        """
        lookup = self._lookup
        if lookup is None:
            return [], None

        refused: dict[str, str] = {}  # lookupd → why it could not list (no etcd)

        async def listing() -> str | None:
            for address in dict.fromkeys(self._lookupd):
                try:
                    found = await lookup.listlookup(address)
                except ListLookupRefusedError as exc:
                    refused[address] = exc.reason or str(exc)
                    continue
                except (NsqctlError, httpx.HTTPError):
                    continue
                if found is None:
                    return None  # an original or standalone lookupd: no leader to learn
                for node in found.nodes:  # learned once; the list must not grow per poll
                    if str(node.http_address) not in self._lookupd:
                        self._lookupd.append(str(node.http_address))
                return None if found.leader is None else str(found.leader.http_address)
            return None

        async def producers() -> None:
            try:
                nodes = await lookup.nodes()
            except NsqctlError as exc:
                errors.append(str(exc))
            else:
                for tcp, address in nsqd_tcp_to_http(nodes).items():
                    self._known.setdefault(address, None)
                    self._tcp_to_http[tcp] = address

        known = list(dict.fromkeys(self._lookupd))
        leader, pinged, _ = await asyncio.gather(
            listing(), asyncio.gather(*(lookup.ping(a) for a in known)), producers()
        )
        ok = dict(zip(known, pinged, strict=True))
        learned = [a for a in dict.fromkeys(self._lookupd) if a not in ok]
        if learned:  # lookupds that /listlookup just told us about
            pings = await asyncio.gather(*(lookup.ping(a) for a in learned))
            ok.update(zip(learned, pings, strict=True))
        statuses = [
            LookupdStatus(
                address=a,
                ok=up,
                is_leader=a == leader,
                error="" if up else "no answer to /ping",
                etcd_error=refused.get(a, "") if up else "",
            )
            for a, up in ok.items()
        ]
        return statuses, leader

    async def _cluster_stats(self, leader: str | None) -> ClusterStability | None:
        if leader is None:
            return None
        try:
            resp = await self._http.get(f"http://{leader}/cluster/stats")
            if resp.status_code != 200:
                return None
            return parse_cluster_stats(decode(resp.content), leader)
        except (httpx.HTTPError, ValueError, NsqctlError):
            return None

    # ------------------------------------------------------------- nsqd

    def _stats_requests(self) -> tuple[dict[str, str], list[dict[str, str]]]:
        """The ``/stats`` query of each nsqd, and of the narrower ones whose topics (with
        their clients) replace its records."""
        if self.topic or self._clients is None:
            return stats_params(self.topic, self.channel), []
        return stats_params(clients=False), [scope_params(s) for s in self._clients]

    async def _fetch(self, address: str, path: str, params: dict[str, str]) -> tuple[bytes, float]:
        start = time.monotonic()
        resp = await self._http.get(f"http://{address}{path}", params=params)
        if resp.status_code != 200:
            raise NsqctlError(f"HTTP {resp.status_code}")
        return resp.content, time.monotonic() - start

    async def _stats_bodies(self, address: str) -> tuple[bytes, list[bytes], float]:
        """The node's ``/stats`` and the narrower ones, asked at once; a narrower one that
        fails is left out (its topic then shows no clients), the node's own fails the node."""
        params, narrower = self._stats_requests()
        main, *details = await asyncio.gather(
            self._fetch(address, "/stats", params),
            *(self._fetch(address, "/stats", p) for p in narrower),
            return_exceptions=True,
        )
        if isinstance(main, BaseException):
            raise main
        body, elapsed = main
        found = [d for d in details if not isinstance(d, BaseException)]
        return body, [d[0] for d in found], max([elapsed, *(d[1] for d in found)])

    async def _node(self, address: str) -> NodeStats:
        fetched_at = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout):
                body, details, elapsed = await self._stats_bodies(address)
            node = await asyncio.to_thread(
                parse_nsqd_body,
                body,
                address,
                fetched_at=fetched_at,
                elapsed=elapsed,
                details=details,
            )
        except (httpx.HTTPError, TimeoutError, NsqctlError, ValueError) as exc:
            return NodeStats(
                address=address, fetched_at=fetched_at, state="down", error=self._why_down(exc)
            )
        if node.state == "up" and elapsed > self.slow_after:
            node = replace(node, state="slow")
        return node

    def _why_down(self, exc: BaseException) -> str:
        """A node that accepted the connection and then said nothing (SIGSTOP, a full disk,
        a stalled VM: its sockets stay open) is "not answering", apart from one that
        refused it (dead) or answered badly."""
        if isinstance(exc, (TimeoutError, httpx.TimeoutException)):
            return f"{NOT_ANSWERING} within {self.timeout:g}s"
        if isinstance(exc, ValueError):  # bad JSON, or a field that does not fit
            return f"/stats is unreadable: {exc}"
        return describe_http_error(exc)

    def _coordinator_targets(self, nodes: Sequence[NodeStats]) -> list[tuple[str, str]]:
        """``(nsqd, topic)`` pairs to ask: for each partition of a focused topic its leader,
        or, when none leads, every nsqd holding it."""
        holders: dict[tuple[str, int], list[str]] = defaultdict(list)
        leaders: dict[tuple[str, int], str] = {}
        for node in nodes:
            if not node.is_redesign or node.state == "down":
                continue
            for t in node.topics:
                if t.partition is None or not self.focused(t.topic):
                    continue
                holders[(t.topic, t.partition)].append(node.address)
                if t.is_leader:
                    leaders[(t.topic, t.partition)] = node.address
        pairs: dict[tuple[str, str], None] = {}
        for key, held in holders.items():
            for address in [leaders[key]] if key in leaders else held:
                pairs[(address, key[0])] = None
        return list(pairs)

    async def _coordinator(
        self, address: str, topic: str, limit: asyncio.Semaphore
    ) -> tuple[CoordInfo, ...]:
        try:
            async with limit:
                async with asyncio.timeout(self.timeout):
                    body, _ = await self._fetch(address, "/coordinator/stats", {"topic": topic})
            infos = parse_coordinator_stats(decode(body), address)
        except (httpx.HTTPError, TimeoutError, NsqctlError, ValueError):
            return ()  # standalone redesign nsqd: coordinator disabled
        return tuple(i for i in infos if i.topic == topic)

    async def _learn_tcp_address(self, address: str) -> None:
        """Map an nsqd lookupd did not list to its TCP address via ``/info`` (asked once)."""
        self._info_asked.add(address)
        try:
            async with asyncio.timeout(self.timeout):
                body, _ = await self._fetch(address, "/info", {})
            tcp = parse_nsqd_info(decode(body), address)
        except (httpx.HTTPError, TimeoutError, NsqctlError, ValueError):
            return
        self._tcp_to_http.setdefault(tcp, address)

    def _meta_wanted(self, nodes: Sequence[NodeStats], remembered: Iterable[str] = ()) -> list[str]:
        """Redesign topics whose meta to ask nsqlookupd for: each one not asked yet, and
        each whose partitions seen on the nsqds that answered are not exactly the ones
        its meta counts (a partition with no live copy, or one added since). A cluster
        that is whole asks nothing after its first poll. ``remembered``: topics held
        only by nsqds that are down (:meth:`_remembered_partitions`), asked like the rest."""
        if self._meta_lookup is None:
            return []
        seen: dict[str, set[int]] = defaultdict(set)
        led: dict[str, set[int]] = defaultdict(set)
        if self.topic is None:  # a topic once seen is asked until it is back or deleted
            seen.update((t, set()) for t in self._meta)
        seen.update((t, set()) for t in remembered if t not in seen)
        for node in nodes:
            if node.state == "down" or not node.is_redesign:
                continue
            for t in node.topics:
                if t.partition is not None and (self.topic is None or t.topic == self.topic):
                    seen[t.topic].add(t.partition)
                    if t.is_leader:
                        led[t.topic].add(t.partition)
        if self.topic is not None:
            seen.setdefault(self.topic, set())  # held by no nsqd that answered: ask anyway
        wanted = []
        for topic, parts in seen.items():
            meta = self._meta.get(topic)
            if meta is not None and parts != set(range(meta.partition_num)):
                wanted.append(topic)
            elif meta is not None and parts != led[topic]:
                wanted.append(topic)  # a copy without its leader: which one nsqlookupd lists
            elif meta is None and topic not in self._meta_answered:
                wanted.append(topic)  # once: an original topic (or an old nsqd's) has none
        return wanted

    async def _ask_lookup(
        self, topic: str, limit: asyncio.Semaphore, *, metainfo: bool
    ) -> Topology | None:
        """One ``/lookup`` of ``topic`` (at most ``limit`` at once); None when no lookupd
        answered it."""
        assert self._meta_lookup is not None
        try:
            async with limit:
                return await self._meta_lookup.lookup(topic, "r", metainfo=metainfo)
        except NsqctlError:
            return None

    async def _topic_meta(self, topic: str, limit: asyncio.Semaphore) -> None:
        """Refresh one topic's meta; kept as it was when no lookupd answers."""
        topo = await self._ask_lookup(topic, limit, metainfo=True)
        if topo is None or topo.stale:
            return
        if topo.topic_not_found:
            self._meta.pop(topic, None)  # deleted: asked again if it comes back
            self._meta_answered.discard(topic)
            self._gone.add(topic)
            return
        self._meta_answered.add(topic)
        self._gone.discard(topic)
        if topo.meta is not None and topo.meta.valid:
            self._meta[topic] = topo.meta
        self._listed_leaders[topic] = {p: peer.http_key for p, peer in topo.partitions.items()}

    def _remember(self, nodes: Sequence[NodeStats]) -> tuple[list[str], set[str]]:
        """Keep each nsqd's last answer (a reference: nothing is copied on a quiet poll);
        the nsqds that did not answer, and the topics the others hold."""
        down: list[str] = []
        for node in nodes:
            if node.state == "down":
                down.append(node.address)
            else:
                self._redesign = self._redesign or node.is_redesign
                self._answered[node.address] = node
        if not down:
            return down, set()
        seen = {t.topic for n in nodes if n.state != "down" for t in n.topics}
        return down, seen

    async def _unseen_topics(self, nodes: Sequence[NodeStats]) -> dict[str, UnseenTopic]:
        """Original topics no answering nsqd holds, with the nsqds holding them and their
        channels as far as known (see the module doc for the sources and their cost)."""
        down, seen = self._remember(nodes)
        if not down or self._redesign:
            self._listed.clear()
            return {}
        holders: dict[str, dict[str, None]] = defaultdict(dict)
        channels: dict[str, dict[str, None]] = defaultdict(dict)
        for address in down:
            last = self._answered.get(address)
            for t in last.topics if last is not None else ():
                if t.topic not in seen and (self.topic is None or t.topic == self.topic):
                    holders[t.topic][address] = None
                    channels[t.topic].update(dict.fromkeys(c.name for c in t.channels))
        remembered = {t: UnseenTopic(tuple(h), tuple(channels[t])) for t, h in holders.items()}
        missing: list[str] = []
        if self._lookup is not None:
            with contextlib.suppress(NsqctlError, httpx.HTTPError):
                listed = await self._lookup.topics()
                missing = [
                    t for t in listed if t not in seen and (self.topic is None or t == self.topic)
                ]
                self._listed = {t: u for t, u in self._listed.items() if t in missing}
                ask = [t for t in missing if t not in remembered and t not in self._listed]
                limit = asyncio.Semaphore(COORDINATOR_CONCURRENCY)
                await asyncio.gather(*(self._lookup_unseen(t, limit) for t in ask))
        return place_unseen(down, remembered, missing, self._listed)

    async def _lookup_unseen(self, topic: str, limit: asyncio.Semaphore) -> None:
        """Ask nsqlookupd which nsqds hold ``topic`` and its channels (noted until the
        topic is seen again); an answer naming no producer is noted as such
        (``unregistered``), one not knowing the topic as no holder at all (it is gone)."""
        topo = await self._ask_lookup(topic, limit, metainfo=False)
        if topo is None or topo.stale:
            return
        if topo.topic_not_found:
            self._listed[topic] = UnseenTopic()
            return
        producers = tuple(str(p.http_address) for p in topo.producers)
        self._listed[topic] = UnseenTopic(producers, topo.channels, unregistered=not producers)

    def _remembered_partitions(self, nodes: Sequence[NodeStats]) -> dict[str, tuple[int, ...]]:
        """Redesign partitions that no nsqd answering this poll holds and that an nsqd now
        down held when it last answered (:meth:`_remember` keeps that answer).

        What tells the views such a partition exists when no nsqlookupd gave the topic's
        meta (every one was down since this session began): without it the partition
        would vanish from every view the moment its only copy's nsqd died, instead of
        showing as a partition with no live copy. Kept only while that nsqd stays down,
        and not for a topic a lookupd has since answered as not found (deleted).
        """
        live: set[tuple[str, int]] = set()
        for node in nodes:
            if node.state != "down":
                live.update((t.topic, t.partition) for t in node.topics if t.partition is not None)
        held: dict[str, set[int]] = defaultdict(set)
        for node in nodes:
            last = self._answered.get(node.address) if node.state == "down" else None
            for t in last.topics if last is not None else ():
                if (
                    t.partition is not None
                    and (t.topic, t.partition) not in live
                    and t.topic not in self._gone
                    and (self.topic is None or t.topic == self.topic)
                ):
                    held[t.topic].add(t.partition)
        return {topic: tuple(sorted(parts)) for topic, parts in held.items()}

    def _known_meta(self) -> dict[str, TopicMeta]:
        """The metas of the topics this poll shows."""
        if self.topic is not None:
            meta = self._meta.get(self.topic)
            return {self.topic: meta} if meta is not None else {}
        return dict(self._meta)

    async def snapshot(self) -> ClusterSnapshot:
        errors: list[str] = []
        lookupds, leader = await self._lookupds(errors)
        nodes = await asyncio.gather(*(self._node(a) for a in self._known))
        targets = self._coordinator_targets(nodes)
        mapped = set(self._tcp_to_http.values())
        unmapped = set()
        if targets:  # an ISR may name any redesign nsqd, not only the leaders asked
            unmapped = {
                n.address
                for n in nodes
                if n.is_redesign
                and n.state != "down"
                and n.address not in mapped
                and n.address not in self._info_asked
            }
        limit = asyncio.Semaphore(COORDINATOR_CONCURRENCY)
        self._listed_leaders = {}
        remembered = self._remembered_partitions(nodes)
        metas = self._meta_wanted(nodes, remembered)
        coord_lists, cluster, _, _, unseen = await asyncio.gather(
            asyncio.gather(*(self._coordinator(a, t, limit) for a, t in targets)),
            self._cluster_stats(leader),
            asyncio.gather(*(self._learn_tcp_address(a) for a in unmapped)),
            asyncio.gather(*(self._topic_meta(t, limit) for t in metas)),
            self._unseen_topics(nodes),
        )
        coordinator = resolve_node_ids([c for lst in coord_lists for c in lst], self._tcp_to_http)
        return ClusterSnapshot(
            taken_at=time.time(),
            nodes=tuple(nodes),
            lookupds=tuple(lookupds),
            coordinator=coordinator,
            cluster=cluster,
            errors=tuple(errors),
            topic_meta=self._known_meta(),
            unseen_topics=unseen,
            listed_leaders=dict(self._listed_leaders),
            # a topic this poll's lookup found deleted is dropped at once
            unseen_partitions={t: p for t, p in remembered.items() if t not in self._gone},
            deleted_topics=self._left_behind(nodes),
        )

    def _left_behind(self, nodes: Sequence[NodeStats]) -> frozenset[str]:
        """The topics nsqlookupd last answered as not found (:attr:`_gone`) that an nsqd
        answering this poll still holds a partition of: only those, so the set stays as
        small as the data left behind (:attr:`ClusterSnapshot.deleted_topics`)."""
        if not self._gone:
            return frozenset()
        return frozenset(
            t.topic
            for node in nodes
            if node.state != "down"
            for t in node.topics
            if t.partition is not None and t.topic in self._gone
        )
