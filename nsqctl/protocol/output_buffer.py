"""How long nsqd may hold a consumer's messages in its per-connection output buffer: the
one reading of the output-buffer setting (``auto``, ``none`` or a duration such as
``100ms``), wherever it comes from, and the IDENTIFY fields it asks for.

Why it matters: the original nsqd (v1) moves a channel's disk-queue read position when it
hands a message to a connection, not when the message is FINed, and writes the message
into the connection's output buffer, flushed every ``output_buffer_timeout`` (250 ms by
default). A kill -9 in that wait, after nsqd saved the read position, loses what the
buffer held: no consumer got it and the restarted nsqd does not deliver it again. An
unbuffered connection (IDENTIFY ``output_buffer_size: -1``) receives each message as it
is handed out. The redesign confirms a channel's position only at FIN, so it delivers a
killed buffer's messages again either way.

Values:

- ``auto``: unbuffered for a consumer of a durable channel on the original family,
  nsqd's default otherwise (an ephemeral channel lives in nsqd's memory: a kill loses it
  whole, buffered or not; the redesign gains nothing). The family is known from the
  lookupd's answer: an nsqd named directly (``--nsqd``) is asked unbuffered whichever it is;
- ``none``: unbuffered for every consumer;
- a duration (``100ms``, ``1s``, ``1.5s``): buffered, flushed at least that often (the
  original nsqd refuses less than its ``--min-output-buffer-timeout``, 25 ms by default).
"""

from __future__ import annotations

import re

from nsqctl.errors import ConfigError

AUTO = "auto"
UNBUFFERED = "none"
#: IDENTIFY's ``output_buffer_size`` asking for no buffer (nsqd writes each frame at once)
UNBUFFERED_SIZE = -1
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s)")
_HINT = "auto, none (unbuffered) or a duration such as 100ms or 1s"


def parse_output_buffer(text: str, *, setting: str = "output_buffer") -> str:
    """``text`` as the setting's normal spelling (``auto``, ``none`` or ``<N>ms``), or a
    :class:`ConfigError` naming ``setting`` and what the value may be."""
    raw = text.strip().lower()
    if raw in (AUTO, UNBUFFERED):
        return raw
    match = _DURATION.fullmatch(raw)
    if match is not None:
        number, unit = match.groups()
        ms = float(number) * (1000 if unit == "s" else 1)
        if ms >= 1 and ms == int(ms):
            return f"{int(ms)}ms"
    raise ConfigError(f"bad {setting} {text!r}: use {_HINT}", setting="output_buffer")


def output_buffer_fields(value: str, *, durable: bool) -> dict[str, int | bool]:
    """The :class:`~nsqctl.connection.ConnectionConfig` fields a consumer's connections get
    for the setting ``value`` (already parsed): empty for nsqd's default. ``auto`` asks
    only the original family (on a topic the lookupd reports as the redesign's, whose
    positions move at FIN, unbuffered output would cost nsqd CPU for nothing)."""
    value = parse_output_buffer(value)
    if value == UNBUFFERED:
        return {"output_buffer_size": UNBUFFERED_SIZE}
    if value == AUTO and durable:
        return {"output_buffer_size": UNBUFFERED_SIZE, "output_buffer_original_only": True}
    if value == AUTO:
        return {}
    return {"output_buffer_timeout_ms": int(value.removesuffix("ms"))}
