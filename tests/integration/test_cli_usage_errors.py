"""Parser-level usage errors of every command, through the console script's ``main()``.

An unknown option, a missing argument or option, a value of the wrong type, or an unknown
subcommand must give one ``nsqctl: error:`` line on stderr and exit 2, never a traceback,
whichever copy of click typer carries. The list of commands is read from the app itself,
so a command added later is covered without touching this file. Nothing here reaches a
server: the parser rejects every invocation before a command's body runs.

Every command's cases run in process (``run_main``: the console script's own ``main()``
and its error handling, without a Python start per case: there are hundreds). One case
of each kind also runs as the real installed console script in a fresh process, and must
say exactly what the in-process run says, so the two cannot drift apart; each command's
lazy loading in a fresh process is tests/unit/test_cli_imports.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nsqctl.cli.app import default_metavar, root_command
from tests.helpers.cli import assert_one_line_error, run_cli, run_main


def _walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, sub in getattr(command, "commands", {}).items():
        yield (*path, name), sub
        yield from _walk(sub, (*path, name))


COMMANDS = dict(_walk(root_command()))
LEAVES = {path: cmd for path, cmd in COMMANDS.items() if not getattr(cmd, "commands", None)}
GROUPS = {path: cmd for path, cmd in COMMANDS.items() if getattr(cmd, "commands", None)}


def _ids(paths: Any) -> list[str]:
    return [" ".join(p) for p in paths]


def _required_arguments(cmd: Any) -> list[Any]:
    return [p for p in cmd.params if p.param_type_name == "argument" and p.required]


def _filler(cmd: Any, but: Any = None) -> list[str]:
    """Values for the command's required arguments and options (``but`` that one, which
    the test gives itself: an option given twice is refused as such): a call that parses."""
    args = ["x" for _ in _required_arguments(cmd)]
    for p in cmd.params:
        if p.param_type_name == "option" and p.required and p is not but:
            args += [p.opts[0], "1" if default_metavar(p) in ("N", "SECONDS") else "x"]
    return args


def _number_option(cmd: Any) -> Any | None:
    for p in cmd.params:
        if (
            p.param_type_name == "option"
            and not p.hidden
            and not (p.is_flag or p.count)
            and default_metavar(p) in ("N", "SECONDS")
        ):
            return p
    return None


def test_the_app_lists_every_command() -> None:
    """The walk sees the whole tree (guards the parametrization below against an empty list)."""
    assert {("pub",), ("tail",), ("archive",), ("sandbox", "up"), ("topic", "create")} <= set(
        COMMANDS
    )
    assert len(LEAVES) >= 30


@pytest.mark.parametrize("path", list(COMMANDS), ids=_ids(COMMANDS))
def test_unknown_option(path: tuple[str, ...]) -> None:
    proc = run_main(*path, "--no-such-option")
    line = assert_one_line_error(proc, usage_exit(path))
    assert "--no-such-option" in line and " ".join(path) in line


def usage_exit(path: tuple[str, ...]) -> int:
    """2, click's usage error; `check` answers 3, UNKNOWN, as a Nagios plugin must."""
    return 3 if path == ("check",) else 2


MISSING = {p: c for p, c in LEAVES.items() if _required_arguments(c)}


@pytest.mark.parametrize("path", list(MISSING), ids=_ids(MISSING))
def test_missing_argument(path: tuple[str, ...]) -> None:
    proc = run_main(*path)
    line = assert_one_line_error(proc, 2)
    first = _required_arguments(MISSING[path])[0]
    assert f"Missing argument '{first.metavar}'" in line, line


REQUIRED_OPTIONS = {
    p: c
    for p, c in LEAVES.items()
    if any(o.param_type_name == "option" and o.required for o in c.params)
}


@pytest.mark.parametrize("path", list(REQUIRED_OPTIONS), ids=_ids(REQUIRED_OPTIONS))
def test_missing_option(path: tuple[str, ...]) -> None:
    cmd = REQUIRED_OPTIONS[path]
    args = ["x" for _ in _required_arguments(cmd)]
    line = assert_one_line_error(run_main(*path, *args), 2)
    assert "Missing option" in line, line


NUMBERS = {p: c for p, c in LEAVES.items() if _number_option(c) is not None}


