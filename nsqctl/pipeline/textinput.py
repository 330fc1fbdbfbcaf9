"""nsq_to_file's output as a replay source: one message body per line, gzip or plain.

Gzip is detected by its magic bytes, not the file name (nsq_to_file --gzip writes
``.gz`` names, but renamed files must work too). A body containing a newline cannot be
told apart from two bodies: that is nsq_to_file's format, not ours.

A directory's files are read in the order nsq_to_file wrote them, because a replay keyed
by a field keeps each key's lines in (file, line) order. nsq_to_file's default name is
``<TOPIC>.<HOST><REV>.<DATETIME>.log`` (``.gz`` appended with gzip), DATETIME being
``%Y-%m-%d_%H`` and REV ``-%06d`` when gzip, rotation or a work dir is on; sorting those
names as text would put every revision 1 after all the revision 0 files of later hours.
Files from several hosts with the same DATETIME have no order between them that the names
(or anything else) establish: per-key order holds within one host's files.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from nsqctl.errors import ConfigError

GZIP_MAGIC = b"\x1f\x8b"

#: nsq_to_file's default file name: <TOPIC>.<HOST><REV>.<DATETIME>.log[.gz].
DEFAULT_NAME = re.compile(
    r"^(?P<stem>.+?)(?:-(?P<rev>\d{6,}))?\.(?P<datetime>\d{4}-\d{2}-\d{2}_\d{2})\.log(?:\.gz)?$"
)

#: (named by nsq_to_file's default? 0 : 1, DATETIME, topic and host, REV, mtime, path)
FileOrder = tuple[int, str, str, int, float, str]


def open_maybe_gzip(path: str | Path) -> BinaryIO:
    fh = open(path, "rb")  # noqa: SIM115 - returned to the caller
    if fh.read(2) == GZIP_MAGIC:
        fh.seek(0)
        return gzip.GzipFile(fileobj=fh)  # type: ignore[return-value]
    fh.seek(0)
    return fh


@contextmanager
def named_read_errors(path: str | Path) -> Iterator[None]:
    """A gzip file cut short (nsq_to_file killed, or still writing it) or damaged, or a
    file that cannot be read, as a :class:`ConfigError` naming it: gzip's EOFError would
    otherwise reach click, which takes any EOFError for Ctrl-D at a prompt and reports
    "aborted"."""
    try:
        yield
    except EOFError:
        raise ConfigError(
            f"{path} ends in the middle of its gzip stream (a copy cut short, or a file "
            "nsq_to_file was still writing): leave it out of the source, or replay what "
            "`gzip -dc` recovers of it"
        ) from None
    except (gzip.BadGzipFile, zlib.error) as err:
        raise ConfigError(
            f"{path} is not a valid gzip file ({err}): leave it out of the source, or "
            "replay what `gzip -dc` recovers of it"
        ) from None
    except OSError as err:
        raise ConfigError(
            f"cannot read {path}: {err.strerror or err}; check the path and its permissions"
        ) from None


def read_bodies(path: str | Path) -> Iterator[tuple[int, bytes]]:
    """(line number from 0, body without its newline) for each line of one file; a file
    that cannot be read to its end raises as :func:`named_read_errors` says."""
    with named_read_errors(path), open_maybe_gzip(path) as fh:
        for number, line in enumerate(fh):
            yield number, line[:-1] if line.endswith(b"\n") else line


def text_files(source: str | Path) -> list[str]:
    """The files of a text source: the file itself, or every regular file under a dir,
    oldest first (see :func:`written_order`)."""
    path = Path(source)
    if path.is_file():
        return [str(path)]
    if path.is_dir():
        found = [p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")]
        if found:
            return [str(p) for p in sorted(found, key=written_order)]
    raise ConfigError(f"no nsq_to_file output found at {source}")


def written_order(path: Path) -> FileOrder:
    """Sort key putting nsq_to_file's files in the order it wrote them: by DATETIME,
    then topic and host, then REV for default names; other names after those, by
    modification time (then path, so equal times still give one order everywhere)."""
    named = DEFAULT_NAME.match(path.name)
    if named:
        rev = int(named["rev"]) if named["rev"] else -1
        return (0, named["datetime"], named["stem"], rev, 0.0, str(path))
    return (1, "", "", 0, path.stat().st_mtime, str(path))
