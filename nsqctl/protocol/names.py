"""Topic and channel name rules, shared by both server families.

Checking names before sending saves a round trip and, more importantly, a fatal
``E_BAD_TOPIC`` that would close the connection.
"""

from __future__ import annotations

import re

from nsqctl.errors import ConfigError

__all__ = [
    "EPHEMERAL_SUFFIX",
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "InvalidNameError",
    "is_ephemeral",
    "validate_channel",
    "validate_topic",
]

MAX_NAME_LENGTH = 64
EPHEMERAL_SUFFIX = "#ephemeral"
_ALLOWED = "1-64 characters of letters, digits, '.', '_' and '-', optionally ending in #ephemeral"
#: A whole valid name, as a pattern to fullmatch (ASCII only): what both families accept.
NAME_PATTERN = r"[.a-zA-Z0-9_-]+(?:#ephemeral)?"
# fullmatch + \Z-free pattern: "$" would accept a trailing newline.
_NAME_RE = re.compile(NAME_PATTERN, re.ASCII)
_BAD_CHAR_RE = re.compile(r"[^.a-zA-Z0-9_-]", re.ASCII)


class InvalidNameError(ConfigError):
    """A topic or channel name the servers would reject."""


def _validate(kind: str, name: str) -> str:
    if not isinstance(name, str):
        raise InvalidNameError(f"{kind} name must be a string, got {type(name).__name__}")
    if not name:
        raise InvalidNameError(f"{kind} name is empty; allowed: {_ALLOWED}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"{kind} name {name[:20]!r}... is {len(name)} characters long; allowed: {_ALLOWED}"
        )
    if _NAME_RE.fullmatch(name) is None:
        base = name.removesuffix(EPHEMERAL_SUFFIX)
        bad = _BAD_CHAR_RE.search(base)
        if not base:
            what = "has nothing before #ephemeral"
        elif bad is not None:
            what = f"contains {bad.group()!r} at position {bad.start()}"
        else:
            what = "is malformed"
        raise InvalidNameError(f"{kind} name {name!r} {what}; allowed: {_ALLOWED}")
    return name


def validate_topic(name: str) -> str:
    """Return ``name`` if it is a valid topic name, else raise :class:`InvalidNameError`."""
    return _validate("topic", name)


def validate_channel(name: str) -> str:
    """Return ``name`` if it is a valid channel name, else raise :class:`InvalidNameError`."""
    return _validate("channel", name)


def is_ephemeral(name: str) -> bool:
    """True for ``#ephemeral`` topics/channels (nsqd keeps them in memory only)."""
    return name.endswith(EPHEMERAL_SUFFIX)