@pytest.mark.parametrize("path", list(NUMBERS), ids=_ids(NUMBERS))
def test_bad_number(path: tuple[str, ...]) -> None:
    cmd = NUMBERS[path]
    option = _number_option(cmd)
    assert option is not None  # NUMBERS holds the commands that have one
    proc = run_main(*path, *_filler(cmd, but=option), option.opts[0], "not-a-number")
    line = assert_one_line_error(proc, usage_exit(path))
    assert "Invalid value" in line and option.opts[0] in line, line


@pytest.mark.parametrize("path", [(), *GROUPS], ids=["nsqctl", *_ids(GROUPS)])
def test_unknown_subcommand(path: tuple[str, ...]) -> None:
    line = assert_one_line_error(run_main(*path, "no-such-command"), 2)
    assert "No such command 'no-such-command'" in line, line


def test_global_option_missing_its_value_after_the_command() -> None:
    line = assert_one_line_error(run_main("config", "--tls-ca"), 2)
    assert "--tls-ca" in line and "requires an argument" in line, line


def _one_of_each_kind() -> list[list[str]]:
    """One invocation of each kind of usage error above (check's exit 3 among them)."""
    missing = next(iter(MISSING))
    required = next(iter(REQUIRED_OPTIONS))
    number = next(iter(NUMBERS))
    option = _number_option(NUMBERS[number])
    assert option is not None
    return [
        ["pub", "--no-such-option"],
        ["check", "--no-such-option"],
        list(missing),
        [*required, *("x" for _ in _required_arguments(REQUIRED_OPTIONS[required]))],
        [*number, *_filler(NUMBERS[number]), option.opts[0], "not-a-number"],
        ["topic", "no-such-command"],
        ["config", "--tls-ca"],
    ]


KINDS = _one_of_each_kind()


@pytest.mark.parametrize("args", KINDS, ids=[" ".join(a) for a in KINDS])
def test_the_console_script_in_a_fresh_process_says_what_main_says(args: list[str]) -> None:
    """The real installed script, in its own Python: the same exit code and the same one
    line as the in-process ``main()`` the cases above run through."""
    fresh = run_cli(args)
    line = assert_one_line_error(fresh, fresh.returncode)
    assert fresh.returncode in (2, 3), line
    in_process = run_main(*args)
    assert (in_process.returncode, assert_one_line_error(in_process, fresh.returncode)) == (
        fresh.returncode,
        line,
    )


def test_group_without_a_subcommand_shows_its_help() -> None:
    proc = run_cli(["topic"])
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err
    assert "Usage: nsqctl topic" in err and "create" in err


def _numeric_options(cmd: Any) -> list[Any]:
    return [
        p
        for p in cmd.params
        if p.param_type_name == "option"
        and not p.hidden
        and not (p.is_flag or p.count)
        and default_metavar(p) in ("N", "SECONDS")
    ]


#: every numeric option of every command, given a value no option takes
NOT_NUMBERS = [
    (path, option.opts[0], value)
    for path, cmd in LEAVES.items()
    for option in _numeric_options(cmd)
    for value in ("nan", "inf", "-inf", "-1", "1e999")
]


@pytest.mark.parametrize(
    ("path", "option", "value"),
    NOT_NUMBERS,
    ids=[f"{' '.join(p)} {o} {v}" for p, o, v in NOT_NUMBERS],
)
def test_no_numeric_option_takes_nan_inf_or_a_negative(
    path: tuple[str, ...], option: str, value: str
) -> None:
    """In-process through the console script's ``main()`` (its error handling, no
    subprocess per case: there are hundreds, and the parser refuses each before a
    command's body runs, so nothing reaches a server)."""
    cmd = LEAVES[path]
    proc = run_main(*path, *_filler(cmd), f"{option}={value}")
    line = assert_one_line_error(proc, usage_exit(path))
    assert option in line, line


@pytest.mark.parametrize("action", ["pause", "empty", "setoffset"])
def test_a_channel_action_refuses_a_second_partition(action: str) -> None:
    # click keeps the last of a repeated option: acting on partition 2 alone when 1 and 2
    # were named would be a partial change reported as done
    extra = ["--end"] if action == "setoffset" else []
    proc = run_main(
        "channel", action, "t", "c", "--partition", "1", "--partition", "2", *extra,
        "--yes", "--lookupd", "127.0.0.1:1",
    )  # fmt: skip
    line = assert_one_line_error(proc, 2)
    assert "--partition given 2 times (1, 2)" in line and "once per partition" in line, line
