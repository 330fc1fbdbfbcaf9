"""NSQCTL_DEBUG, read alike wherever it is read: as click reads the environment variable
of the ``--debug`` flag, so that ``NSQCTL_DEBUG=0`` (false, off) is off everywhere, not
on for being set."""

from __future__ import annotations

import os

DEBUG_ENV = "NSQCTL_DEBUG"

#: click's true words (its BOOL type); anything else is off here (click refuses a word it
#: knows neither way as a usage error of --debug)
_ON = frozenset({"1", "true", "t", "yes", "y", "on"})


def debug_from_env() -> bool:
    """Whether NSQCTL_DEBUG asks for debugging output."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in _ON
