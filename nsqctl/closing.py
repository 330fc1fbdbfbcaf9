"""A client's close() that runs once, in a task of its own.

A close awaited directly stops where its caller's deadline cancels it: for a client that
waits for work in progress before closing its connections, that leaves the connections
open until close() is called again, which a caller whose deadline passed rarely does.
Run in a task of its own and awaited shielded, the close runs to its end whatever
happens to the close() that began it, and every later close() waits for that same one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


def retrieve(task: asyncio.Task[Any]) -> None:
    """Take a finished background task's outcome, so asyncio does not report an exception
    nobody retrieved (whoever awaited it got it; otherwise it is of no use)."""
    if not task.cancelled():
        task.exception()


class CloseOnce:
    """The one close of a client: begun by its first close(), waited for by every one."""

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None

    @property
    def begun(self) -> bool:
        """Whether a close() has begun the close."""
        return self._task is not None

    def begin(self, close: Callable[[], Coroutine[Any, Any, None]]) -> asyncio.Task[None]:
        """The close's task: ``close()`` started in it by the first call, the same task
        for every later one (``close`` is then not called)."""
        if self._task is None:
            self._task = asyncio.create_task(close(), name="nsq-close")
            self._task.add_done_callback(retrieve)  # raised to whoever awaits it, if anyone
        return self._task

    async def run(self, close: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Begin the close (:meth:`begin`) and wait for its end; a cancel of this wait
        leaves the close running on."""
        await asyncio.shield(self.begin(close))
