"""Consumer rate limiting by withholding RDY (sans-IO).

``max_rate`` messages per second is enforced by how much RDY the consumer hands out, never by
sleeping in handlers (a sleeping handler holds messages in flight, eats into msg_timeout and
still lets nsqd push). A token bucket says how many messages may still arrive right now;
the consumer feeds that to ``RdyController.set_rate_cap`` at start and at every
:meth:`RateLimiter.next_deadline`, and reports each arriving message to both.

Granularity: at low rates a deadline falls when the next whole token is due, so RDY is handed
out one message at a time; at high rates it falls every ``refill_interval`` and grants about
``rate * refill_interval`` messages at once. The bucket holds at most ``burst`` tokens (about
two refills, at least 1, optionally capped by ``max_burst`` such as ``max_in_flight``).

Caveat: RDY is credit the server may spend at once, so the bound is "the rate plus at most
``burst`` messages": in any interval of ``T`` seconds at most ``burst + rate * T`` messages
arrive. With the default ``refill_interval`` of 20 ms that is within about 4 % per second at
steady state for rates above ~25/s, and exactly one message per token below that.
"""

from __future__ import annotations

import math

from nsqctl.errors import ConfigError

EPSILON = 1e-9


class RateLimiter:
    """Token bucket that turns ``max_rate`` (messages/s) into an RDY allowance."""

    def __init__(
        self,
        max_rate: float,
        now: float,
        *,
        refill_interval: float = 0.02,
        max_burst: int | None = None,
    ) -> None:
        if refill_interval <= 0:
            raise ConfigError(f"refill_interval must be > 0, got {refill_interval}")
        if max_burst is not None and max_burst < 1:
            raise ConfigError(f"max_burst must be >= 1, got {max_burst}")
        self._refill_interval = refill_interval
        self._max_burst = max_burst
        self._updated = now
        self._configure(max_rate)
        self._tokens = float(self._burst)

    @property
    def max_rate(self) -> float:
        return self._rate

    @property
    def burst(self) -> int:
        """Most messages the bucket lets through at once after an idle period."""
        return self._burst

    @property
    def quantum(self) -> int:
        """Tokens granted per deadline (1 at low rates)."""
        return self._quantum

    def set_rate(self, max_rate: float, now: float) -> None:
        """Change the rate; tokens accrued so far at the old rate are kept (up to the burst)."""
        self._refill(now)
        self._configure(max_rate)
        self._tokens = min(self._tokens, float(self._burst))

    def allowance(self, now: float) -> int:
        """How many messages may still arrive right now (feed to ``set_rate_cap``)."""
        self._refill(now)
        return max(0, math.floor(self._tokens + EPSILON))

    def on_message(self, now: float) -> None:
        """A message arrived; messages beyond the allowance become debt paid back later."""
        self.on_messages(1, now)

    def on_messages(self, count: int, now: float) -> None:
        """``count`` messages arrived in one read."""
        self._refill(now)
        self._tokens -= count

    def next_deadline(self) -> float | None:
        """When the next quantum of tokens is due; None while the bucket is full."""
        if self._tokens >= self._burst - EPSILON:
            return None
        target = min(float(self._burst), math.floor(self._tokens + EPSILON) + self._quantum)
        return self._updated + (target - self._tokens) / self._rate

    def _configure(self, max_rate: float) -> None:
        if not max_rate > 0 or math.isinf(max_rate):
            raise ConfigError(f"max_rate must be a positive number, got {max_rate}")
        per_refill = max_rate * self._refill_interval
        burst = max(1, math.ceil(2 * per_refill - EPSILON))
        quantum = max(1, math.floor(per_refill + EPSILON))
        if self._max_burst is not None:
            burst = min(burst, self._max_burst)
        self._rate = float(max_rate)
        self._burst = burst
        self._quantum = min(quantum, burst)

    def _refill(self, now: float) -> None:
        if now > self._updated:
            if self._tokens < self._burst:
                gained = (now - self._updated) * self._rate
                self._tokens = min(float(self._burst), self._tokens + gained)
            self._updated = now
