"""Dotted-path field access into JSON message bodies (``user.id``), shared by the
``pub --shard-field`` key extraction and the ``tail --jq-field`` filter."""

from __future__ import annotations

import json
from typing import Any

MISSING = object()


def get_field(obj: Any, path: str) -> Any:
    """The value at ``path`` (dot-separated keys), or ``MISSING``."""
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return MISSING
        obj = obj[part]
    return obj


def scalar_text(value: Any) -> str | None:
    """A scalar as text the way a user types it (42, true, abc); None for objects/lists/null."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, (dict, list)):
        return None
    return json.dumps(value)
