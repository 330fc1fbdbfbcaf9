"""The errors of reading nsqlookupd's answers, apart from the decoding itself so that a
module naming them does not load msgspec (``pub --help`` imports the lookup model)."""

from __future__ import annotations

from nsqctl.errors import AnswerDecodeError, ProtocolError

__all__ = ["LookupDecodeError", "LookupProtocolError"]


class LookupProtocolError(ProtocolError):
    """An nsqlookupd answered with something that is not a lookup response."""


class LookupDecodeError(LookupProtocolError, AnswerDecodeError):
    """An nsqlookupd answered JSON of the wrong shape; ``str()`` names the server, the
    endpoint and the field (``$.producers[0].tcp_port``)."""
