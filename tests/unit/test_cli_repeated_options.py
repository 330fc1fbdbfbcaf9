"""An option that takes one value, given twice with different values, is refused (click
alone would keep the last, acting on it silently): twice before the command, or twice in
the command's own line (a group's options and its command's are one line). A global
option given before the command and again in it is a default and its override, as an
alias makes it, and reads the one given last. The same value twice, an option taken as
a list, and a value that looks like an option are accepted; help asked after a repeated
option is shown; shell completion is never refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nsqctl.cli.app import root_command
from nsqctl.cli.repeated import COMMAND, command_line_values
from tests.helpers.cli import assert_one_line_error, clean_env, run_main

#: nothing answers here: a command that got past its arguments fails to connect (exit 1)
NOBODY = ("--lookupd", "127.0.0.1:1")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("channel", "pause", "t", "c", "--node", "a", "--node", "b", "--yes"), "--node"),
        (("tail", "t", "--channel=x", "--channel", "y"), "--channel"),
        (("stat", "t", "--count", "1", "--interval", "2", "-i3"), "--interval"),
        # -e is a flag: -ecy gives -c its value "y", as click reads it
        (("tail", "t", "-c", "x", "-ecy"), "--channel"),
        # "-h" is --grep's value here, not a request for help
        (("tail", "t", "--grep", "-h", "--channel=x", "--channel", "y"), "--channel"),
    ],
)
def test_a_single_value_option_given_twice_is_refused(args: tuple[str, ...], said: str) -> None:
    proc = run_main(*args, *NOBODY)
    line = assert_one_line_error(proc, 2)
    values = {"--node": "a, b", "--channel": "x, y", "--interval": "2, 3"}[said]
    assert f"{said} given 2 times ({values}): give it once (see 'nsqctl " in line, line


@pytest.mark.parametrize(
    ("args", "name", "values", "where"),
    [
        (("--tls-ca", "x", "--tls-ca", "y", "lookup", "T"), "--tls-ca", "x, y", "lookup"),
        (("stat", "T", "--profile", "x", "--profile", "y"), "--profile", "x, y", "stat"),
        (
            ("--tls-key", "x", "channel", "--tls-key", "y", "pause", "t", "c", "--tls-key", "z"),
            "--tls-key",
            "y, z",
            "channel pause",
        ),
    ],
    ids=["both-before", "both-after", "after-a-group-and-its-command"],
)
def test_a_global_option_given_twice_in_one_place_is_refused(
    args: tuple[str, ...], name: str, values: str, where: str
) -> None:
    """Twice before the command, or twice in its own line (after a group's name and again
    after its command's): click would keep the last one, silently."""
    proc = run_main(*args, *NOBODY)
    line = assert_one_line_error(proc, 2)
    assert f"{name} given {len(values.split())} times ({values}): give it once" in line, line
    assert f"(see 'nsqctl {where} --help')" in line, line


def test_a_global_option_before_the_command_is_a_default_the_command_overrides() -> None:
    """A global option before the command (an alias's) and again after it: the line is
    not refused (it goes on to fail connecting, exit 1); the one after is read
    (tests/integration/test_cli_global_flags.py shows which)."""
    for args in (
        ("--output-buffer", "none", "lookup", "T", "--output-buffer", "100ms"),
        ("--compression", "snappy", "topic", "list", "--compression", "deflate"),
    ):
        proc = run_main(*args, *NOBODY)
        assert proc.returncode == 1, (args, proc.stderr)
        assert "given 2 times" not in proc.stderr, proc.stderr


def test_under_check_a_repeated_global_option_is_unknown() -> None:
    proc = run_main("check", "--output-buffer", "none", "--output-buffer", "1s", *NOBODY)
    line = assert_one_line_error(proc, 3)
    assert "--output-buffer given 2 times (none, 1s): give it once" in line, line


@pytest.mark.parametrize(
    "args",
    [
        ("channel", "pause", "t", "c", "--node", "a", "--node", "b", "--help"),
        ("channel", "pause", "t", "c", "--node", "a", "--node", "b", "-yh"),
        ("--profile", "a", "channel", "pause", "--profile", "b", "-h"),
    ],
    ids=["--help", "-h-after-a-flag", "global-repeat"],
)
def test_help_asked_after_a_repeated_option_is_shown(args: tuple[str, ...]) -> None:
    """click shows a command's help whatever else its arguments say; so does nsqctl."""
    proc = run_main(*args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: nsqctl channel pause [OPTIONS] TOPIC CHANNEL"), (
        proc.stdout
    )
    assert "given 2 times" not in proc.stderr, proc.stderr


def test_completion_of_a_line_with_a_repeated_option_is_answered() -> None:
    """A shell completes half-typed lines: one that repeats an option still gets its
    completions, never an error printed into the shell."""
    line = "nsqctl --profile a stat --profile b --interval 1 --interval 2 --cou"
    env = clean_env({"_NSQCTL_COMPLETE": "complete_bash", "COMP_WORDS": line})
    env["COMP_CWORD"] = str(len(line.split()) - 1)
    out = subprocess.run(
        [sys.executable, "-m", "nsqctl.cli.startup"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (out.returncode, out.stdout.split(), out.stderr) == (0, ["--count"], ""), out


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
    proc = run_main("--output-buffer", "none", "lookup", "T", "--output-buffer", "none", *NOBODY)
    assert proc.returncode == 1, proc.stderr


def test_values_are_read_as_click_reads_them() -> None:
    group = root_command()
    ctx = group.context_class(group, info_name="nsqctl")
    # --grep's value is "--channel", not a second --channel; nothing after "--"
    args = ["tail", "t", "--grep", "--channel", "--channel", "a", "--", "--channel", "b"]
    level, values = command_line_values(group, ctx, args)
    assert (level.command_path, values[(COMMAND, "--channel")]) == ("nsqctl tail", ["a"])
    # a group's options end at its command's name: "stat" is the command, not a value
    level, values = command_line_values(group, ctx, ["--", "stat", "-i", "1", "--", "-i2"])
    assert (level.command_path, values) == ("nsqctl stat", {(COMMAND, "--interval"): ["1"]})


def test_an_alias_s_global_option_does_not_refuse_set_profile_s_own(tmp_path: Path) -> None:
    """``config set-profile --tls-ca`` is the value it writes into the profile: a global
    ``--tls-ca`` before it (a shell alias giving every run the production CA) does not
    refuse it, and the profile gets the command's own. Given twice in the command's own
    line, it is refused."""
    config = tmp_path / "config.toml"
    line = ("config", "set-profile", "dev", "--lookupd", "127.0.0.1:4161")
    alias = ("--tls-ca", "/etc/a.pem", "--compression", "snappy")
    own = ("--tls-ca", "/etc/b.pem", "--compression", "deflate")
    saved = subprocess.run(
        [sys.executable, "-m", "nsqctl.cli.startup", *alias, *line, *own],
        env=clean_env(config=config),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert saved.returncode == 0, saved.stderr
    written = config.read_text()
    assert 'tls_ca = "/etc/b.pem"' in written and 'compression = "deflate"' in written, written
    twice = subprocess.run(
        [sys.executable, "-m", "nsqctl.cli.startup", *line, "--tls-ca", "a", "--tls-ca", "b"],
        env=clean_env(config=config),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    line_out = assert_one_line_error(twice, 2)
    assert "--tls-ca given 2 times (a, b): give it once" in line_out, line_out
