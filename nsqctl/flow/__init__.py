"""Consumer flow control as pure state machines: RDY distribution, backoff, rate limiting.

Nothing here does IO or reads a clock: the consumer passes ``now`` (monotonic seconds) into
every call, sends the returned RDY updates, and calls ``tick`` at ``next_deadline()``.
"""

from nsqctl.flow.backoff import BackoffAction, BackoffController, BackoffPhase, BackoffState
from nsqctl.flow.ratelimit import RateLimiter
from nsqctl.flow.rdy import ConnId, RdyController, RdyMode, RdyUpdate

__all__ = [
    "BackoffAction",
    "BackoffController",
    "BackoffPhase",
    "BackoffState",
    "ConnId",
    "RateLimiter",
    "RdyController",
    "RdyMode",
    "RdyUpdate",
]
