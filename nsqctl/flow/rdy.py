"""RDY bookkeeping for one consumer spread over many nsqd connections (sans-IO).

The IO layer reports events (connection added/removed, message received, message answered,
timer fired) with the current monotonic time and sends the returned :class:`RdyUpdate` list
as ``RDY`` commands, in order, before the FIN/REQ that triggered them. Updates are only
returned when a connection's count changes, and decreases come before increases, so applying
them in order never takes the total above the budget. The IO layer may keep only the last
update per connection within one write, as long as it keeps that order.

RDY semantics. Both server families treat RDY as an in-flight *window*: nsqd pushes while
``in_flight < rdy`` (``IsReadyForMessages`` in nsqio/nsq and youzan/nsq), it does not count
RDY down. So "remaining" here is ``rdy - in_flight``, re-sending an unchanged RDY is a no-op
and is never emitted, and a FIN re-opens the window by itself.

Rules (client guide, go-nsq):

* Budget: ``max_in_flight`` (0 pauses), 0 in backoff, 1 while testing after backoff. The sum
  of RDY granted never exceeds it; no connection exceeds its ``max_rdy_count``.
* Each connection holds a *share* of the budget: ``budget // n`` when the budget covers every
  connection; otherwise (budget < n) shares of 1 rotate at random on :meth:`tick`, taken back
  from connections idle longer than ``low_rdy_idle_timeout`` or holding their share longer
  than ``low_rdy_timeout``, so every connection with messages is served eventually.
  That go-nsq rotation is only the floor: a holder that stays quiet (nothing in flight, no
  message) for ``idle_turn`` seconds after it was handed RDY, its last message or its last
  answer passes its share to the next waiting connection, in turn order. nsqd pushes as
  soon as a window opens, so a quiet holder is an empty one, and a connection with
  messages waits at most about ``idle_turn`` times the number of connections, not
  multiples of ``low_rdy_idle_timeout`` (an ordered partition, one message at a time and
  RDY 1, would otherwise wait its turn out behind empty partitions).
* A new connection starts at RDY 1 and is raised to its share on its first message (the
  refresh rule below), so connections to empty nsqds hold 1, not a full share. When the
  budget is already spent (budget < n) a new connection starts at 0 and waits for rotation.
* Refresh rule (go-nsq ``maybeUpdateRDY``): after a message or a FIN/REQ, a connection is
  re-evaluated when ``remaining <= 1``, ``remaining < rdy / 4``, or its target fell below
  what it holds. Structural changes (connections, ``max_in_flight``, backoff) re-balance all
  connections at once.
* Rate cap (:meth:`set_rate_cap`): a credit of messages that may still arrive. Because RDY is
  a window, the cap bounds the *open* window ``sum(max(0, rdy - in_flight))``, not the RDY
  total; a FIN that would re-open a window beyond the credit lowers that connection's RDY.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from nsqctl.errors import ConfigError
from nsqctl.flow.backoff import BackoffAction, BackoffPhase

ConnId = Hashable
STARVED_RATIO = 0.85
REFRESH_DIVISOR = 4


@dataclass(frozen=True, slots=True)  # not a NamedTuple: its field count would hide tuple.count
class RdyUpdate:
    """Send ``RDY count`` on connection ``conn_id``."""

    conn_id: ConnId
    count: int


# The controller's modes are exactly the backoff phases it mirrors.
RdyMode = BackoffPhase


class _Conn:
    """One connection's RDY state. A plain class (compared by identity, never printed),
    not a dataclass: Python 3.11 compiles a dataclass's methods as its module loads."""

    __slots__ = (
        "answered_at",
        "cap",
        "conn_id",
        "granted_at",
        "in_flight",
        "last_msg_at",
        "passed_at",
        "primed",
        "raised_at",
        "rdy",
        "share",
    )

    def __init__(self, conn_id: ConnId, cap: int, last_msg_at: float) -> None:
        self.conn_id = conn_id
        self.cap = cap
        self.last_msg_at = last_msg_at
        self.rdy = 0
        self.share = 0
        self.in_flight = 0
        self.primed = False
        self.granted_at = 0.0
        self.raised_at = 0.0
        self.answered_at = 0.0
        self.passed_at = -math.inf  # when it last gave up rate credit it left unused

    @property
    def open(self) -> int:
        return max(0, self.rdy - self.in_flight)

    @property
    def base(self) -> int:
        """What the connection may hold without a rate cap: its share, 1 until primed."""
        return self.share if self.primed else min(self.share, 1)


