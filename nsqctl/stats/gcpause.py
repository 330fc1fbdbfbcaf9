"""Pause the cyclic garbage collector around the model's allocation bursts.

Decoding, parsing and viewing one big ``/stats`` allocates a hundred thousand containers,
none of which is cyclic garbage. With the collector running, that burst sets off repeated
full collections that walk every live object (the previous poll's included), a large
share of the model's time on a big cluster (bench/README.md, Dashboard). Collection
resumes as soon as the burst ends, so nothing is kept longer than one refresh; the
counter makes overlapping pauses from several worker threads (one per nsqd) safe.

A long-running process that rebuilds the model every few seconds (the dashboard) can also
ask for each burst's survivors to be frozen (:func:`freeze_after_bursts`): they leave the
collector's generations, so the collections between polls no longer walk the last views
(each walk on the UI thread's time) and the old views are still freed by reference
counting. Every ``unfreeze_every``-th burst unfreezes everything instead, so cyclic
garbage that got frozen meanwhile is collected at the next full collection: one slow
collection per that many polls instead of one every few polls, and no leak.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_resume = False
_unfreeze_every = 0  # 0: survivors are not frozen
_bursts = 0


def freeze_after_bursts(unfreeze_every: int = 30) -> None:
    """From now on, freeze each burst's survivors, unfreezing every ``unfreeze_every``-th
    burst (0 turns it off and unfreezes). For a process's main loop, not for a library."""
    global _unfreeze_every, _bursts
    if unfreeze_every < 0:
        raise ValueError(f"unfreeze_every must be >= 0, got {unfreeze_every}")
    with _lock:
        _unfreeze_every, _bursts = unfreeze_every, 0
        if not unfreeze_every:
            gc.unfreeze()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the collector for the block; the last of nested/concurrent pauses restores it
    (only if it was enabled when the first began)."""
    global _depth, _resume, _bursts
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
                if _unfreeze_every:
                    _bursts += 1
                    if _bursts % _unfreeze_every:
                        gc.freeze()
                    else:
                        gc.unfreeze()
                gc.enable()
