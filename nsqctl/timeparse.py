"""The one reading of a point in time given on the command line: ``tail --from-time`` and
``--until``, ``replay --since``/``--until``/``--from-time``.

Unix seconds (a fraction allowed) or ISO 8601, UTC unless the text names an offset. The
arithmetic is exact (no float): a message timestamp is compared to the nanosecond, and
``float(1764151200.123456789) * 1e9`` is not that.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from nsqctl.errors import ConfigError

_SECONDS = re.compile(r"(\d+)(?:\.(\d{1,9}))?")


def parse_time_ns(text: str) -> int:
    """``text`` as nanoseconds since the Unix epoch; :class:`ConfigError` when it is
    neither Unix seconds nor ISO 8601."""
    text = text.strip()
    seconds = _SECONDS.fullmatch(text)
    if seconds is not None:
        whole, fraction = seconds.groups()
        return int(whole) * 1_000_000_000 + int((fraction or "").ljust(9, "0"))
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"bad time {text!r}: use Unix seconds (1764151200 or 1764151200.5) or ISO 8601 "
            "like 2026-11-21T10:00:00 (UTC unless it names an offset)"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    whole = int(when.replace(microsecond=0).timestamp())
    return whole * 1_000_000_000 + when.microsecond * 1_000


def parse_time_s(text: str) -> int:
    """:func:`parse_time_ns` in whole seconds (youzan's SUB_ADVANCED ``timestamp:``)."""
    return parse_time_ns(text) // 1_000_000_000
