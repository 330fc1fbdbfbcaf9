"""Before subscribing a redesign partition again: is the leader's channel missing or past
the position this consumer confirmed? If so, the subscription starts from that position.

See :mod:`.position` for why. The leader's channel position is read from its ``/stats``
(the one reader, :mod:`nsqctl.stats.read`) just before the SUB: an unordered subscription
then starts with SUB_ADVANCED ``virtual_queue:<position>`` (it applies when this is the
channel's first consumer, as after a failover); youzan's SUB_ORDERED takes no start, so
for an ordered one the channel is made if missing and its offset set first (nsqd's
``/channel/create`` and ``/channel/setoffset``, as the admin's ``channel setoffset``).

Which channels are moved back: see :func:`.position.plan_resume`.

The same ``/stats`` read answers a second question, right after a partition whose log was
empty was subscribed from its end (youzan refuses every start there): does the channel
start past the partition's first message, i.e. was something published in between
(:meth:`Resumer.skipped_start`)?
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nsqctl.addresses import HostPort
from nsqctl.consumer.position import ConfirmedPositions, ResumePlan, plan_resume, skips_start
from nsqctl.errors import TransportError
from nsqctl.failover import RESUMED_FROM_CONFIRMED
from nsqctl.lookup.client import ACCEPT_V1
from nsqctl.protocol.commands import start_virtual_queue

if TYPE_CHECKING:
    import httpx

    from nsqctl.stats.model import TopicPartitionStats

log = logging.getLogger("nsqctl.consumer")

HTTP_TIMEOUT = 5.0


class Resumer:
    """Keeps the confirmed positions (fed by the delivery path) and plans each partition's
    resume on a new connection."""

    def __init__(self, topic: str, channel: str, *, ordered: bool) -> None:
        self.topic = topic
        self.channel = channel
        self.ordered = ordered
        self.positions = ConfirmedPositions()
        self._plans: dict[int, ResumePlan] = {}  # resumed, not reported yet
        self._read_from: dict[int, str] = {}  # partition -> HTTP address last subscribed
        self._http: httpx.AsyncClient | None = None

    async def start_for(self, partition: int | None, nsqd_http: HostPort | None) -> str | None:
        """The SUB_ADVANCED start for ``partition``'s next subscription on the nsqd at
        ``nsqd_http``; None to subscribe as usual. For an ordered subscription the channel
        is moved here instead, and None returned. Never raises: a leader that cannot be
        asked is subscribed as usual (logged)."""
        if partition is None or nsqd_http is None:
            return None
        address = str(nsqd_http)
        same_nsqd = self._read_from.get(partition) == address
        self._read_from[partition] = address
        position = self.positions.position(partition)
        if position is None:
            return None  # nothing received yet: nothing this consumer could skip
        from nsqctl.stats.parse import StatsProtocolError  # see _copy

        try:
            copy = await self._copy(partition, address)
            plan = plan_resume(position, copy, self.channel, same_nsqd=same_nsqd)
            if plan is None:
                return None
            log.warning("%s", plan.describe(self.topic, self.channel, address))
            if self.ordered:
                await self._move_channel(address, plan)
        except (TransportError, StatsProtocolError) as err:
            log.warning(
                "%s/%s: cannot tell whether %s has channel %r at the confirmed offset %d "
                "(subscribing as usual): %s",
                self.topic,
                partition,
                address,
                self.channel,
                position,
                err,
            )
            return None
        self._plans[partition] = plan
        return None if self.ordered else start_virtual_queue(plan.position)

    async def skipped_start(self, partition: int | None, nsqd_http: HostPort | None) -> bool | None:
        """Whether the channel just subscribed from the end of ``partition``, whose log was
        empty when nsqd refused the start asked for, starts past the partition's first
        message: then something was published in between (:func:`.position.skips_start`).
        None when that cannot be told (logged, unless no HTTP address is known): the
        subscription stays as it is."""
        if partition is None or nsqd_http is None:
            return None
        from nsqctl.stats.parse import StatsProtocolError  # see _copy

        address = str(nsqd_http)
        try:
            skipped = skips_start(await self._copy(partition, address), self.channel)
        except (TransportError, StatsProtocolError) as err:
            skipped, why = None, str(err)
        else:
            why = "its /stats list no copy of the partition with the channel's byte offsets"
        if skipped is None:
            log.warning(
                "%s/%s: cannot tell whether a message was published on %s between its "
                "refusal of the start and the subscription from its end: %s",
                self.topic,
                partition,
                address,
                why,
            )
        return skipped

    async def _copy(self, partition: int, address: str) -> TopicPartitionStats | None:
        """The copy of the partition on the nsqd at ``address`` (HTTP), from its ``/stats``;
        raises :class:`TransportError` when it cannot be asked and ``StatsProtocolError``
        when it answers something else."""
        # imported here (the stats modules, as StatsProtocolError in the callers), not at
        # the top: every consumer imports this module, and only one that resubscribes after
        # receiving anything, or reads an empty partition's history, reads /stats (httpx
        # and the stats model are a visible part of a short tail's start-up)
        from nsqctl.stats.read import fetch_nsqd_stats

        node = await fetch_nsqd_stats(
            self._client(), address, topic=self.topic, channel=self.channel
        )
        return node.topic(self.topic, partition)

    def take_reason(self, partition: int | None) -> str:
        """The failover event's reason for ``partition`` just subscribed: set once after a
        resume from the confirmed position."""
        if partition is None or self._plans.pop(partition, None) is None:
            return ""
        return RESUMED_FROM_CONFIRMED

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _client(self) -> httpx.AsyncClient:
        from nsqctl.httpclient import http_client

        if self._http is None:
            self._http = http_client(timeout=HTTP_TIMEOUT, headers={"Accept": ACCEPT_V1})
        return self._http

    async def _move_channel(self, address: str, plan: ResumePlan) -> None:
        """Make the channel (when missing) and set its offset to the plan's position."""
        import httpx

        from nsqctl.httpclient import describe_http_error

        params = {"topic": self.topic, "channel": self.channel, "partition": str(plan.partition)}
        client = self._client()
        steps: list[tuple[str, bytes | None]] = (
            [("create", None)] if plan.channel_at is None else []
        )
        steps.append(("setoffset", start_virtual_queue(plan.position).encode()))
        for action, body in steps:
            try:
                resp = await client.post(
                    f"http://{address}/channel/{action}", params=params, content=body
                )
            except httpx.HTTPError as err:
                raise TransportError(
                    f"nsqd {address} /channel/{action}: {describe_http_error(err)}"
                ) from None
            if resp.status_code != 200:
                raise TransportError(
                    f"nsqd {address} /channel/{action} answered HTTP {resp.status_code}: "
                    f"{resp.text[:200]}"
                )
