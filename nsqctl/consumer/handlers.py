"""Running a handler when the consumer is asked to do more than call it: at most
``concurrency`` at once, a plain function in a pool of threads, and TOUCH for messages
held past half their message timeout (``auto_touch``).

Without any of these settings the delivery path calls the handler itself (a plain
function in line, on the loop; an async one as a task per message), and none of this
module's work is done per message.

A message waiting for a free handler is not started yet: closing gives it back at once,
and a handler freed later skips it (it is answered). A thread cannot be cancelled: when
the consumer stops waiting for it, its message is given back (once) and the thread runs
on; whatever the handler answers then raises AlreadyRespondedError in that thread, and no
FIN follows the give-back.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from nsqctl.consumer.touch import TouchTimer, touch_schedule
from nsqctl.errors import ConfigError
from nsqctl.message import Message

if TYPE_CHECKING:
    from nsqctl.consumer.options import ConsumerOptions
    from nsqctl.consumer.stats import ConsumerStats

Handler = Callable[[Message], Awaitable[Any] | Any]


def cancelled_from_outside() -> bool:
    """Whether the running task is being cancelled (the consumer cancels an overrunning
    handler at close, having given its message back). A CancelledError a handler raised
    while its task was not is the handler's own failure (an operation it awaited was
    cancelled): its message must be requeued like any failure, or it stays unanswered,
    in flight on nsqd until its timeout and holding one of ``max_in_flight`` for good."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def is_async_handler(handler: Handler) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one: called, it only
    makes a coroutine, which must be awaited for the handler to run at all."""
    if inspect.iscoroutinefunction(handler):
        return True
    return callable(handler) and inspect.iscoroutinefunction(type(handler).__call__)


def check_handler_settings(handler: Handler | None, options: ConsumerOptions) -> None:
    """Refuse a handler that is not a function, and the handler settings that would
    silently do nothing with this handler."""
    if handler is not None and not callable(handler):
        raise ConfigError(
            f"handler must be a function taking a Message (or None to iterate), got "
            f"{type(handler).__name__} {handler!r}",
            setting="handler",
        )
    if handler is None:
        for name in ("concurrency", "threads", "auto_touch"):
            if getattr(options, name) not in (None, False):
                raise ConfigError(
                    f"{name} applies to a handler; without one the consumer is iterated and "
                    f"your loop holds each message: drop {name}= or pass a handler",
                    setting=name,
                )
        return
    if is_async_handler(handler):
        if options.threads:
            raise ConfigError(
                "threads=True runs a plain-function handler in threads; this handler is "
                "async (it runs on the event loop): drop threads=True and bound it with "
                "concurrency=N",
                setting="threads",
            )
        return
    if options.threads:
        return
    if options.concurrency is not None and options.concurrency > 1:
        raise ConfigError(
            f"a plain-function handler runs on the event loop, one message at a time: "
            f"concurrency={options.concurrency} needs threads=True (or an async handler)",
            setting="concurrency",
        )
    if options.auto_touch:
        raise ConfigError(
            "auto_touch with a plain-function handler on the event loop could never touch "
            "(the handler holds the loop): add threads=True and concurrency=N, or use an "
            "async handler",
            setting="auto_touch",
        )


class HandlerRunner:
    """Runs one message's handler: waits for one of ``concurrency`` slots, calls the
    handler (in a thread with ``threads``), touches it meanwhile with ``auto_touch``, and
    FINs it when the handler returns unanswered; ``on_failure`` gets what it raised."""

    def __init__(
        self,
        handler: Handler,
        *,
        concurrency: int | None,
        threads: bool,
        auto_touch: bool,
        stats: ConsumerStats,
        on_failure: Callable[[Message, BaseException], None],
    ) -> None:
        self._handler = handler
        self.threads = threads
        self._auto_touch = auto_touch
        self._stats = stats
        self._on_failure = on_failure
        self._slots = asyncio.Semaphore(concurrency) if concurrency is not None else None
        self._pool = (
            ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="nsq-handler")
            if threads
            else None
        )
        # Messages waiting for a slot, in arrival order (a dict: ordered, O(1) removal).
        self._waiting: dict[Message, None] = {}

    def waiting(self) -> list[Message]:
        """The messages waiting for a free handler (not started)."""
        return list(self._waiting)

    async def run(self, msg: Message) -> None:
        touch = self._touch_from_arrival(msg) if self._auto_touch else None
        try:
            slots = self._slots
            if slots is None:
                await self._call(msg)
                return
            waiting = self._waiting
            waiting[msg] = None
            try:
                await slots.acquire()
            finally:
                waiting.pop(msg, None)
            try:
                if msg.outcome is None:  # else given back while it waited (closing)
                    await self._call(msg)
            finally:
                slots.release()
        finally:
            if touch is not None:
                touch.cancel()

    async def _call(self, msg: Message) -> None:
        try:
            if self._pool is not None:
                await asyncio.get_running_loop().run_in_executor(self._pool, self._handler, msg)
            else:
                await self._handler(msg)
        except asyncio.CancelledError as err:
            if cancelled_from_outside():
                raise
            self._on_failure(msg, err)
            return
        except Exception as err:
            self._on_failure(msg, err)
            return
        if msg.auto_response and msg.outcome is None:
            msg.finish()

    def _touch_from_arrival(self, msg: Message) -> TouchTimer:
        """Touches counted from the arrival: waiting for a slot is part of nsqd's
        timeout. They stop once the handler answered it (or it was given back)."""
        conn = msg.delivery.conn
        schedule = touch_schedule(conn, msg.received_at)
        return TouchTimer(
            conn, msg.id, schedule, self._stats, answered=lambda: msg.outcome is not None
        )

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
