"""An option that takes one value, given twice with different values, is refused (click
alone would keep the last, acting on it silently); the same value twice, an option taken
as a list, and a value that looks like an option are accepted."""

from __future__ import annotations

import pytest

from nsqctl.cli.app import root_command
from nsqctl.cli.repeated import given_values
from tests.helpers.cli import assert_one_line_error, run_main

#: nothing answers here: a command that got past its arguments fails to connect (exit 1)
NOBODY = ("--lookupd", "127.0.0.1:1")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("channel", "pause", "t", "c", "--node", "a", "--node", "b", "--yes"), "--node"),
        (("tail", "t", "--channel=x", "--channel", "y"), "--channel"),
        (("stat", "t", "--count", "1", "--interval", "2", "-i3"), "--interval"),
    ],
)
def test_a_single_value_option_given_twice_is_refused(args: tuple[str, ...], said: str) -> None:
    proc = run_main(*args, *NOBODY)
    line = assert_one_line_error(proc, 2)
    values = {"--node": "a, b", "--channel": "x, y", "--interval": "2, 3"}[said]
    assert f"{said} given 2 times ({values}): give it once (see 'nsqctl " in line, line


def test_under_check_a_repeated_option_is_unknown_not_critical() -> None:
    """``check`` answers bad arguments UNKNOWN (3), as a monitor reads its exit code: a
    repeated option is a usage error like any other, not a CRITICAL (2)."""
    proc = run_main("check", "--poison", "warn", "--poison", "crit", *NOBODY)
    line = assert_one_line_error(proc, 3)
    assert "--poison given 2 times (warn, crit): give it once" in line, line


def test_the_same_value_twice_and_a_list_option_pass() -> None:
    # reaches the cluster (nobody answers: exit 1), not refused as bad input
    proc = run_main("channel", "pause", "t", "c", "--node", "a", "--node", "a", "--yes", *NOBODY)
    assert proc.returncode == 1, proc.stderr
    proc = run_main("channel", "pause", "t", "c", "--yes", *NOBODY, "--lookupd", "127.0.0.1:2")
    assert proc.returncode == 1, proc.stderr


def test_values_are_read_as_click_reads_them() -> None:
    group = root_command()
    tail = group.commands["tail"]
    # --grep's value is "--channel", not a second --channel; nothing after "--"
    args = ["t", "--grep", "--channel", "--channel", "a", "--", "--channel", "b"]
    assert given_values(tail.params, args)["--channel"] == ["a"]
