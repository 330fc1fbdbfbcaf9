"""Files nsqctl reads or keeps that it cannot use: one ``nsqctl: error:`` line saying which
and what to do, exit 2, never a traceback, before anything is published or consumed; and a
file whose bytes are not UTF-8 where that is no error (an AUTH secret is bytes).

``replay`` makes its checkpoint directory (``--checkpoint``, or one in the state
directory) before it publishes; ``dead-letter replay --dry-run`` reads its file and
publishes nothing; ``archive`` checks its channel and makes --out before it connects. The
nsqd given is never reached, so none runs here."""

from __future__ import annotations

from pathlib import Path

import pytest

from nsqctl.deadletter import read_dead_letters
from nsqctl.errors import ConfigError
from nsqctl.secrets import resolve_auth_secret
from tests.helpers.cli import assert_one_line_error, run_main


def _replay(source: Path, checkpoint: Path) -> str:
    proc = run_main(
        "replay", str(source), "--to-topic", "t", "--nsqd", "127.0.0.1:1",
        "--checkpoint", str(checkpoint), "-q",
    )  # fmt: skip
    return assert_one_line_error(proc, 2)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """nsq_to_file output: one message per line."""
    path = tmp_path / "orders.log"
    path.write_text("one\ntwo\n")
    return path


@pytest.mark.spark  # archive and replay need pyarrow (the archive/spark extra)
def test_a_checkpoint_that_is_a_file(source: Path, tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.write_text("")
    line = _replay(source, taken)
    assert (
        f"cannot use {taken} as the replay checkpoint: a file is where the directory should be"
        in line
    )
    assert "--checkpoint" in line


@pytest.mark.spark  # archive and replay need pyarrow (the archive/spark extra)
def test_a_checkpoint_that_cannot_be_made(source: Path, tmp_path: Path) -> None:
    below_a_file = tmp_path / "taken" / "ckpt"
    (tmp_path / "taken").write_text("")
    line = _replay(source, below_a_file)
    assert f"cannot use {below_a_file} as the replay checkpoint" in line, line
    assert "writable directory as --checkpoint" in line


@pytest.mark.spark  # archive and replay need pyarrow (the archive/spark extra)
def test_a_checkpoint_whose_job_file_is_not_json(source: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "job.json").write_text("garbage")
    line = _replay(source, ckpt)
    assert f"{ckpt / 'job.json'} is not a replay checkpoint" in line, line
    assert "--restart" in line


NOT_UTF8 = b"sec\xff\xferet"


def test_a_dead_letter_file_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "orders.jsonl"
    path.write_bytes(b"\n" + NOT_UTF8 + b"\n")
    with pytest.raises(ConfigError, match=rf"{path}:2: not a dead-letter record"):
        list(read_dead_letters(path))
    proc = run_main("dead-letter", "replay", str(path), "--dry-run", "--nsqd", "127.0.0.1:1")
    line = assert_one_line_error(proc, 2)
    assert f"{path}:2: not a dead-letter record" in line and "fix or delete" in line, line


def test_an_auth_secret_file_is_read_as_the_bytes_it_holds(tmp_path: Path) -> None:
    path = tmp_path / "auth.secret"
    path.write_bytes(NOT_UTF8 + b"\n")
    secret = resolve_auth_secret(file=path)
    assert secret is not None and secret.reveal() == NOT_UTF8


@pytest.mark.spark  # archive and replay need pyarrow (the archive/spark extra)
def test_archive_into_a_directory_it_cannot_make(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    out = tmp_path / "taken" / "archive"
    proc = run_main("archive", "orders", "-o", str(out), "--nsqd", "127.0.0.1:1")
    line = assert_one_line_error(proc, 2)
    assert f"cannot make the archive directory {out}: a file is where" in line, line
    assert "give --out a directory" in line


@pytest.mark.spark  # archive and replay need pyarrow (the archive/spark extra)
def test_archive_refuses_an_ephemeral_channel(tmp_path: Path) -> None:
    """nsqd deletes an ephemeral channel with its messages when the archive disconnects:
    a restart would resume nothing."""
    out = tmp_path / "archive"
    args = ["archive", "orders", "-o", str(out), "-c", "a#ephemeral", "--nsqd", "127.0.0.1:1"]
    line = assert_one_line_error(run_main(*args), 2)
    assert "--channel a#ephemeral is ephemeral" in line and "drop #ephemeral" in line, line
    assert not out.exists()
