"""The order a replay reads nsq_to_file's files in: the order nsq_to_file wrote them.

Core install (no pyarrow): textinput is what both replay engines list files with.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nsqctl.pipeline.textinput import text_files


def _write(directory: Path, names: list[str]) -> None:
    """Create the files in reverse of the expected order, mtimes included, so neither
    the creation order nor the modification time can produce the expected order."""
    for age, name in enumerate(reversed(names)):
        (directory / name).write_bytes(b"x\n")
        os.utime(directory / name, (1_700_000_000 + age, 1_700_000_000 + age))


@pytest.mark.parametrize(
    "written",
    [
        [  # --gzip / --rotate-*: a revision per file within each hour, two hosts
            "orders.web1-000000.2026-11-29_09.log.gz",
            "orders.web1-000000.2026-11-29_10.log.gz",
            "orders.web1-000001.2026-11-29_10.log.gz",
            "orders.web1-000002.2026-11-29_10.log.gz",
            "orders.web2-000000.2026-11-29_10.log.gz",
            "orders.web1-000000.2026-11-29_11.log.gz",
            "orders.web1-000001.2026-11-29_11.log.gz",
        ],
        [  # no rotation: one file per hour per host, no revision
            "orders.web1.2026-11-28_23.log",
            "orders.web2.2026-11-28_23.log",
            "orders.web1.2026-11-29_00.log",
            "orders.web1.2026-11-29_01.log",
        ],
    ],
    ids=["rev", "no-rev"],
)
def test_text_files_in_nsq_to_file_written_order(tmp_path: Path, written: list[str]) -> None:
    _write(tmp_path, written)
    assert [Path(f).name for f in text_files(tmp_path)] == written


def test_text_files_other_names_by_mtime_after_default_names(tmp_path: Path) -> None:
    """Names nsq_to_file's default does not produce: oldest modification first, whatever
    the names say, after every file whose name does give its hour."""
    named = "orders.web1-000000.2026-11-29_10.log"
    others = ["b-older.txt", "a-newer.txt"]
    for mtime, name in enumerate([*others, named]):
        (tmp_path / name).write_bytes(b"x\n")
        os.utime(tmp_path / name, (1_700_000_000 + mtime, 1_700_000_000 + mtime))
    assert [Path(f).name for f in text_files(tmp_path)] == [named, *others]
