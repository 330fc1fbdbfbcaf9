"""Polling until something holds, for tests against real servers.

One condition-wait in each world: :func:`eventually` blocks (plain test code, threads),
:func:`wait_for` awaits (inside the event loop, where a blocking sleep would stall the
very client being waited on). Both fail with an AssertionError naming what never came.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


def _timed_out(timeout: float, what: str | Callable[[], str]) -> AssertionError:
    said = what if isinstance(what, str) else what()
    return AssertionError(f"timed out after {timeout}s waiting for {said}")


def eventually(
    predicate: Callable[[], object],
    timeout: float,
    what: str | Callable[[], str],
    step: float = 0.1,
    pause: Callable[[float], None] = time.sleep,
) -> None:
    """Poll until ``predicate()`` holds; fail after ``timeout`` seconds, naming ``what``
    (a callable is asked at the timeout, to say the last state it saw). ``pause`` sleeps
    between polls: a caller whose events arrive through another library's calls passes
    that library's wait. A predicate may raise to fail at once (a process that died)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what)
        pause(step)


async def wait_for(
    predicate: Callable[[], object],
    timeout: float,
    what: str | Callable[[], str],
    step: float = 0.02,
    pause: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """:func:`eventually` on the event loop: ``predicate()`` may return an awaitable, and
    ``pause`` may be the awaited wait of what drives the events (a Textual pilot's)."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what)
        await pause(step)


async def wait_for_count(
    count: Callable[[], int], target: int, stall: float, what: str, step: float = 0.05
) -> None:
    """Wait until ``count()`` reaches ``target``; fail only when it stops growing for
    ``stall`` seconds. For work whose pace depends on the machine (an nsqd that fsyncs
    every message): slowness is waited out, a real loss shows as a stall."""
    best, since = count(), time.monotonic()
    while best < target:
        await asyncio.sleep(step)
        now_count = count()
        if now_count > best:
            best, since = now_count, time.monotonic()
        elif time.monotonic() - since > stall:
            raise AssertionError(f"stalled at {best}/{target} for {stall}s waiting for {what}")
