"""How tail and peek print a message: the fields printed, a plain record of them for a
message that was only read, and the named formats (raw, json, pretty).

The formats take anything with the printed fields (:class:`Printable`): a delivered
:class:`~nsqctl.message.Message` has them, so tail formats what it received as it is, with
no copy per message on its hot path; peek, whose messages were read over HTTP and are
acknowledged by nobody, builds a :class:`PrintedMessage`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from nsqctl.cli.output.terminal import escape_controls
from nsqctl.message import body_to_json, describe, ext_header, id_text
from nsqctl.protocol.raw_message import RawMessage

__all__ = ["Printable", "PrintedMessage", "format_message"]


class Printable(Protocol):
    """The fields a printed message shows."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int | None: ...
    @property
    def nsqd_address(self) -> str: ...
    @property
    def body(self) -> bytes: ...
    @property
    def id_text(self) -> str: ...
    @property
    def attempts(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def offset(self) -> int | None: ...
    @property
    def trace_id(self) -> int | None: ...
    @property
    def ext_header(self) -> dict[str, Any] | None: ...
    def describe(self) -> dict[str, Any]: ...


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class PrintedMessage(NamedTuple):
    """A message to print that nobody will acknowledge: the frame and where it was read."""

    raw: RawMessage
    topic: str
    channel: str
    partition: int | None
    nsqd_address: str

    @property
    def body(self) -> bytes:
        return self.raw.body

    @property
    def id_text(self) -> str:
        return id_text(self.raw)

    @property
    def attempts(self) -> int:
        return self.raw.attempts

    @property
    def timestamp(self) -> int:
        return self.raw.timestamp

    @property
    def offset(self) -> int | None:
        return self.raw.offset

    @property
    def trace_id(self) -> int | None:
        return self.raw.trace_id

    @property
    def ext_header(self) -> dict[str, Any] | None:
        return ext_header(self.raw)

    def describe(self) -> dict[str, Any]:
        return describe(self.raw, self.topic, self.channel, self.partition, self.nsqd_address)


def format_message(msg: Printable, fmt: str, print_topic: bool) -> bytes:
    """One message in a named format (``raw``, ``json`` or ``pretty``), newline ended."""
    if fmt == "raw":
        prefix = f"{msg.topic} | ".encode() if print_topic else b""
        return prefix + msg.body + b"\n"
    body, encoding = body_to_json(msg.body)
    record = msg.describe()
    if fmt == "pretty":
        when = datetime.fromtimestamp(msg.timestamp / 1e9, UTC).isoformat(timespec="milliseconds")
        where = msg.topic if msg.partition is None else f"{msg.topic}[{msg.partition}]"
        head = f"--- {where} id={msg.id_text} attempts={msg.attempts} at {when}"
        if msg.offset is not None:
            head += f" offset={msg.offset}"
        if msg.trace_id:
            head += f" trace_id={msg.trace_id}"
        text = (
            escape_controls(body)
            if encoding == "text"
            else f"<{len(msg.body)} bytes, base64> {body}"
        )
        return f"{head}\n{text}\n".encode()
    record.update(body_encoding=encoding, body=body)
    return (json.dumps(record, ensure_ascii=False) + "\n").encode()
