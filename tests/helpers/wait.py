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
