"""Sending a request the redesign's nsqlookupd may turn away for a while, changing nothing.

Its leader answers "the cluster is unstable" to every partition operation and every topic
delete while it repairs what a failure broke (until a full cluster check finds nothing
left to repair), and a coordinator answers a temporary error (youzan's
CoordElectionTmpErr, CoordLocalTmpErr, CoordTmpErr: its own ``IsRetryable``) while an ISR
change settles. Neither changed anything, so the request is sent again until a deadline,
asking nsqlookupd meanwhile to check the cluster (a meta update that changes nothing
triggers the check), so the wait is not that of its periodic check (60 s).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable

import httpx

from nsqctl.admin.requests import AdminRequest, NodeResult, send_request

UNSTABLE = "cluster is unstable"
# e.g. "ErrType:4 ... leaving isr need wait." while an earlier ISR change settles
TEMPORARY = re.compile(r"\bErrType:(4|8|9)\b")
POLL = 0.25

Waiting = Callable[[NodeResult, float, bool], None]
"""Told of each refusal that will be sent again: the answer, the seconds since the first
send, and whether nsqlookupd was just asked to check the cluster."""


def passing(result: NodeResult) -> bool:
    """Whether ``result`` is a refusal that changed nothing and should pass on its own."""
    if result.outcome == "ok":
        return False
    return UNSTABLE in result.error or TEMPORARY.search(result.error) is not None


async def send_until_settled(
    client: httpx.AsyncClient,
    req: AdminRequest,
    deadline: float,
    nudge: AdminRequest,
    nudge_every: float,
    waiting: Waiting | None = None,
) -> NodeResult:
    """Send ``req``, and again while it is refused in passing (:func:`passing`) until the
    monotonic ``deadline``; while nsqlookupd calls the cluster unstable, send it ``nudge``
    every ``nudge_every`` s. The last answer: the refusal itself once the deadline passed."""
    started = time.monotonic()
    next_nudge = started
    while True:
        result, _ = await send_request(client, req)
        if not passing(result):
            return result
        now = time.monotonic()
        if now > deadline:
            return result
        nudged = TEMPORARY.search(result.error) is None and now >= next_nudge
        if nudged:
            await send_request(client, nudge)
            next_nudge = now + nudge_every
        if waiting is not None:
            waiting(result, now - started, nudged)
        await asyncio.sleep(POLL)
