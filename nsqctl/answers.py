"""Decoding a server's JSON answer, at the edge, into typed records (msgspec), for every
HTTP answer nsqctl reads apart from nsqd's ``/stats`` (which has its own, faster path,
:mod:`nsqctl.stats.wire`, and unwraps the pre-v1 envelope with :func:`unwrapped` too).

A body of the wrong shape (a port of ``"x"``, a list where an object belongs, a message
id that is text) fails here, as one :class:`AnswerDecodeError` naming the server, the
endpoint and the field (msgspec's ``$.topic_coord_stats[0].partition``), rather than as a
``TypeError`` or ``ValueError`` deep in a caller, or a garbage value reaching a view.

Decoding is lax (``strict=False``): both families spell some numbers as strings. Keys
not named by a record are skipped without being built. Every record has the fields of
the pre-v1 envelope (``{"status_code", "status_txt", "data"}``) and of v1's error
(``{"message"}``); ``data`` is decoded again into the same record.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from nsqctl.errors import AnswerDecodeError

__all__ = [
    "NULL",
    "W",
    "WireEnvelope",
    "convert",
    "decode",
    "decode_value",
    "decoder",
    "is_json",
    "unwrapped",
]

NULL = msgspec.Raw(b"null")
"""A field that was sent as ``null`` or not at all."""


class WireEnvelope(msgspec.Struct, gc=False):
    """The pre-v1 envelope and v1's error body; every answer record has these fields."""

    status_code: int | None = None
    status_txt: str | None = None
    data: msgspec.Raw = NULL
    message: str | None = None


W = TypeVar("W", bound=WireEnvelope)

_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def decoder(kind: type[W]) -> msgspec.json.Decoder[W | None]:
    """The one lax decoder of ``kind`` (or ``null``), made on first use."""
    found = _DECODERS.get(kind)
    if found is None:
        found = _DECODERS[kind] = msgspec.json.Decoder(kind | None, strict=False)
    return found


def is_json(content: bytes) -> bool:
    """True when ``content`` is JSON of any shape: an answer that is not is another
    server's (an error page), not one of the wrong shape."""
    try:
        msgspec.json.decode(content)
    except msgspec.DecodeError:
        return False
    return True


def _fail(
    role: str, source: str, path: str, err: Exception, error: type[AnswerDecodeError]
) -> AnswerDecodeError:
    return error(
        f"{role} {source or '?'} answered {path} with a wrong shape: {err}; "
        f"check that the address is an {role} of a supported version"
    )


def unwrapped(
    record: W | None,
    kind: type[W],
    role: str,
    source: str,
    path: str,
    error: type[AnswerDecodeError],
) -> W | None:
    """``record``, or its envelope's ``data`` decoded as ``kind`` when it is wrapped (the
    envelope's status kept on it, so an error stays an error: a ``status_code`` of 500
    around a full ``data`` is an error, not an answer).

    The one reading of the pre-v1 envelope for every answer, nsqd's ``/stats`` included:
    ``record`` counts as wrapped when it carries a ``status_code`` (both families always
    send a number there); ``data`` that is absent or ``null`` leaves ``record`` as it came
    (a wrapped error, or a body that puts ``status_code`` beside its own fields). An
    envelope inside ``data`` is unwrapped in turn, and the first status other than 200 on
    the way in is the one kept."""
    while record is not None and record.status_code is not None:
        body = bytes(record.data).strip()
        if body in (b"", b"null"):
            return record
        try:
            inner = decoder(kind).decode(body)
        except (msgspec.ValidationError, msgspec.DecodeError) as err:
            raise _fail(role, source, f"{path} (in its envelope's data)", err, error) from None
        if inner is None:
            return record
        nested = inner.status_code is not None
        if not nested or record.status_code != 200:
            inner.status_code, inner.status_txt = record.status_code, record.status_txt
        if not nested:
            return inner
        record = inner
    return record


def decode(
    content: bytes,
    kind: type[W],
    *,
    role: str,
    source: str,
    path: str,
    error: type[AnswerDecodeError] = AnswerDecodeError,
) -> W | None:
    """Decode one answer body of ``role`` (``"nsqd"``, ``"nsqlookupd"``) into ``kind``
    (``None`` for an empty or ``null`` body), unwrapping the pre-v1 envelope; ``error``
    (an :class:`AnswerDecodeError`) if it is not JSON or does not fit."""
    if not content.strip():
        return None
    try:
        record = decoder(kind).decode(content)
    except (msgspec.ValidationError, msgspec.DecodeError) as err:
        raise _fail(role, source, path, err, error) from None
    return unwrapped(record, kind, role, source, path, error)


def convert(
    payload: Any,
    kind: type[W],
    *,
    role: str,
    source: str,
    path: str,
    error: type[AnswerDecodeError] = AnswerDecodeError,
) -> W | None:
    """:func:`decode` for a body already decoded into Python values (``json.loads``):
    re-encoded, so both paths judge a body by the one set of rules."""
    try:
        content = msgspec.json.encode(payload)
    except (TypeError, ValueError, OverflowError) as err:
        raise _fail(role, source, path, err, error) from None
    return decode(content, kind, role=role, source=source, path=path, error=error)


def decode_value(
    content: bytes,
    kind: Any,
    *,
    role: str,
    source: str,
    path: str,
    error: type[AnswerDecodeError] = AnswerDecodeError,
) -> Any:
    """A bare JSON value of type ``kind`` (``str | int``, ``list[str]``: nsqd's
    ``/config/OPTION``), sent as it is or in the pre-v1 envelope's ``data``; ``error``
    naming the field if it does not fit, or if the envelope holds an error."""
    try:
        found = msgspec.json.decode(content, type=kind | WireEnvelope, strict=False)
        if isinstance(found, WireEnvelope):
            if found.status_code not in (None, 200) or found.data == NULL:
                why = found.status_txt or found.message or found.status_code
                # the server's own text, on the error's one line whatever it holds
                why = " ".join(str(why).split()) or "no reason given"
                raise error(f"{role} {source or '?'} answered {path} with an error: {why}")
            found = msgspec.json.decode(found.data, type=kind, strict=False)
    except (msgspec.ValidationError, msgspec.DecodeError) as err:
        raise _fail(role, source, path, err, error) from None
    return found
