"""nsq_to_file's output as a replay source: one message body per line, gzip or plain.

Gzip is detected by its magic bytes, not the file name (nsq_to_file --gzip writes
``.gz`` names, but renamed files must work too). A body containing a newline cannot be
told apart from two bodies: that is nsq_to_file's format, not ours.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from nsqctl.errors import ConfigError

GZIP_MAGIC = b"\x1f\x8b"


def open_maybe_gzip(path: str | Path) -> BinaryIO:
    fh = open(path, "rb")  # noqa: SIM115 - returned to the caller
    if fh.read(2) == GZIP_MAGIC:
        fh.seek(0)
        return gzip.GzipFile(fileobj=fh)  # type: ignore[return-value]
    fh.seek(0)
    return fh


def read_bodies(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """(line number from 0, body without its newline) for each line of one file."""
    with open_maybe_gzip(path) as fh:
        for number, line in enumerate(fh):
            yield number, line[:-1] if line.endswith(b"\n") else line


def text_files(source: str | Path) -> list[str]:
    """The files of a text source: the file itself, or every regular file under a dir."""
    path = Path(source)
    if path.is_file():
        return [str(path)]
    if path.is_dir():
        files = sorted(
            str(p) for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")
        )
        if files:
            return files
    raise ConfigError(f"no nsq_to_file output found at {source}")
