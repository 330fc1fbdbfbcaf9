"""Dead letters: messages a consumer gave up on after ``max_attempts``, kept as JSON lines.

The default giving-up hook appends each message to a per-channel file and fsyncs before the
message is FINed, so giving up never loses a message. The body is kept exactly, the way
``nsqctl tail --format json`` writes it (text, or base64 with ``body_encoding``);
:func:`read_dead_letters` gives the exact bytes back for ``nsqctl dead-letter replay``.
"""

from __future__ import annotations

import binascii
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsqctl.errors import ConfigError
from nsqctl.message import body_from_json, body_to_json
from nsqctl.paths import state_dir

if TYPE_CHECKING:
    from nsqctl.message import Message

log = logging.getLogger("nsqctl.consumer")

SUFFIX = ".jsonl"


def dead_letter_dir() -> Path:
    return state_dir() / "dead-letter"


def dead_letter_path(topic: str, channel: str) -> Path:
    """Where the default giving-up hook writes (one file per topic/channel)."""
    return dead_letter_dir() / f"{topic}.{channel.replace('#', '_')}{SUFFIX}"


def dead_letter_record(msg: Message) -> dict[str, Any]:
    """The JSON line for ``msg``: its metadata and its body, exactly."""
    record = msg.describe()
    record["body"], record["body_encoding"] = body_to_json(msg.body)
    return record


class DeadLetterFile:
    """Default giving-up hook: append the message as a JSON line, fsync, log one line."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        # A str is a path too: kept as one, it would fail only at the first message given
        # up on, inside the hook, which requeues that message again and again.
        self.path = Path(path)

    def __call__(self, msg: Message) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(dead_letter_record(msg)) + "\n"
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        log.warning(
            "giving up on message %s of %s/%s after %d attempts; written to %s",
            msg.id_text,
            msg.topic,
            msg.channel,
            msg.attempts,
            self.path,
        )


@dataclass(frozen=True)
class DeadLetter:
    """One line of a dead-letter file."""

    topic: str
    channel: str
    body: bytes
    attempts: int
    id: str
    timestamp: int
    line: int


def read_dead_letters(path: Path) -> Iterator[DeadLetter]:
    """Every record of ``path``; a line that is not one raises a one-line ConfigError."""
    try:
        # bytes: a line that is not UTF-8 is then json's error about that line, inside
        # the try below, instead of the file reader's while it iterates
        fh = path.open("rb")
    except OSError as err:
        raise ConfigError(f"cannot read dead-letter file {path}: {err.strerror}") from None
    with fh:
        for number, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
                body = body_from_json(record)
                yield DeadLetter(
                    topic=str(record["topic"]),
                    channel=str(record.get("channel", "")),
                    body=body,
                    attempts=int(record.get("attempts", 0)),
                    id=str(record.get("id", "")),
                    timestamp=int(record.get("timestamp") or 0),
                    line=number,
                )
            except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as err:
                raise ConfigError(
                    f"{path}:{number}: not a dead-letter record ({type(err).__name__}: {err}); "
                    "fix or delete that line"
                ) from None


def dead_letter_files(directory: Path | None = None) -> list[Path]:
    """The dead-letter files waiting in ``directory`` (default: the state dir's)."""
    base = directory or dead_letter_dir()
    try:
        if not base.is_dir():
            return []
        return sorted(p for p in base.iterdir() if p.is_file() and p.name.endswith(SUFFIX))
    except OSError as err:
        raise ConfigError(f"cannot read the dead-letter directory {base}: {err.strerror}") from None


def check_movable(path: Path) -> None:
    """Raise a one-line ConfigError unless ``path`` can be renamed within its directory.

    Creating and removing a file there is the test, not the permission bits: it also
    catches a read-only file system, and it says no for root exactly when rename would.
    """
    import tempfile  # here: every consumer imports this module, only a replay needs it

    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".nsqctl-probe-"):
            pass
    except OSError as err:
        raise ConfigError(
            f"cannot move {path.name} aside afterwards: {path.parent} is not writable "
            f"({err.strerror})"
        ) from None
