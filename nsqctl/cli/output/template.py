"""``tail --format TEMPLATE``: kcat's output tokens, for NSQ messages.

A template is parsed once into literal bytes and field getters, so printing a message is
one list comprehension and one join: tail is a hot path, there is no regex or string
scan per message. Bodies are written as raw bytes (as kcat writes them), never decoded;
nothing is added: no newline unless the template has one (``\\n``), as in kcat.

kcat's letters keep kcat's meaning where NSQ has the field; NSQ's own use letters kcat
does not have. A field a server family does not send renders as kcat renders a missing
value: ``-1`` for a partition or offset, empty for the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from nsqctl.cli.output.messages import Printable
from nsqctl.errors import ConfigError

__all__ = ["TOKENS", "TOKENS_HELP", "Template", "compile_template", "is_template"]

Getter = Callable[[Printable], bytes]

MISSING_NUMBER = b"-1"
"""What kcat prints for a partition or offset it does not have."""


def _body(msg: Printable) -> bytes:
    return msg.body


def _size(msg: Printable) -> bytes:
    return str(len(msg.body)).encode()


def _topic(msg: Printable) -> bytes:
    return msg.topic.encode()


def _partition(msg: Printable) -> bytes:
    part = msg.partition
    return MISSING_NUMBER if part is None else str(part).encode()


def _offset(msg: Printable) -> bytes:
    offset = msg.offset
    return MISSING_NUMBER if offset is None else str(offset).encode()


def _timestamp_ms(msg: Printable) -> bytes:
    return str(msg.timestamp // 1_000_000).encode()


def _header_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _headers(msg: Printable) -> bytes:
    """kcat's ``name=value`` list, comma-separated, from a youzan ext topic's JSON header."""
    header = msg.ext_header
    if not header:
        return b""
    return ",".join(f"{k}={_header_value(v)}" for k, v in header.items()).encode()


def _id(msg: Printable) -> bytes:
    return msg.id_text.encode()


def _attempts(msg: Printable) -> bytes:
    return str(msg.attempts).encode()


def _nsqd(msg: Printable) -> bytes:
    return msg.nsqd_address.encode()


def _trace_id(msg: Printable) -> bytes:
    """The redesign sends trace id 0 for a message published untraced: no trace id."""
    trace = msg.trace_id
    return str(trace).encode() if trace else b""


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class Token(NamedTuple):
    letter: str
    getter: Getter
    meaning: str


TOKENS: tuple[Token, ...] = (
    Token("s", _body, "body (raw bytes)"),
    Token("S", _size, "body size in bytes"),
    Token("t", _topic, "topic"),
    Token("p", _partition, "partition (-1 on the original family)"),
    Token("o", _offset, "queue offset (-1 when the server sends none)"),
    Token("T", _timestamp_ms, "publish timestamp in milliseconds"),
    Token("h", _headers, "ext topic headers as name=value,... (empty when none)"),
    Token("i", _id, "message id"),
    Token("a", _attempts, "attempts"),
    Token("n", _nsqd, "nsqd address it came from"),
    Token("r", _trace_id, "trace id (empty when untraced or on the original family)"),
)
_BY_LETTER = {t.letter: t.getter for t in TOKENS}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}

TOKENS_HELP = (
    ", ".join(f"%{t.letter} {t.meaning}" for t in TOKENS)
    + "; %% a literal %; escapes \\n \\t \\r \\\\. Nothing is added: end the template "
    "with \\n for one message a line."
)
"""The tokens in one paragraph, for ``--help`` and the man page."""


def is_template(fmt: str) -> bool:
    """A ``--format`` value with a ``%`` is a template; without, a named format."""
    return "%" in fmt


class Template:
    """A parsed template: :meth:`render` is the output of one message."""

    __slots__ = ("_pieces", "source")

    def __init__(self, source: str, pieces: list[bytes | Getter]) -> None:
        self.source = source
        self._pieces = pieces

    def render(self, msg: Printable) -> bytes:
        parts: list[bytes] = [p if isinstance(p, bytes) else p(msg) for p in self._pieces]
        return b"".join(parts)

    def render_all(self, msgs: Sequence[Printable]) -> bytes:
        """Many messages in one join (a flushed batch)."""
        pieces = self._pieces
        parts = [p if isinstance(p, bytes) else p(msg) for msg in msgs for p in pieces]
        return b"".join(parts)


def _valid() -> str:
    return " ".join(f"%{t.letter}" for t in TOKENS) + " %% \\n \\t \\r \\\\"


def compile_template(source: str, option: str = "--format") -> Template:
    """Parse ``source`` once; a bad token or escape is a :class:`ConfigError` naming it
    and listing the valid ones."""
    pieces: list[bytes | Getter] = []
    literal: list[str] = []
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch not in "%\\":
            literal.append(ch)
            i += 1
            continue
        if i + 1 >= n:
            raise ConfigError(
                f"bad {option} template {source!r}: it ends in a lone {ch!r} (valid: {_valid()})"
            )
        nxt = source[i + 1]
        i += 2
        if ch == "\\":
            if nxt not in _ESCAPES:
                raise ConfigError(
                    f"bad {option} template {source!r}: unknown escape \\{nxt} (valid: {_valid()})"
                )
            literal.append(_ESCAPES[nxt])
        elif nxt == "%":
            literal.append("%")
        elif nxt in _BY_LETTER:
            if literal:
                pieces.append("".join(literal).encode())
                literal = []
            pieces.append(_BY_LETTER[nxt])
        else:
            raise ConfigError(
                f"bad {option} template {source!r}: unknown token %{nxt} (valid: {_valid()})"
            )
    if literal:
        pieces.append("".join(literal).encode())
    return Template(source, pieces)
