"""Where ``nsqctl pub`` messages come from: arguments, files or stdin, streamed.

Records carry their 1-based number in the input so errors can name the line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from nsqctl.errors import ConfigError
from nsqctl.jsonfield import MISSING, get_field, scalar_text

FLOWING = 1 << 16  # a read this long means the input comes faster than we take it


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class Record(NamedTuple):
    number: int  # 1-based position in the input (a line number for newline-split input)
    body: bytes


@dataclass(frozen=True)
class Batch:
    """Consecutive records of the input, as split from one read.

    ``numbers`` stays None while the bodies are numbered ``first, first + 1, ...`` (no blank
    line among them), the common case: a Record or a number per line would cost about as
    much as splitting the input itself. ``size`` is the input bytes the batch covers (for
    progress); ``flush`` says the input paused (a short read), so what is held back waiting
    for a full MPUB should go now; ``blank`` counts the blank lines of that input, skipped
    (a report counts them, so that its numbers add up to the input's lines).
    """

    bodies: list[bytes]
    first: int = 1
    numbers: list[int] | None = None
    size: int = 0
    flush: bool = True
    blank: int = 0

    def __len__(self) -> int:
        return len(self.bodies)

    def number(self, index: int) -> int:
        return self.first + index if self.numbers is None else self.numbers[index]

    def records(self) -> Iterator[Record]:
        for index, body in enumerate(self.bodies):
            yield Record(self.number(index), body)

    def cut(self, start: int, stop: int) -> Batch:
        numbers = None if self.numbers is None else self.numbers[start:stop]
        first = self.first + start if numbers is None else (numbers[0] if numbers else 0)
        return Batch(self.bodies[start:stop], first, numbers)

    def join(self, other: Batch) -> Batch:
        """This batch followed by ``other`` (numbering kept)."""
        if not self.bodies:
            return other
        if self.numbers is None and other.numbers is None and other.first == self.first + len(self):
            return Batch(self.bodies + other.bodies, self.first)
        numbers = [self.number(i) for i in range(len(self))]
        numbers += [other.number(i) for i in range(len(other))]
        return Batch(self.bodies + other.bodies, numbers[0], numbers)


def _batch(parts: list[bytes], first: int, size: int, flush: bool) -> Batch:
    if b"" not in parts:
        return Batch(parts, first, None, size, flush)
    numbered = [(first + i, part) for i, part in enumerate(parts) if part]
    numbers = [n for n, _ in numbered]
    first = numbers[0] if numbers else first
    blank = len(parts) - len(numbered)
    return Batch([b for _, b in numbered], first, numbers, size, flush, blank)


def split_batches(stream: BinaryIO, delimiter: bytes, chunk_size: int = 1 << 20) -> Iterator[Batch]:
    """Split a stream on ``delimiter`` without reading it all into memory, a batch per read.

    Empty records (blank lines) are skipped, as to_nsq does, but still counted so the
    numbers match the input's line numbers. Reads take what is there (``read1``), so input
    that trickles in (``tail -F log | nsqctl pub``) is published as it comes.
    """
    read = getattr(stream, "read1", stream.read)
    # The unfinished record, a piece per read, joined only once a delimiter ends it: each
    # byte is searched and copied a bounded number of times, so one long line costs what
    # many short ones do (appending to one buffer and splitting it all again on every read
    # was quadratic in the line's length).
    pieces: list[bytes] = []
    keep = len(delimiter) - 1  # a delimiter may straddle two reads
    tail = b""  # the last ``keep`` bytes held
    number = 0  # records split off so far, blank ones included
    while True:
        chunk = read(chunk_size)
        if not chunk:
            break
        if delimiter not in chunk and not (keep and delimiter in tail + chunk[:keep]):
            pieces.append(chunk)
            if keep:
                tail = (tail + chunk)[-keep:]
            continue
        buf = b"".join((*pieces, chunk)) if pieces else chunk
        pieces.clear()
        parts = buf.split(delimiter)
        rest = parts.pop()
        flush = len(chunk) < min(chunk_size, FLOWING)
        yield _batch(parts, number + 1, len(buf) - len(rest), flush)
        number += len(parts)
        if rest:
            pieces.append(rest)
        tail = rest[-keep:] if keep else b""
    if pieces:
        buf = b"".join(pieces)
        yield Batch([buf], number + 1, None, len(buf), True)


def split_stream(stream: BinaryIO, delimiter: bytes, chunk_size: int = 1 << 20) -> Iterator[Record]:
    """:func:`split_batches`, a record at a time."""
    for batch in split_batches(stream, delimiter, chunk_size):
        yield from batch.records()


async def read_in_thread(source: Iterator[Batch], ahead: int = 2) -> AsyncIterator[Batch]:
    """``source`` read on a daemon thread, ``ahead`` batches at most.

    A read from a pipe blocks until input comes; done on the event loop it would also stop
    the publishes already launched (and their OKs) while the input pauses. A daemon thread,
    not an executor: a read blocked on a terminal must not hold up exit after Ctrl-C. The
    thread hands over through a thread-safe queue and wakes the loop with a plain callback
    (no coroutine made on the thread: one left unrun when the loop ends early, as on bad
    input, would print "never awaited" warnings).
    """
    loop = asyncio.get_running_loop()
    items: queue.Queue[Batch | BaseException | None] = queue.Queue(ahead)
    ready = asyncio.Event()

    def hand_over(item: Batch | BaseException | None) -> None:
        items.put(item)  # blocks while ``ahead`` batches wait: the reader stays bounded
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody to wake
            loop.call_soon_threadsafe(ready.set)

    def run() -> None:
        try:
            for batch in source:
                hand_over(batch)
        except BaseException as err:  # handed over and raised where it is awaited
            hand_over(err)
            return
        hand_over(None)

    threading.Thread(target=run, name="nsqctl-pub-input", daemon=True).start()
    while True:
        try:
            item = items.get_nowait()
        except queue.Empty:
            ready.clear()
            if items.empty():  # checked after clear(): a put in between sets it again
                await ready.wait()
            continue
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


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


def _whole_files(paths: list[Path]) -> Iterator[Batch]:
    for number, path in enumerate(paths, 1):
        with _open(path) as fh:
            data = fh.read()
        yield Batch([data], number, None, len(data))


def open_source(
    messages: list[str] | None, file: Path | None, delimiter: bytes, binary: bool
) -> tuple[Iterator[Batch], int | None]:
    """The records to publish, in batches, and when known the input size in bytes (for
    progress)."""
    if messages and file is not None:
        raise ConfigError("give messages as arguments or with --file, not both")
    if binary:
        if messages:
            paths = [Path(m) for m in messages]
            return _whole_files(paths), _total_size(paths)
        if file is not None:
            return _whole_files([file]), _total_size([file])
        data = _stdin().read()
        return iter([Batch([data], 1, None, len(data))]), None
    if messages:
        bodies = [m.encode() for m in messages]
        return iter([Batch(bodies, 1, None, sum(map(len, bodies)))]), None
    if file is not None:
        fh = _open(file)
        return split_batches(fh, delimiter), _total_size([file])
    return split_batches(_stdin(), delimiter), None


def _stdin() -> BinaryIO:
    """Standard input as bytes; a closed one (``<&-``: Python sets it to None) is bad input,
    not a crash.

    Unbuffered, on its own file object: the reader thread may be blocked in a read when
    the process exits (Ctrl-C), and a read blocked inside ``sys.stdin.buffer`` holds that
    object's lock, which the interpreter's shutdown then cannot take (a fatal error).
    """
    if sys.stdin is None:
        raise ConfigError(
            "no messages: stdin is closed; give them as arguments, with --file, or on stdin"
        )
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a test runner
        return sys.stdin.buffer
    return open(fd, "rb", buffering=0, closefd=False)


def _total_size(paths: list[Path]) -> int | None:
    try:
        return sum(p.stat().st_size for p in paths)
    except OSError:
        return None


def check_shard_field(field: str | None) -> None:
    """Refuse a ``--shard-field`` with an empty name (or an empty part of a dotted path) up
    front, for every command that takes one: ``pub`` would otherwise blame each line for
    lacking a field named nothing, and ``replay`` would take the empty name for no field
    at all and silently keep per-partition order instead."""
    if field is not None and "" in field.split("."):
        raise ConfigError(
            f"bad --shard-field {field!r}: name the JSON field holding each "
            "message's shard key (a dotted path for a nested one, e.g. user.id)"
        )


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


def parse_headers(items: list[str] | None) -> dict[str, str]:
    """``--header K=V`` (repeatable) as the JSON header of an ext publish; a name given
    twice keeps its last value, as a later flag overrides an earlier one."""
    headers: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"bad --header {item!r}: write NAME=VALUE (e.g. region=eu)")
        headers[name] = value
    return headers
