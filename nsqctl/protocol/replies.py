"""Parsers for RESPONSE frame payloads that carry data: IDENTIFY, AUTH, traced publish."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from nsqctl.protocol.errors import ReplyDecodeError

__all__ = [
    "DEFAULT_MAX_RDY_COUNT",
    "AuthResponse",
    "IdentifyResponse",
    "TracedReply",
    "parse_auth_response",
    "parse_identify_response",
    "parse_pub_reply",
    "parse_traced_reply",
]

#: What to assume when the server predates feature negotiation (plain ``OK``).
DEFAULT_MAX_RDY_COUNT = 2500

_TRACED = struct.Struct(">QQQI")
TRACED_REPLY_SIZE = 2 + _TRACED.size  # 30


class TracedReply(NamedTuple):
    """Where a traced publish landed. For MPUB_TRACE ``trace_id`` is 0 and the
    fields describe the batch."""

    internal_id: int
    trace_id: int
    offset: int
    size: int


def parse_traced_reply(data: bytes) -> TracedReply:
    """Parse ``OK`` + 8B internal id + 8B trace id + 8B offset + 4B size (big-endian)."""
    if len(data) < TRACED_REPLY_SIZE or data[:2] != b"OK":
        raise ReplyDecodeError(
            f"expected a {TRACED_REPLY_SIZE}-byte traced reply starting with OK, "
            f"got {len(data)} bytes: {data[:32]!r}"
        )
    return TracedReply(*_TRACED.unpack_from(data, 2))


def parse_pub_reply(data: bytes) -> TracedReply | None:
    """Parse any publish reply: plain ``OK`` → None, a traced reply → :class:`TracedReply`.

    PUB_EXT answers traced only when its JSON header carries ``##trace_id``.
    """
    if data == b"OK":
        return None
    return parse_traced_reply(data)


def _load_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise ReplyDecodeError(f"{what} response is not JSON: {data[:64]!r}") from exc
    if not isinstance(obj, dict):
        raise ReplyDecodeError(f"{what} response is not a JSON object: {data[:64]!r}")
    return obj


def _get(obj: dict[str, Any], key: str, kind: type, default: Any, what: str) -> Any:
    value = obj.get(key, default)
    if value is None:
        return default
    # bool is an int subclass: keep "true" out of int fields and 1 out of bool fields.
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ReplyDecodeError(f"{what} field {key!r} should be an integer, got {value!r}")
    if not isinstance(value, kind):
        raise ReplyDecodeError(f"{what} field {key!r} should be {kind.__name__}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class IdentifyResponse:
    """Settings nsqd negotiated in its IDENTIFY reply (timeouts in milliseconds)."""

    max_rdy_count: int = DEFAULT_MAX_RDY_COUNT
    version: str = ""
    max_msg_timeout: int = 0
    msg_timeout: int = 0
    tls_v1: bool = False
    deflate: bool = False
    deflate_level: int = 0
    max_deflate_level: int = 0
    snappy: bool = False
    sample_rate: int = 0
    auth_required: bool = False
    output_buffer_size: int = 0
    output_buffer_timeout: int = 0
    #: False when the server answered plain ``OK`` (no feature negotiation).
    negotiated: bool = True
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_redesign(self) -> bool:
        """True for the partitioned redesign (versions like ``0.3.7-HA.1.13.0``)."""
        return "HA" in self.version


_INT_FIELDS = (
    "max_rdy_count",
    "max_msg_timeout",
    "msg_timeout",
    "deflate_level",
    "max_deflate_level",
    "sample_rate",
    "output_buffer_size",
    "output_buffer_timeout",
)
_BOOL_FIELDS = ("tls_v1", "deflate", "snappy", "auth_required")
_IDENTIFY_DEFAULTS = {f.name: f.default for f in fields(IdentifyResponse)}


def parse_identify_response(data: bytes) -> IdentifyResponse:
    """Parse the IDENTIFY reply; plain ``OK`` means a server without negotiation."""
    if data == b"OK":
        return IdentifyResponse(negotiated=False)
    obj = _load_object(data, "IDENTIFY")
    kwargs: dict[str, Any] = {
        name: _get(obj, name, int, _IDENTIFY_DEFAULTS[name], "IDENTIFY") for name in _INT_FIELDS
    }
    kwargs.update((name, _get(obj, name, bool, False, "IDENTIFY")) for name in _BOOL_FIELDS)
    kwargs["version"] = _get(obj, "version", str, "", "IDENTIFY")
    if kwargs["max_rdy_count"] <= 0:
        kwargs["max_rdy_count"] = DEFAULT_MAX_RDY_COUNT
    return IdentifyResponse(**kwargs, raw=obj)


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class AuthResponse(NamedTuple):
    """The AUTH reply: who the secret identifies and how many permissions it grants."""

    identity: str = ""
    identity_url: str = ""
    permission_count: int = 0


def parse_auth_response(data: bytes) -> AuthResponse:
    """Parse the JSON reply to AUTH."""
    obj = _load_object(data, "AUTH")
    return AuthResponse(
        identity=_get(obj, "identity", str, "", "AUTH"),
        identity_url=_get(obj, "identity_url", str, "", "AUTH"),
        permission_count=_get(obj, "permission_count", int, 0, "AUTH"),
    )
