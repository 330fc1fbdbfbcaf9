"""Pause the cyclic garbage collector around the model's allocation bursts.

Decoding, parsing and viewing one big ``/stats`` allocates a hundred thousand containers,
none of which is cyclic garbage. With the collector running, that burst sets off repeated
full collections that walk every live object (the previous poll's included): about 90 ms
per refresh on the 1,000-partition benchmark, a third of the model's time. Collection
resumes as soon as the burst ends, so nothing is kept longer than one refresh; the
counter makes overlapping pauses from several worker threads (one per nsqd) safe.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_resume = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the collector for the block; the last of nested/concurrent pauses restores it
    (only if it was enabled when the first began)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
