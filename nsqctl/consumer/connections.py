"""A consumer's connections: follow the topology (one connection per nsqd and partition
it reads), connect and subscribe, and reconnect with backoff when one is lost.

:class:`ConnectionSet` owns the targets, the open connections and the reconnect timers.
It opens connections through a ``dial`` function and reports each one subscribed
(``on_connected``) or gone (``on_dropped``), so it knows nothing of messages or RDY (and
is tested with a fake ``dial``, without sockets).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING

from nsqctl import protocol as p
from nsqctl.addresses import HostPort
from nsqctl.consumer.attempts import Attempt, Verdict, after_gap, after_refusal
from nsqctl.consumer.options import ORDERED_START, ConsumerOptions
from nsqctl.consumer.stats import ConsumerStats
from nsqctl.errors import (
    ConfigError,
    ConnectError,
    NoConnectionError,
    NoConnectionTimeoutError,
    NsqctlError,
    NsqctlTimeoutError,
)

if TYPE_CHECKING:
    from nsqctl.connection import Connection
    from nsqctl.connection.tcp import CloseHandler, ErrorHandler
    from nsqctl.lookup.topology import Topology

#: A dial refused for the connection's own settings (see _dial_target).
_SETTINGS_REFUSED: tuple[type[NsqctlError], ...] = (ConfigError, *p.TLS_REFUSALS)

log = logging.getLogger("nsqctl.consumer")

Target = tuple[HostPort, int | None]  # (nsqd tcp address, partition)

#: Errors an ordered reader gets, harmlessly, for a message sent before youzan reset the
#: channel's reader (the answer came for the first copy; the second is in flight).
_AFTER_ORDERED_RESET = ("E_FIN_FAILED", "E_REQ_FAILED")

#: Opens one connection to an nsqd address with the given error and close handlers.
Dial = Callable[[HostPort, "ErrorHandler", "CloseHandler"], Awaitable["Connection"]]
#: ``conn`` is subscribed and reads the target.
OnConnected = Callable[[Target, "Connection"], None]
#: ``conn`` is gone; ``lost`` when it broke (not closed by us, not left the topic).
OnDropped = Callable[[Target, "Connection", bool], None]
#: The SUB_ADVANCED start for a partition's next subscription on the nsqd whose HTTP
#: address is given (None if unknown); None to subscribe as usual.
ResumeStart = Callable[[int | None, HostPort | None], Awaitable[str | None]]
#: Whether the channel just subscribed from the end of a partition whose log was empty
#: starts past the partition's first message (on the nsqd whose HTTP address is given);
#: None when that cannot be told.
SkippedStart = Callable[[int | None, HostPort | None], Awaitable[bool | None]]


def _subscribe_failure(address: HostPort, err: NsqctlError) -> str:
    """A subscription's failure in words: refused by nsqd (an error frame), unanswered (a
    deadline), or cut off (the connection lost while subscribing)."""
    if isinstance(err, p.ServerError):
        return f"nsqd {address} refused the subscription: {err}"
    if isinstance(err, NsqctlTimeoutError):
        return f"nsqd {address} did not answer the subscription: {err}"
    return f"the subscription on nsqd {address} failed: {err}"


class ConnectionSet:
    """Connections of one subscription: which to have, open them, keep them open."""

    def __init__(
        self,
        topic: str,
        channel: str,
        options: ConsumerOptions,
        stats: ConsumerStats,
        *,
        dial: Dial,
        on_connected: OnConnected,
        on_dropped: OnDropped,
        rng: random.Random,
        refresh: Callable[[], None] | None = None,
        waiting_for_leader: Callable[[int | None], bool] = lambda partition: False,
        resume_start: ResumeStart | None = None,
        skipped_start: SkippedStart | None = None,
        on_fatal: Callable[[BaseException], None] = lambda error: None,
        on_attempting: Callable[[int], None] = lambda count: None,
    ) -> None:
        self.topic = topic
        self.channel = channel
        self.stats = stats
        self._options = options
        self._dial = dial
        self._on_connected = on_connected
        self._on_dropped = on_dropped
        self._rng = rng
        # Asks the lookup for a fresh topology; None when the nsqds were given directly
        # (then the targets are fixed and a lost one is only reconnected).
        self._refresh = refresh
        self._waiting_for_leader = waiting_for_leader
        self._resume_start = resume_start
        self._skipped_start = skipped_start
        self._on_fatal = on_fatal
        # Told how many connections are held or being made, so the flow control plans RDY
        # shares for the partitions still connecting (see FlowControl.expect_connections).
        self._on_attempting = on_attempting
        self._attempting: set[Target] = set()
        self._http_of: dict[HostPort, HostPort] = {}  # nsqd TCP address -> its HTTP address
        self._conns: dict[Target, Connection] = {}
        self._targets: set[Target] = set()
        self._connecting: dict[Target, asyncio.Task[None]] = {}
        self._reconnect_delay: dict[Target, float] = {}
        self._connect_errors: dict[HostPort, str] = {}  # nsqd address -> last failure (start-up)
        # nsqd addresses whose last failure was a deadline (no connect, handshake or reply
        # in time): a positive record, so that a failure of any other kind (a refused
        # socket, a refused subscription) never passes for silence
        self._timed_out: set[HostPort] = set()
        self._stopping = False
        # A subscription succeeded once: a refused secret after that is no wrong secret
        # given at start-up but, as likely, an auth server nsqd could not reach
        self._subscribed_once = False
        # set by the consumer once its start() has returned (see :meth:`start_ended`)
        self._start_ended = False
        self._settled = False  # see :attr:`settled`
        #: An error no reconnect can cure (a bad topic, a refused subscription option).
        self.fatal: BaseException | None = None
        self._warned_missing = False  # the missing topic was logged (once per consumer)

    def _set_fatal(self, error: BaseException) -> None:
        """Keep the first error no reconnect can cure, and report it (a consumer that
        is running raises it to whoever waits on it)."""
        if self.fatal is None:
            self.fatal = error
            self._on_fatal(error)

    def _check_topology(self, topo: Topology) -> None:
        """Say so when the lookup's answer means nothing will be read: a topic no nsqd
        has (a warning, once: it may be created later), or partitions asked of a topic
        that has no such partitions (fatal: no waiting makes them appear)."""
        if topo.is_empty:
            if not self._warned_missing:
                self._warned_missing = True
                log.warning(
                    "topic %r is on no nsqd the lookup knows (not created yet, a wrong "
                    "name, or no leader listed): waiting for it",
                    self.topic,
                )
            return
        partitions = self._options.partitions
        if partitions is None:
            return
        if not topo.partitions:
            self._set_fatal(
                ConfigError(
                    f"partitions={list(partitions)!r} given, but topic {self.topic!r} is on "
                    "nsqds of the original NSQ family, which has no partitions: leave "
                    "partitions unset",
                    setting="partitions",
                )
            )
        elif topo.meta is not None and topo.meta.valid:
            beyond = sorted(p for p in partitions if p >= topo.meta.partition_num)
            if beyond:
                self._set_fatal(
                    ConfigError(
                        f"partitions {beyond} do not exist: topic {self.topic!r} has "
                        f"partitions 0..{topo.meta.partition_num - 1}",
                        setting="partitions",
                    )
                )

    @property
    def connections(self) -> dict[Target, Connection]:
        """The subscribed connections (the live mapping: read it, never change it)."""
        return self._conns

    def unconnected(self) -> set[Target]:
        """The targets to read that have no subscribed connection now: connecting, or
        waiting to be reconnected (a target the lookup no longer lists is not one)."""
        return self._targets - self._conns.keys()

    async def sync(self, topo: Topology) -> None:
        """Connect to every target of ``topo``; with a lookupd, drop the partitions it moved
        elsewhere (redesign)."""
        wanted = set()
        partitions = self._options.partitions
        if not topo.stale:
            self._check_topology(topo)
        for peer, part in topo.targets():
            if partitions is not None and part not in partitions:
                continue
            wanted.add((peer.tcp_address, part))
            if peer.http_port:
                self._http_of[peer.tcp_address] = peer.http_address
        if topo.stale and not wanted:
            return
        # Before any close is awaited: a connection of a target the lookup dropped that
        # ends meanwhile is then not reconnected.
        self._targets = wanted | (self._targets if topo.stale else set())
        if not topo.stale and self._refresh is not None:
            # the topic still listed (youzan lists one whose every partition is leaderless
            # by its meta alone), not deleted
            listed = not topo.is_empty or (topo.meta is not None and topo.meta.valid)
            await self._drop_unlisted(wanted, moved=listed)
        await asyncio.gather(*(self._ensure(t) for t in wanted if t not in self._conns))
        # settled only once a whole round of connects has answered: within one round,
        # which nsqd answers first must not decide whether a refusal is fatal
        self._settled = self._settled or (self._start_ended and self._subscribed_once)

    async def _drop_unlisted(self, wanted: set[Target], *, moved: bool) -> None:
        """Close the partitions the lookup no longer lists where they are read (redesign):
        ``moved`` (the topic is still listed), each counted lost until it is read on its
        new leader; else the topic is gone (deleted), and so are they. All leave the
        books before the first close is awaited, and are closed together: a close waits
        for nsqd's answer to CLS (up to its timeout on a hung one), and meanwhile another
        connection may end on its own and leave the books itself."""
        dropped: list[Connection] = []
        for target in [t for t in self._conns if t not in wanted]:
            if target[1] is None:
                # Original family: lookupd stops listing an nsqd that is tombstoned
                # (drained) or gone. A live connection keeps reading what that nsqd
                # still holds, as go-nsq does, or a drain would never empty it; it is
                # only not reconnected once it closes (it left ``_targets``).
                continue
            if moved:
                # Said as a lost connection is: a hung leader is often found this way, the
                # lookup naming its successor before the heartbeat deadline passed. Lost,
                # the partition waits for its new leader as after a kill (reported, and
                # given up on after the failover window).
                log.warning(
                    "nsqd %s no longer leads %s/%s (the lookup names another leader, or "
                    "none yet): closing it and reading the partition on the new leader",
                    target[0],
                    self.topic,
                    target[1],
                )
            else:
                log.info("nsqd %s partition %s left topic %s", *target, self.topic)
            conn = self._conns.pop(target)
            self._on_dropped(target, conn, moved)
            dropped.append(conn)
        if not dropped:
            return
        self.stats.connections = len(self._conns)
        self._count_attempting()
        await asyncio.gather(*(conn.close() for conn in dropped))

    def unreached_error(self, addresses: Iterable[HostPort | None]) -> type[NoConnectionError]:
        """The error for the nsqds at ``addresses`` staying out of reach:
        :class:`NoConnectionTimeoutError` when every one of them let a deadline pass (its
        last failure was a timeout, or its first attempt is still unanswered: a connect,
        handshake or SUB under way), as a hung nsqd does; else :class:`NoConnectionError`
        (one refused the connection or the subscription). None (a partition no nsqd leads)
        is no silent nsqd, so never a timeout."""
        seen = set(addresses)
        if None in seen:
            return NoConnectionError
        silent = all(
            address in self._timed_out or address not in self._connect_errors for address in seen
        )
        return NoConnectionTimeoutError if silent else NoConnectionError

    async def await_first(self, limit: float | None, since: float | None = None) -> None:
        """Fail fast (:attr:`fatal`) when the known nsqds cannot be reached at all (a wrong
        address, nothing running, a server that never answers) within ``limit`` seconds of
        ``since`` (the loop's clock; default now); a topic lookupd lists on no nsqd yet is
        waited for, like nsq_tail does."""
        if limit is None:
            return
        loop = asyncio.get_running_loop()
        deadline = (loop.time() if since is None else since) + limit
        while not self._conns and self._targets and self.fatal is None and not self._stopping:
            if asyncio.get_running_loop().time() >= deadline:
                targeted = {address for address, _part in self._targets}
                silent = sorted(str(address) for address in targeted)
                # only the nsqds still targeted: one the lookup dropped is not why start failed
                tried = (
                    " | ".join(
                        text
                        for address, text in self._connect_errors.items()
                        if address in targeted
                    )
                    or f"no answer from {', '.join(silent)} (not an nsqd's TCP port?)"
                )
                unreached = self.unreached_error(targeted)
                self._set_fatal(
                    unreached(
                        f"no nsqd of topic {self.topic!r} reachable within {limit:g}s: {tried}",
                        setting="connect_timeout",
                    )
                )
                return
            await asyncio.sleep(0.05)

    def _failed(self, address: HostPort, text: str, err: BaseException) -> None:
        """Record ``address``'s last failure, for the start-up check's one line."""
        self._connect_errors[address] = text
        if isinstance(err, NsqctlTimeoutError):
            self._timed_out.add(address)
        else:
            self._timed_out.discard(address)

    def start_ended(self) -> None:
        """The consumer's start() returned: from now on a refusal of its settings by one
        nsqd, once something subscribed, is that nsqd's change (see :attr:`settled`)."""
        self._start_ended = True
        self._settled = self._subscribed_once  # start's own round of connects is over

    @property
    def settled(self) -> bool:
        """Whether the consumer has started and a whole round of connects (start's own,
        or a later one for a consumer started before its topic existed) subscribed
        somewhere with its settings. Until then a refusal of them (TLS, AUTH, IDENTIFY,
        TLS files) ends the consumer, whatever the order of answers within that round.
        After, it is one nsqd's change, retried loudly."""
        return self._settled

    def stop_connecting(self) -> None:
        """No new connection from now on: pending connects and reconnects are cancelled."""
        self._stopping = True
        for task in list(self._connecting.values()):
            task.cancel()

    async def close_all(self) -> None:
        """CLS and close every connection (each waits for nsqd's CLOSE_WAIT)."""
        self.stop_connecting()
        await asyncio.gather(
            *(c.close() for c in list(self._conns.values())), return_exceptions=True
        )
        self._conns.clear()
        self.stats.connections = 0

    def _unlisted(self, target: Target) -> bool:
        """The lookup no longer lists ``target`` (its partition moved, its nsqd was dropped):
        it is not connected again, the new target has its own connection. Never with nsqds
        given directly (their targets are fixed)."""
        return self._refresh is not None and target not in self._targets

    async def _ensure(self, target: Target) -> None:
        if target in self._conns or target in self._connecting or self._stopping:
            return
        if self._unlisted(target):
            # dropped while a reconnect waited out its delay: a SUB there would be refused
            # by a follower, or would read a drained nsqd again
            self._reconnect_delay.pop(target, None)
            return
        task = asyncio.current_task()
        assert task is not None
        self._connecting[target] = task
        try:
            await self._connect(target)
        finally:
            if self._connecting.get(target) is task:  # a scheduled retry may have replaced us
                del self._connecting[target]

    async def _connect(self, target: Target) -> None:
        """Dial and subscribe ``target``: one :class:`Attempt` after the other (see
        :mod:`.attempts`), until one ends subscribed, fatal, or waiting to reconnect."""
        attempt: Attempt | None = Attempt.ASKED
        self._attempting.add(target)
        self._count_attempting()
        try:
            while attempt is not None:
                attempt = await self._attempt(target, attempt)
        finally:
            self._attempting.discard(target)
            self._count_attempting()

    def _count_attempting(self) -> None:
        self._on_attempting(len(self._attempting.union(self._conns)))

    async def _attempt(self, target: Target, attempt: Attempt) -> Attempt | None:
        """One dial and subscription of ``target``; the attempt to make next, or None
        when this connecting ended."""
        _, partition = target
        conn = await self._dial_target(target)
        if conn is None:
            return None
        start = await self._start_of(target, attempt, conn)
        try:
            await conn.subscribe(
                self.topic,
                self.channel,
                partition,
                ordered=self._options.ordered,
                start=start,
                detail=self._rides(target),
            )
        except NsqctlError as err:
            return await self._refused(target, attempt, conn, err)
        if attempt.checks_gap and start == p.start_end():
            if await self._published_in_between(target, conn):
                return after_gap(attempt)
            if not conn.is_open:  # lost while /stats was read: _on_close ignored it
                self._schedule_reconnect(target)
                return None
        self._conns[target] = conn
        self._reconnect_delay.pop(target, None)
        # its failures are past: they must not speak for it should it be lost again
        self._connect_errors.pop(target[0], None)
        self._timed_out.discard(target[0])
        self._subscribed_once = True
        self.stats.connections = len(self._conns)
        self._on_connected(target, conn)
        return None

    async def _dial_target(self, target: Target) -> Connection | None:
        """A connection to ``target``'s nsqd; None when it could not be reached (logged,
        and a reconnect scheduled) or refused us for good (:attr:`fatal` set)."""
        address = target[0]
        try:
            return await self._dial(
                address, self._on_error, lambda c, err: self._on_close(target, c, err)
            )
        except _SETTINGS_REFUSED as err:
            # The connection's own settings cannot be used with this nsqd (a TLS
            # certificate without its key, an unreadable CA file, TLS asked of an nsqd
            # that offers none, a certificate not accepted; each dial loads the TLS files
            # again): fatal, or that nsqd's trouble, as a refusal of the handshake is (see
            # _refusal_is_fatal).
            if self._refusal_is_fatal:
                self._set_fatal(err)
                return None
            # the error names the file and setting, never a key's content or passphrase
            self._retry(target, f"nsqd {address}: {err} (retrying)", err, logging.ERROR)
            return None
        except p.ServerError as err:
            if self._refusal_is_fatal:
                self._set_fatal(err)
                return None
            text = f"nsqd {address} refused the handshake: {err} (retrying)"
            lasting = isinstance(err, p.TLSRequiredError | p.AuthRequiredError)
            self._retry(target, text, err, logging.ERROR if lasting else logging.WARNING)
            return None
        except (ConnectError, OSError) as err:
            text = str(err) if isinstance(err, ConnectError) else f"{address}: {err}"
            # Before anything ever connected the start-up check reports it in one line.
            level = logging.WARNING if self.stats.connections or self._conns else logging.INFO
            self._retry(target, text, err, level)
            return None

    def _retry(self, target: Target, text: str, err: BaseException, level: int) -> None:
        """A dial of ``target`` failed with ``err``: recorded for the start-up check,
        logged at ``level`` and tried again later."""
        self._failed(target[0], text, err)
        log.log(level, "%s", text)
        self._schedule_reconnect(target)

    @property
    def _refusal_is_fatal(self) -> bool:
        """Whether a refusal of this consumer's settings by one nsqd ends the consumer:
        only until it is :attr:`settled` (start() returned, and a whole round of connects
        subscribed somewhere). Such a refusal is TLS the nsqd requires and the connection
        lacks (TLSRequiredError, at AUTH or at SUB), AUTH it requires with no secret given
        (AuthRequiredError), a secret refused (AuthFailedError), an IDENTIFY rejected, TLS
        asked of an nsqd that offers none, or TLS files that cannot be loaded: until then
        no reconnect changes them, so start fails with it at once, and a consumer started
        before its topic existed ends with it rather than logging it for ever.

        Once settled, the same settings were accepted by this cluster, so a refusal on a
        reconnect is that nsqd's change (restarted with TLS or AUTH required or without
        TLS, its auth server unreachable: nsqd answers E_AUTH_FAILED for that as for a
        wrong secret; TLS files caught half-replaced by a rotation). Ending the consumer
        for it would stop the reading of every other nsqd as well; it is retried with
        backoff, logged at ERROR for TLS or a secret required, until the nsqd is put
        right."""
        return not self.settled

    def _rides(self, target: Target) -> bool:
        """A partition that rides a failover keeps its confirmed position: its frames carry
        each message's queue offset, and a leader whose channel is missing or past that
        position is subscribed from it (see .resume)."""
        return self._refresh is not None and target[1] is not None

    async def _start_of(self, target: Target, attempt: Attempt, conn: Connection) -> str | None:
        """Where the subscription of ``target`` starts: the end when the attempt says so,
        else the confirmed position of a partition that rides a failover, else the start
        asked for."""
        address, partition = target
        start = p.start_end() if attempt.at_end else self._options.start
        if self._rides(target) and self._resume_start is not None:
            try:
                start = await self._resume_start(partition, self._http_of.get(address)) or start
            except asyncio.CancelledError:
                await conn.close()  # stopped while asking: nothing subscribed yet
                raise
        return start

    async def _refused(
        self, target: Target, attempt: Attempt, conn: Connection, err: NsqctlError
    ) -> Attempt | None:
        """nsqd refused the subscription: ``conn`` is closed, and None returned when that
        ends this connecting (fatal, or a reconnect scheduled), else the attempt to make
        next."""
        address, partition = target
        refusal = p.classify_subscribe_error(err)
        following = after_refusal(attempt, refusal)
        if following is Verdict.FATAL and refusal is p.SubscribeRefusal.TLS_REQUIRED:
            # one nsqd requiring TLS once others accepted these settings: that nsqd's
            # change, retried as a handshake refusal is
            following = Verdict.FATAL if self._refusal_is_fatal else Verdict.RETRY_LATER
        if following is Verdict.FATAL:
            ordered_only = refusal is p.SubscribeRefusal.ORDER_REQUIRED and self._options.start
            self._set_fatal(ConfigError(ORDERED_START, setting="start") if ordered_only else err)
            await conn.close()
            return None
        if following is Verdict.RETRY_LATER:
            level = logging.ERROR if refusal is p.SubscribeRefusal.TLS_REQUIRED else logging.WARNING
            self._retry(target, _subscribe_failure(address, err), err, level)
            await conn.close()
            return None
        await conn.close()
        # Nothing in the partition before or after the start: read it from its end
        # (its first message will be the first after the start) rather than retry a
        # subscription that fails the same way until something is published.
        log.info(
            "partition %s of %s on %s holds no message yet: reading it from its end",
            partition,
            self.topic,
            address,
        )
        return following

    async def _published_in_between(self, target: Target, conn: Connection) -> bool:
        """After a partition whose log was empty was subscribed from its end (``conn``, not
        READY yet): was a message published between nsqd's refusal of the start and this
        subscription? Then ``conn`` is closed (True), and the partition is to be subscribed
        again with the start asked for, which its log, no longer empty, now answers; that
        message lies before the end, and a read from the start would otherwise never see
        it. Asked once (see :mod:`.attempts`): should the start be refused again, the
        partition is read from its end as before, never subscribed round and round."""
        address, partition = target
        if self._skipped_start is None:
            return False  # nsqds given directly: no HTTP address to ask
        try:
            skipped = await self._skipped_start(partition, self._http_of.get(address))
        except asyncio.CancelledError:
            await conn.close()  # stopped while asking: nothing READY yet
            raise
        if not skipped:
            return False
        log.info(
            "partition %s of %s on %s got its first message while being subscribed: "
            "subscribing again from the start asked for",
            partition,
            self.topic,
            address,
        )
        await conn.close()
        return True

    def _on_close(self, target: Target, conn: Connection, err: BaseException | None) -> None:
        if self._conns.get(target) is not conn:
            return  # closed while connecting, subscribing or checking: _connect handles that
        del self._conns[target]
        lost = err is not None and not self._stopping
        self.stats.connections = len(self._conns)
        self._on_dropped(target, conn, lost)
        self._count_attempting()
        if lost:
            log.warning("lost %s: %s", target[0], err)
            self.stats.reconnects += 1
            self._schedule_reconnect(target)
            if self._refresh is not None:
                self._refresh()

    def _schedule_reconnect(self, target: Target) -> None:
        pending = self._connecting.get(target)
        if self._stopping or (pending is not None and pending is not asyncio.current_task()):
            return  # another attempt is already under way
        if self._unlisted(target):
            return
        options = self._options
        delay = self._reconnect_delay.get(target, options.reconnect_initial)
        self._reconnect_delay[target] = min(delay * 2, options.reconnect_max)
        if self._waiting_for_leader(target[1]):
            # Waiting for a new leader: the lookup refresh finds it, so the dead address is
            # not worth a long backoff; the refresh is paced by this delay.
            delay = min(delay, 1.0)
        jittered = delay * (0.8 + 0.4 * self._rng.random())

        async def later() -> None:
            await asyncio.sleep(jittered)
            self._connecting.pop(target, None)
            await self._ensure(target)

        task = asyncio.create_task(later(), name=f"nsq-reconnect-{target[0]}")
        self._connecting[target] = task

    def _on_error(self, conn: Connection, err: p.ServerError) -> None:
        if self._options.ordered and err.code in _AFTER_ORDERED_RESET:
            # youzan resets an ordered channel's reader (first ordered SUB, leader change)
            # and resends what was in flight: a FIN or REQ of the first copy then finds it
            # no longer in flight. Nothing is lost: the resent copy is FINed (without a
            # second handling) or given back again.
            log.info("nsqd %s: %s (expected after an ordered reset)", conn.address, err)
            return
        log.warning("nsqd %s: %s", conn.address, err)
