"""Consumer backoff as a pure state machine (no timers, no IO).

Per the client guide: a failed message (one whose handler asked for backoff) stops the whole
consumer (RDY 0 everywhere) for a time that doubles with every consecutive failure; when the
window ends a single test message is let through (RDY 1 on one connection), and its outcome
decides: success lowers the level (back to full speed at level 0), failure raises it.

Only one outcome per window counts. Messages that were already in flight when a window began
finish later with stale news, so each message is tagged with :attr:`BackoffController.epoch`
when it arrives and its outcome is reported with that tag; outcomes from another epoch, and any
outcome while waiting out a window, are ignored.

The controller returns :class:`BackoffAction` values; the consumer applies them to the
:class:`~nsqctl.flow.rdy.RdyController` (``RdyController.apply_backoff``).
"""

from __future__ import annotations

import enum
from typing import NamedTuple

from nsqctl.errors import ConfigError


class BackoffAction(enum.Enum):
    """What the consumer must do to its RDY state after a backoff event."""

    ENTER = "enter"
    """Stop the flow: RDY 0 on every connection (``RdyController.enter_backoff``)."""
    TEST = "test"
    """Window over: RDY 1 on one connection (``RdyController.backoff_test``)."""
    EXIT = "exit"
    """Back to full speed (``RdyController.exit_backoff``)."""


class BackoffPhase(enum.Enum):
    NORMAL = "normal"
    BACKOFF = "backoff"
    TESTING = "testing"


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class BackoffState(NamedTuple):
    """A snapshot: ``until`` is the end of the current window (only in ``BACKOFF``)."""

    phase: BackoffPhase
    level: int
    until: float | None = None


class BackoffController:
    """Exponential backoff with one counted outcome per window, like go-nsq's consumer.

    ``duration(level) = backoff_multiplier * 2 ** (level - 1)``, capped at
    ``max_backoff_duration``; the level stops growing once the cap is reached, so the number
    of successes needed to recover stays bounded (go-nsq does the same).
    """

    def __init__(
        self, *, backoff_multiplier: float = 1.0, max_backoff_duration: float = 128.0
    ) -> None:
        if backoff_multiplier <= 0:
            raise ConfigError(f"backoff_multiplier must be > 0, got {backoff_multiplier}")
        if max_backoff_duration <= 0:
            raise ConfigError(f"max_backoff_duration must be > 0, got {max_backoff_duration}")
        self._multiplier = backoff_multiplier
        self._max = max_backoff_duration
        self._phase = BackoffPhase.NORMAL
        self._level = 0
        self._until: float | None = None
        self._epoch = 0

    @property
    def state(self) -> BackoffState:
        return BackoffState(self._phase, self._level, self._until)

    @property
    def level(self) -> int:
        return self._level

    @property
    def epoch(self) -> int:
        """Tag for a message arriving now; pass it back with the message's outcome."""
        return self._epoch

    def duration(self, level: int) -> float:
        """Length of the backoff window at ``level`` (0 at level 0)."""
        if level <= 0:
            return 0.0
        return min(self._max, self._multiplier * 2.0 ** (level - 1))

    def next_deadline(self) -> float | None:
        """When :meth:`tick` has something to do (the end of the current window)."""
        return self._until if self._phase is BackoffPhase.BACKOFF else None

    def on_failure(self, now: float, epoch: int | None = None) -> BackoffAction | None:
        """A message failed and asked for backoff: start (or lengthen) a window."""
        if not self._counts(epoch):
            return None
        if self.duration(self._level) < self._max:
            self._level += 1
        return self._start_window(now)

    def on_success(self, now: float, epoch: int | None = None) -> BackoffAction | None:
        """A message succeeded: in a test, lower the level (exit at 0, else wait again)."""
        if not self._counts(epoch) or self._level == 0:
            return None
        self._level -= 1
        if self._level > 0:
            return self._start_window(now)
        self._enter(BackoffPhase.NORMAL, None)
        return BackoffAction.EXIT

    def on_neutral(self, now: float, epoch: int | None = None) -> BackoffAction | None:
        """A test message was requeued without asking for backoff: same level, wait again."""
        if not self._counts(epoch) or self._phase is not BackoffPhase.TESTING:
            return None
        return self._start_window(now)

    def tick(self, now: float) -> BackoffAction | None:
        """Call at :meth:`next_deadline`: an expired window turns into a test."""
        if self._phase is BackoffPhase.BACKOFF and self._until is not None and now >= self._until:
            self._enter(BackoffPhase.TESTING, None)
            return BackoffAction.TEST
        return None

    def _counts(self, epoch: int | None) -> bool:
        if self._phase is BackoffPhase.BACKOFF:
            return False
        return epoch is None or epoch == self._epoch

    def _start_window(self, now: float) -> BackoffAction:
        self._enter(BackoffPhase.BACKOFF, now + self.duration(self._level))
        return BackoffAction.ENTER

    def _enter(self, phase: BackoffPhase, until: float | None) -> None:
        # every transition opens a new epoch: outcomes of older messages no longer count
        self._phase = phase
        self._until = until
        self._epoch += 1
