"""Read-only operation (``--read-only``, ``NSQCTL_READ_ONLY``, a profile's ``read_only``):
every command of the app is classified as writing or reading, and each write refuses with
one line and exit 2 before anything is connected to.

The refusals run in-process through the console script's ``main()``; none needs a server,
since the guard refuses before a command's body runs (no cluster is given at all: a
command that got past the guard would fail on that instead, with another message).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nsqctl.cli.app import root_command
from nsqctl.cli.readonly import READS, WRITES
from tests.helpers.cli import assert_one_line_error, clean_env, run_cli, run_main


def _leaves(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, sub in getattr(command, "commands", {}).items():
        if getattr(sub, "commands", None):
            yield from _leaves(sub, (*path, name))
        else:
            yield (*path, name), sub


LEAVES = dict(_leaves(root_command()))


def test_every_command_is_classified_as_a_write_or_a_read() -> None:
    """A command added to the app fails here until it is put in WRITES or READS."""
    assert len(LEAVES) >= 40  # the walk saw the whole tree
    unclassified = sorted(" ".join(p) for p in LEAVES if p not in WRITES and p not in READS)
    both = sorted(" ".join(p) for p in set(WRITES) & READS)
    stale = sorted(" ".join(p) for p in (set(WRITES) | READS) - set(LEAVES))
    assert (unclassified, both, stale) == ([], [], [])


#: what makes a conditional write write (the rest of its arguments are filled in)
WRITING_ARGS: dict[tuple[str, ...], list[str]] = {
    ("tail",): ["--channel", "orders_svc"],
    ("peek",): ["orders_svc", "--borrow", "1"],
}


def _required(cmd: Any) -> list[str]:
    """A value for each required argument and option: "1" parses as a name, a path and a
    number alike."""
    args: list[str] = []
    for p in cmd.params:
        if p.required and p.param_type_name == "argument":
            args.append("1")
        elif p.required:
            args += [p.opts[0], "1"]
    return args


def _writing_call(path: tuple[str, ...]) -> list[str]:
    return [*path, *_required(LEAVES[path]), *WRITING_ARGS.get(path, [])]


@pytest.mark.parametrize("path", sorted(WRITES), ids=[" ".join(p) for p in sorted(WRITES)])
def test_each_write_refuses_under_read_only(path: tuple[str, ...]) -> None:
    line = assert_one_line_error(run_main("--read-only", *_writing_call(path)), 2)
    write = WRITES[path]
    command = " ".join((*path, write.flag) if write.flag else path)
    assert f"read-only (from --read-only): '{command}' {write.does}; drop --read-only" in line


def test_read_only_after_the_command_and_lifted_by_no_read_only() -> None:
    line = assert_one_line_error(run_main("topic", "delete", "t", "--read-only"), 2)
    assert "read-only (from --read-only): 'topic delete' changes the cluster" in line
    lifted = assert_one_line_error(
        run_main("--read-only", "topic", "delete", "t", "--no-read-only"), 2
    )
    assert "read-only" not in lifted and "pass --lookupd" in lifted  # the next check, passed


DRY_RUNS = sorted(p for p in WRITES if any(o.name == "dry_run" for o in LEAVES[p].params))


@pytest.mark.parametrize("path", DRY_RUNS, ids=[" ".join(p) for p in DRY_RUNS])
def test_a_dry_run_of_a_write_is_a_read(path: tuple[str, ...]) -> None:
    """Not refused: it goes on (and, given no cluster, fails on something else)."""
    proc = run_main("--read-only", *_writing_call(path), "--dry-run")
    assert "read-only" not in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("args", "next_check"),
    [
        (["tail", "t"], "pass --lookupd"),
        (["tail", "t", "-c", "mine#ephemeral"], "pass --lookupd"),
        (["peek", "t", "c"], "pass --lookupd"),
        (["dash"], "dash needs a terminal"),
    ],
    ids=[
        "tail on its own channel",
        "tail on an ephemeral channel",
        "peek without --borrow",
        "dash (its actions are refused inside)",
    ],
)
def test_reading_forms_are_not_refused(args: list[str], next_check: str) -> None:
    """Each goes past the guard to its next check (given no cluster and no terminal)."""
    proc = run_main("--read-only", *args)
    assert "read-only" not in proc.stderr and next_check in proc.stderr, proc.stderr


def test_read_only_from_the_environment() -> None:
    env = clean_env({"NSQCTL_READ_ONLY": "1"})
    line = assert_one_line_error(run_cli(["channel", "empty", "t", "c"], env=env), 2)
    assert line == (
        "nsqctl: error: read-only (from NSQCTL_READ_ONLY): 'channel empty' changes the "
        "cluster; unset NSQCTL_READ_ONLY to act"
    )
    bad = clean_env({"NSQCTL_READ_ONLY": "maybe"})
    assert "NSQCTL_READ_ONLY='maybe'" in assert_one_line_error(run_cli(["lookup", "t"], env=bad), 2)


def test_read_only_from_a_profile_shown_by_config(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        'default_profile = "prod"\n[profiles.prod]\nlookupd = ["127.0.0.1:1"]\nread_only = true\n'
    )
    env = clean_env(config=config)
    line = assert_one_line_error(run_cli(["pub", "t"], input=b"m\n", env=env), 2)
    assert "read-only (from profile prod): 'pub' publishes to the cluster; " in line
    assert "pass --no-read-only to act" in line
    shown = json.loads(_ok(run_cli(["config", "--json"], env=env)))
    assert (shown["read_only"], shown["sources"]["read_only"]) == (True, "profile prod")
    lifted = json.loads(_ok(run_cli(["config", "--json", "--no-read-only"], env=env)))
    assert (lifted["read_only"], lifted["sources"]["read_only"]) == (False, "flag")


def test_set_profile_writes_read_only(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    env = clean_env(config=config)
    _ok(run_cli(["config", "set-profile", "prod", "--lookupd", "h:4161", "--read-only"], env=env))
    assert "read_only = true" in config.read_text()


def _ok(proc: subprocess.CompletedProcess[bytes]) -> str:
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()