class RdyController:
    """Spreads ``max_in_flight`` over connections and decides every RDY change."""

    def __init__(
        self,
        max_in_flight: int,
        *,
        rng: random.Random | None = None,
        fixed_rdy_one: bool = False,
        redistribute_interval: float = 5.0,
        low_rdy_idle_timeout: float = 10.0,
        low_rdy_timeout: float = 30.0,
        idle_turn: float = 0.25,
    ) -> None:
        _check_count("max_in_flight", max_in_flight)
        for name, value in (
            ("redistribute_interval", redistribute_interval),
            ("low_rdy_idle_timeout", low_rdy_idle_timeout),
            ("low_rdy_timeout", low_rdy_timeout),
            ("idle_turn", idle_turn),
        ):
            if value <= 0:
                raise ConfigError(f"{name} must be > 0, got {value}")
        self._max_in_flight = max_in_flight
        self._rng = rng if rng is not None else random.Random()
        self._fixed_one = fixed_rdy_one
        self._interval = redistribute_interval
        self._idle_timeout = low_rdy_idle_timeout
        self._hold_timeout = low_rdy_timeout
        self._idle_turn = idle_turn
        self._turn: ConnId | None = None  # the connection handed a turn last
        self._conns: dict[ConnId, _Conn] = {}
        self._expected = 0  # connections being made or held (see expect_connections)
        self._mode = RdyMode.NORMAL
        self._credit: int | None = None
        self._next_tick: float | None = None

    # -- read-only views -------------------------------------------------------------------

    @property
    def max_in_flight(self) -> int:
        return self._max_in_flight

    @property
    def mode(self) -> RdyMode:
        return self._mode

    @property
    def budget(self) -> int:
        """Total RDY allowed right now (``max_in_flight``, 0 in backoff, 1 when testing)."""
        if self._mode is RdyMode.BACKOFF:
            return 0
        if self._mode is RdyMode.TESTING:
            return min(1, self._max_in_flight)
        return self._max_in_flight

    @property
    def rate_credit(self) -> int | None:
        """Messages that may still arrive under the rate cap (None: no cap)."""
        return self._credit

    @property
    def connection_ids(self) -> tuple[ConnId, ...]:
        return tuple(self._conns)

    @property
    def total_rdy(self) -> int:
        return sum(c.rdy for c in self._conns.values())

    def rdy(self, conn_id: ConnId) -> int:
        return self._conns[conn_id].rdy

    def in_flight(self, conn_id: ConnId) -> int:
        return self._conns[conn_id].in_flight

    def is_starved(self) -> bool:
        """True when some connection has (nearly) filled its window: process a batch now."""
        return any(
            c.in_flight > 0 and c.in_flight >= c.rdy * STARVED_RATIO for c in self._conns.values()
        )

    def next_deadline(self) -> float | None:
        """When to call :meth:`tick`; None while nothing rotates (budget covers everyone)."""
        tick = self._next_tick
        if tick is None:
            return tick
        quiet: list[float] = []
        if self._rotating():
            quiet = [
                self._turn_ends(c) for c in self._conns.values() if c.share and not c.in_flight
            ]
        fresh = self._credit_taker_at()
        if fresh is not None:
            quiet += [max(self._turn_ends(c), fresh) for c in self._quiet_windows()]
        return min(tick, *quiet) if quiet else tick

    # -- events ----------------------------------------------------------------------------

    def add_connection(self, conn_id: ConnId, max_rdy_count: int, now: float) -> list[RdyUpdate]:
        """A subscribed connection (``max_rdy_count`` from IDENTIFY; 2500 if not negotiated)."""
        if conn_id in self._conns:
            raise ValueError(f"connection {conn_id!r} is already registered")
        if max_rdy_count < 1:
            raise ConfigError(f"max_rdy_count must be >= 1, got {max_rdy_count}")
        cap = 1 if self._fixed_one else max_rdy_count
        self._conns[conn_id] = _Conn(conn_id, cap, last_msg_at=now)
        self._reshare(now, prefer=conn_id)
        return self._sync(now)

    def expect_connections(self, count: int, now: float) -> list[RdyUpdate]:
        """``count`` connections are held or being made. Shares are planned over at least
        that many, so the connection that subscribes first does not take the whole budget
        while the others are still connecting: its messages would already be in flight
        when the others joined, and the total past ``max_in_flight``. A connection that
        could not be made is no longer counted, and its share goes back to the others."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        if count == self._expected:
            return []
        self._expected = count
        self._reshare(now)
        return self._sync(now)

    def remove_connection(self, conn_id: ConnId, now: float) -> list[RdyUpdate]:
        """A connection closed; its share goes back to the others. Unknown ids are ignored."""
        if self._conns.pop(conn_id, None) is None:
            return []
        self._reshare(now)
        return self._sync(now)

    def on_message(self, conn_id: ConnId, now: float) -> list[RdyUpdate]:
        """A message arrived on ``conn_id``."""
        return self.on_messages(conn_id, 1, now)

    def on_messages(self, conn_id: ConnId, count: int, now: float) -> list[RdyUpdate]:
        """``count`` messages arrived on ``conn_id`` in one read.

        The same as ``count`` calls of :meth:`on_message`, as far as what goes on the wire:
        their updates would all leave in one write, where only the last per connection
        counts, and the refresh rule only gets more eager as ``in_flight`` grows.
        """
        conn = self._conns.get(conn_id)
        if conn is None:
            return []
        conn.in_flight += count
        conn.last_msg_at = now
        conn.primed = True
        if self._credit is not None:
            self._credit = max(0, self._credit - count)
            return self._refresh(conn, now)
        # _refresh without a rate cap, inlined (once per read): primed, so base == share.
        # A window already at its share has nothing to commit, whatever is left of it: the
        # steady state of an ordered channel (RDY 1), where this runs once per message.
        rdy = conn.rdy
        share = conn.share
        if share == rdy:
            return []
        remaining = rdy - conn.in_flight
        if remaining <= 1 or remaining * REFRESH_DIVISOR < rdy or share < rdy:
            return self._commit([(conn, share)], now)
        return []

    def on_message_done(self, conn_id: ConnId, now: float) -> list[RdyUpdate]:
        """A FIN or REQ is about to be sent for a message of ``conn_id``."""
        return self.on_messages_done(conn_id, 1, now)

    def on_messages_done(self, conn_id: ConnId, count: int, now: float) -> list[RdyUpdate]:
        """FIN/REQ for ``count`` messages of ``conn_id`` are about to leave in one write.

        Evaluated once, on the final ``in_flight``: a raise that ``count`` single calls
        would have sent part-way is not needed while the window is that open (the refresh
        rule only raises a nearly-spent window), and a lowering is still sent.
        """
        conn = self._conns.get(conn_id)
        if conn is None:
            return []
        in_flight = conn.in_flight - count
        conn.in_flight = in_flight if in_flight > 0 else 0
        conn.answered_at = now
        if self._credit is not None:
            return self._refresh(conn, now)
        # _refresh without a rate cap, inlined (once per batch); nothing to commit when the
        # window is at what it should be (as in on_messages)
        rdy = conn.rdy
        desired = conn.share if conn.primed else min(conn.share, 1)
        if desired == rdy:
            return []
        remaining = rdy - conn.in_flight
        if remaining <= 1 or remaining * REFRESH_DIVISOR < rdy or desired < rdy:
            return self._commit([(conn, desired)], now)
        return []

    def tick(self, now: float) -> list[RdyUpdate]:
        """Quiet holders pass their turn, quiet windows their rate credit; then, at its
        interval, the periodic redistribution (go-nsq ``rdyLoop``). Early calls do
        nothing else."""
        if self._next_tick is None:
            return []
        passed = self._pass_turns(now)
        reclaim: set[ConnId] = set()
        fresh = self._credit_taker_at()
        if fresh is not None and now >= fresh:
            for conn in self._quiet_windows():
                if now >= self._turn_ends(conn):
                    conn.passed_at = now
                    reclaim.add(conn.conn_id)
        moved: list[RdyUpdate] = []
        if reclaim:  # the sync places the passed turns too
            moved = self._sync(now, reclaim=reclaim, avoid=reclaim)
            for conn_id in reclaim:  # one handed its credit back: its turn starts again
                self._conns[conn_id].raised_at = now
        if now < self._next_tick:
            return self._sync(now) if passed and not reclaim else moved
        self._next_tick = now + self._interval
        revoked: set[ConnId] = set()
        if self._rotating():
            for conn in self._conns.values():
                stale = now - conn.granted_at > self._hold_timeout
                if conn.share > 0 and (stale or self._idle(conn, now)):
                    self._set_share(conn, 0, now)
                    revoked.add(conn.conn_id)
            self._reshare(now, avoid=revoked)
        idle: set[ConnId] = set()
        if self._credit is not None:
            idle = {c.conn_id for c in self._conns.values() if c.open and self._idle(c, now)}
        return moved + self._sync(now, reclaim=idle, avoid=revoked | idle | reclaim)

    def set_max_in_flight(self, max_in_flight: int, now: float) -> list[RdyUpdate]:
        """Change the budget at run time; 0 pauses every connection."""
        _check_count("max_in_flight", max_in_flight)
        self._max_in_flight = max_in_flight
        self._reshare(now)
        return self._sync(now)

    def set_rate_cap(self, total: int | None, now: float) -> list[RdyUpdate]:
        """Cap the messages that may still arrive (``RateLimiter.allowance(now)``); None lifts it.

        Each :meth:`on_message` counts against the credit, so the IO layer only needs to call
        this once before adding connections and then at the limiter's deadlines.
        """
        if total is not None:
            _check_count("rate cap", total)
        self._credit = total
        return self._sync(now)

    def enter_backoff(self, now: float) -> list[RdyUpdate]:
        """RDY 0 on every connection."""
        self._mode = RdyMode.BACKOFF
        self._reshare(now)
        return self._sync(now)

    def backoff_test(self, now: float) -> list[RdyUpdate]:
        """RDY 1 on one random connection (later connections take it if there is none yet)."""
        self._mode = RdyMode.TESTING
        for conn in self._conns.values():
            self._set_share(conn, 0, now)
        self._reshare(now)
        return self._sync(now)

    def exit_backoff(self, now: float) -> list[RdyUpdate]:
        """Back to the normal distribution."""
        self._mode = RdyMode.NORMAL
        self._reshare(now)
        return self._sync(now)

    def apply_backoff(self, action: BackoffAction | None, now: float) -> list[RdyUpdate]:
        """Apply what :class:`~nsqctl.flow.backoff.BackoffController` returned."""
        if action is None:
            return []
        handler = {
            BackoffAction.ENTER: self.enter_backoff,
            BackoffAction.TEST: self.backoff_test,
            BackoffAction.EXIT: self.exit_backoff,
        }[action]
        return handler(now)

    # -- shares (the budget split) ---------------------------------------------------------

    def _rotating(self) -> bool:
        return 0 < self.budget < len(self._conns)

    def _idle(self, conn: _Conn, now: float) -> bool:
        # measured from the later of the last message and the last raise, so a connection
        # just handed RDY gets a full timeout to show it has messages
        return now - max(conn.last_msg_at, conn.raised_at) > self._idle_timeout

    def _turn_ends(self, conn: _Conn) -> float:
        """When a quiet holder's turn is over: ``idle_turn`` after it was handed its share
        or RDY, got its last message or sent its last answer (an ordered partition's next
        message comes only after the FIN of the one before)."""
        return (
            max(conn.granted_at, conn.raised_at, conn.last_msg_at, conn.answered_at)
            + self._idle_turn
        )

    def _pass_turns(self, now: float) -> bool:
        """Each holder whose turn is over hands its share to the next waiting connection,
        in connection order from the one served last, so every connection gets a turn
        within one round. Returns whether a share moved."""
        if not self._rotating():
            return False
        conns = list(self._conns.values())
        over = [c for c in conns if c.share and not c.in_flight and now >= self._turn_ends(c)]
        if not over:
            return False
        ids = list(self._conns)
        start = ids.index(self._turn) + 1 if self._turn in self._conns else 0
        waiting = [c for c in conns[start:] + conns[:start] if c.share == 0]
        for holder, successor in zip(over, waiting, strict=False):
            self._set_share(holder, 0, now)
            self._set_share(successor, 1, now)
            self._turn = successor.conn_id
        return bool(waiting)

    def _quiet_windows(self) -> list[_Conn]:
        """Connections holding an open window with nothing in flight: nsqd pushes as soon
        as a window opens, so one that stays quiet has nothing to send."""
        return [c for c in self._conns.values() if c.open and not c.in_flight]

    def _credit_taker_at(self) -> float | None:
        """Under a rate cap whose credit is all handed out, when some connection that holds
        no open window and could take more may be offered the credit: at once, or, for
        one that gave its own up for want of messages, after the idle timeout. None when
        no connection could take it, or with credit to spare.

        Then a window that stays quiet for its turn (``idle_turn``) gives its credit up
        for another, as a rotating share does: a connection with messages waits a turn
        per empty one, not the idle timeout (an empty partition would otherwise hold a
        low rate's little credit for seconds). Once every other one gave it up lately (a
        topic with nothing to read), the credit stays where it is until one of them may
        be tried again, so an idle consumer sends no stream of RDY."""
        if self._credit is None or self._open_total() < self._credit:
            return None
        waiting = [c for c in self._conns.values() if not c.open and c.base > c.in_flight]
        if not waiting:
            return None
        return min(c.passed_at + self._idle_timeout for c in waiting)

    def _set_share(self, conn: _Conn, share: int, now: float) -> None:
        if share > 0 and conn.share == 0:
            conn.granted_at = now
        conn.share = share

    def _reshare(
        self, now: float, *, prefer: ConnId | None = None, avoid: Iterable[ConnId] = ()
    ) -> None:
        """Split the budget into shares; ``prefer`` gets a spare share first, ``avoid`` last."""
        conns = list(self._conns.values())
        budget = self.budget
        slots = max(len(conns), self._expected)
        if budget >= slots:
            per = budget // slots if slots else 0
            for conn in conns:
                self._set_share(conn, min(per, conn.cap), now)
            return
        # rotation: holders keep a share of 1, the longest-held give way when over budget
        for conn in conns:
            self._set_share(conn, min(conn.share, 1), now)
        holders = sorted((c for c in conns if c.share), key=lambda c: c.granted_at)
        for conn in holders[: max(0, len(holders) - budget)]:
            self._set_share(conn, 0, now)
        spare = budget - sum(c.share for c in conns)
        waiting = [c for c in conns if c.share == 0]
        chosen = [c for c in waiting if c.conn_id == prefer][:spare]
        rest = [c for c in waiting if c.conn_id != prefer]
        chosen += self._sample(rest, spare - len(chosen), avoid)
        for conn in chosen:
            self._set_share(conn, 1, now)

    def _sample(self, conns: list[_Conn], k: int, avoid: Iterable[ConnId]) -> list[_Conn]:
        """``k`` random connections, those in ``avoid`` only as a last resort."""
        fresh, spent = _split(conns, avoid)
        picks = self._rng.sample(fresh, max(0, min(k, len(fresh))))
        return picks + self._rng.sample(spent, max(0, min(k - len(picks), len(spent))))

    # -- RDY values ------------------------------------------------------------------------

    def _refresh(self, conn: _Conn, now: float) -> list[RdyUpdate]:
        remaining = conn.rdy - conn.in_flight
        desired = self._desired(conn)
        updates: list[RdyUpdate] = []
        if remaining <= 1 or remaining * REFRESH_DIVISOR < conn.rdy or desired < conn.rdy:
            updates = self._commit([(conn, desired)], now)
        if self._credit is not None and self._open_total() > self._credit:
            # a message arrived outside any open window (it was on the wire when RDY dropped)
            updates += self._sync(now)
        return updates

    def _desired(self, conn: _Conn) -> int:
        if self._credit is None:
            return conn.base
        others = self._open_total() - conn.open
        return min(conn.base, conn.in_flight + max(0, self._credit - others))

    def _open_total(self) -> int:
        return sum(c.open for c in self._conns.values())

    def _sync(
        self,
        now: float,
        *,
        reclaim: Iterable[ConnId] = (),
        avoid: Iterable[ConnId] = (),
    ) -> list[RdyUpdate]:
        self._schedule(now)
        conns = list(self._conns.values())
        if self._credit is None:
            return self._commit([(c, c.base) for c in conns], now)
        # a window that passed its credit on for want of messages gets credit again only
        # when no other connection can take it, until the idle timeout: then it is tried
        # again (its partition may have messages by then)
        passed = {c.conn_id for c in conns if now - c.passed_at < self._idle_timeout}
        opens = _CreditPlan(conns, self._credit, reclaim).fill(self._rng, {*avoid, *passed})
        plan = []
        for conn in conns:
            extra = opens[conn.conn_id]
            value = conn.in_flight + extra if extra else min(conn.rdy, conn.in_flight)
            plan.append((conn, min(value, conn.base)))
        return self._commit(plan, now)

    def _schedule(self, now: float) -> None:
        # the redistribution timer runs only while something rotates; it starts afresh when
        # rotation begins so a holder is not judged on time spent before it
        if not self._conns or not (self._rotating() or self._credit is not None):
            self._next_tick = None
        elif self._next_tick is None:
            self._next_tick = now + self._interval

    def _commit(self, plan: list[tuple[_Conn, int]], now: float) -> list[RdyUpdate]:
        changes = [(conn, count) for conn, count in plan if count != conn.rdy]
        changes.sort(key=lambda item: item[1] - item[0].rdy)  # decreases first
        updates = []
        for conn, count in changes:
            if count > conn.rdy:
                conn.raised_at = now
            conn.rdy = count
            updates.append(RdyUpdate(conn.conn_id, count))
        return updates


class _CreditPlan:
    """Splits a rate credit into open windows: keep what is open, trim or hand out the rest."""

    def __init__(self, conns: list[_Conn], credit: int, reclaim: Iterable[ConnId]) -> None:
        self._conns = conns
        self._credit = credit
        dropped = set(reclaim)
        self.opens = {
            c.conn_id: 0 if c.conn_id in dropped else min(c.open, self._room_of(c, 0))
            for c in conns
        }

    @staticmethod
    def _room_of(conn: _Conn, opened: int) -> int:
        return max(0, conn.base - conn.in_flight - opened)

    def _room(self, conn: _Conn) -> int:
        return self._room_of(conn, self.opens[conn.conn_id])

    def fill(self, rng: random.Random, avoid: Iterable[ConnId]) -> dict[ConnId, int]:
        if sum(self.opens.values()) > self._credit:
            level = self._trim_level()
            self.opens = {key: min(value, level) for key, value in self.opens.items()}
        spare = self._credit - sum(self.opens.values())
        for group in _split(self._conns, avoid):
            spare = self._hand_out(group, spare, rng)
        return self.opens

    def _trim_level(self) -> int:
        """Highest per-connection open window that fits the credit (trims the largest first)."""
        low, high = 0, max(self.opens.values())
        while low < high:
            mid = (low + high + 1) // 2
            if sum(min(value, mid) for value in self.opens.values()) <= self._credit:
                low = mid
            else:
                high = mid - 1
        return low

    def _hand_out(self, group: list[_Conn], spare: int, rng: random.Random) -> int:
        eligible = [c for c in group if self._room(c) > 0]
        while spare > 0 and eligible:
            if spare < len(eligible):
                for conn in rng.sample(eligible, spare):
                    self.opens[conn.conn_id] += 1
                return 0
            per = spare // len(eligible)
            for conn in eligible:
                give = min(per, self._room(conn))
                self.opens[conn.conn_id] += give
                spare -= give
            eligible = [c for c in eligible if self._room(c) > 0]
        return spare


def _split(conns: list[_Conn], avoid: Iterable[ConnId]) -> tuple[list[_Conn], list[_Conn]]:
    """Connections not in ``avoid`` (first choice) and those in it (last resort)."""
    avoided = set(avoid)
    return (
        [c for c in conns if c.conn_id not in avoided],
        [c for c in conns if c.conn_id in avoided],
    )


def _check_count(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
