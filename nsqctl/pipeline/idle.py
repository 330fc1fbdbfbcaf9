"""When a consumer that stops once quiet (an archive's ``exit_when_idle``, a history
replay) is done: quiet for a while *and* reading every source. A quiet consumer cut off
from an nsqd or a partition is not caught up, only cut off: it waits for that source, and
gives up with an error naming it after the failover window, never reporting a partial
read as the whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from nsqctl.addresses import HostPort
from nsqctl.errors import NoConnectionError

log = logging.getLogger("nsqctl.pipeline.idle")


#: The error for sources that stayed out of reach (``Consumer.unreached_error``).
Unreached = Callable[[list[tuple[HostPort | None, int | None]]], type[NoConnectionError]]


class IdleHold:
    """What ``--exit-when-idle`` waits for besides quiet: sources cut off from the archive.

    A quiet archive with an nsqd (or a partition) it cannot reach is not done: that
    source's messages are still to come. So the idle time counts from when every source
    is read again, and a quiet archive waits for a cut-off source. The redesign's consumer
    gives up on a partition without a leader after its failover window; a lost nsqd of
    the original family (or one given with ``--nsqd``) would be retried for ever, so a
    quiet archive stops waiting after that window too, with an error naming the source.
    """

    def __init__(self, window: float, incomplete: str) -> None:
        self.window = window  # 0: give up at once
        self.incomplete = incomplete  # what the run is, given up: "the archive is not ..."
        self.back_at = float("-inf")  # when every source was read again, last
        self._since: float | None = None

    def update(self, down: list[tuple[HostPort | None, int | None]], now: float) -> None:
        """``down``: what the consumer cannot read at ``now`` (empty: every source)."""
        if down:
            if self._since is None:
                self._since = now
                log.info("not idle while %s cannot be read", describe_sources(down))
        elif self._since is not None:
            self._since = None
            self.back_at = now

    def give_up(
        self,
        down: list[tuple[HostPort | None, int | None]],
        now: float,
        unreached: Unreached,
    ) -> None:
        """Raise once ``down`` has been cut off for the whole window, as the error
        ``unreached`` gives for it (the consumer's: a timeout when every nsqd was silent)."""
        if self._since is not None and now - self._since >= self.window:
            raise unreached(down)(
                f"{describe_sources(down)} could not be read for the failover window of "
                f"{self.window:g}s, so {self.incomplete}; run it again once that source is "
                "back",
                setting="failover_window",
            )


class IdleExit:
    """When ``exit_when_idle`` ends an archive: nothing received, held or being written for
    that long, and every source read again for that long (:class:`IdleHold`)."""

    def __init__(
        self, idle: float, window: float, received: int, now: float, *, incomplete: str
    ) -> None:
        self.idle = idle
        self.hold = IdleHold(window, incomplete)
        self._last_message, self._seen = now, received

    def due(
        self,
        received: int,
        busy: bool,
        down: list[tuple[HostPort | None, int | None]],
        now: float,
        unreached: Unreached,
    ) -> bool:
        """``received``: the consumer's count so far; ``busy``: messages held or being
        written; ``down``: the sources it cannot read (:meth:`IdleHold.update`);
        ``unreached``: the error for sources given up on (:meth:`IdleHold.give_up`)."""
        if received != self._seen:
            self._last_message, self._seen = now, received
        self.hold.update(down, now)
        if busy or now - self._last_message < self.idle:
            return False
        if down:
            self.hold.give_up(down, now, unreached)  # quiet, but that source's messages may come
            return False
        return now - self.hold.back_at >= self.idle  # and quiet since every source is back


def describe_sources(down: list[tuple[HostPort | None, int | None]]) -> str:
    """``[(nsqd, partition)]`` as words: "nsqd 127.0.0.1:4150", "partition 1 on ...",
    "partition 1 (no leader)"."""
    names = []
    for address, part in down:
        if part is None:
            names.append(f"nsqd {address}")
        elif address is None:
            names.append(f"partition {part} (no leader)")
        else:
            names.append(f"partition {part} on {address}")
    return ", ".join(names)
