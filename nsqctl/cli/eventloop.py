"""The event loop the streaming commands (``tail``, ``pub``, ``archive``) run on.

Their rate is bounded by the loop's cost per event: on an ordered channel youzan's nsqd
sends a partition's next message only after the FIN of the last, so every message is one
epoll wait, one read callback and one write, and the loop's own Python (``_run_once``,
the selector's bookkeeping, the transport's read path) is paid once per message. uvloop
runs that part in C on libuv. It is a well-kept library (MagicStack, the authors of
asyncpg) with wheels for Linux and macOS; where it is missing (Windows, an install
without it) the standard loop runs the same code. ``NSQCTL_EVENT_LOOP=asyncio`` forces
the standard loop, for an operator who suspects the loop itself.

The admin commands keep ``asyncio.run``: they make a few HTTP requests, where the loop's
cost per event does not show.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from nsqctl.errors import ConfigError

T = TypeVar("T")

LOOPS = ("uvloop", "asyncio")
"""Values of ``NSQCTL_EVENT_LOOP``; unset means uvloop where it is installed."""


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` unless told otherwise or missing; None: asyncio's."""
    wanted = os.environ.get("NSQCTL_EVENT_LOOP", "").strip().lower()
    if wanted and wanted not in LOOPS:
        raise ConfigError(
            f"NSQCTL_EVENT_LOOP={wanted!r} is not an event loop: use one of {', '.join(LOOPS)}"
        )
    if wanted == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if wanted == "uvloop":
            raise ConfigError(
                "NSQCTL_EVENT_LOOP=uvloop but uvloop is not installed: pip install uvloop "
                "(Linux and macOS), or unset NSQCTL_EVENT_LOOP"
            ) from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on :func:`loop_factory`'s loop (Ctrl-C cancels ``main`` the
    same way: ``asyncio.Runner`` installs the handler whatever the loop)."""
    try:
        factory = loop_factory()
    except BaseException:
        main.close()  # never started: no "was never awaited" warning on top of the error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
