"""Polling until something holds, for tests against real servers."""

from __future__ import annotations

import asyncio
import time
from typing import Any


async def wait_for(predicate: Any, timeout: float, what: str, step: float = 0.02) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(step)


async def wait_for_count(
    count: Any, target: int, stall: float, what: str, step: float = 0.05
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
