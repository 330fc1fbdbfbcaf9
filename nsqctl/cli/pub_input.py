"""Where ``nsqctl pub`` messages come from: arguments, files or stdin, streamed.

Records carry their 1-based number in the input so errors can name the line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from nsqctl.errors import ConfigError
from nsqctl.jsonfield import MISSING, get_field, scalar_text


@dataclass(frozen=True)
class Record:
    number: int  # 1-based position in the input (a line number for newline-split input)
    body: bytes


def split_stream(stream: BinaryIO, delimiter: bytes, chunk_size: int = 1 << 20) -> Iterator[Record]:
    """Split a stream on ``delimiter`` without reading it all into memory.

    Empty records (blank lines) are skipped, as to_nsq does, but still counted so the
    numbers match the input's line numbers.
    """
    buf = b""
    number = 0
    while True:
        chunk = stream.read(chunk_size)
        if not chunk:
            break
        buf += chunk
        parts = buf.split(delimiter)
        buf = parts.pop()
        for part in parts:
            number += 1
            if part:
                yield Record(number, part)
    if buf:
        yield Record(number + 1, buf)


def parse_delimiter(text: str) -> bytes:
    """``\\n``, ``\\t``, ``\\x00`` or a literal string, as bytes."""
    try:
        value = text.encode().decode("unicode_escape").encode("latin-1")
    except (UnicodeDecodeError, UnicodeEncodeError):
        raise ConfigError(
            f"bad --delimiter {text!r}: use a character or an escape like \\n"
        ) from None
    if not value:
        raise ConfigError("--delimiter must not be empty")
    return value


def _open(path: Path) -> BinaryIO:
    try:
        return path.open("rb")
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror}") from None


def _whole_files(paths: list[Path]) -> Iterator[Record]:
    for number, path in enumerate(paths, 1):
        with _open(path) as fh:
            yield Record(number, fh.read())


def open_source(
    messages: list[str] | None, file: Path | None, delimiter: bytes, binary: bool
) -> tuple[Iterator[Record], int | None]:
    """The records to publish and, when known, the input size in bytes (for progress)."""
    if messages and file is not None:
        raise ConfigError("give messages as arguments or with --file, not both")
    if binary:
        if messages:
            paths = [Path(m) for m in messages]
            return _whole_files(paths), _total_size(paths)
        if file is not None:
            return _whole_files([file]), _total_size([file])
        return iter([Record(1, sys.stdin.buffer.read())]), None
    if messages:
        return (Record(n, m.encode()) for n, m in enumerate(messages, 1)), None
    if file is not None:
        fh = _open(file)
        return split_stream(fh, delimiter), _total_size([file])
    return split_stream(sys.stdin.buffer, delimiter), None


def _total_size(paths: list[Path]) -> int | None:
    try:
        return sum(p.stat().st_size for p in paths)
    except OSError:
        return None


def shard_key_from_json(record: Record, field: str) -> Any:
    """The ``field`` of a JSON object record (dotted paths reach into nested objects)."""
    try:
        obj: Any = json.loads(record.body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ConfigError(
            f"line {record.number} is not JSON, so --shard-field {field} cannot be read: fix "
            "the input or use --shard KEY"
        ) from None
    value = get_field(obj, field)
    if value is MISSING:
        raise ConfigError(
            f"line {record.number} has no field {field!r}: every message needs it with "
            "--shard-field"
        )
    key = scalar_text(value)
    if key is None:
        raise ConfigError(
            f"line {record.number}: field {field!r} must be a string or a number to shard on"
        )
    return key
