"""The library speaks of its own settings and actions; the CLI turns them into flags and
commands. Every string the library (``nsqctl`` outside its front ends) could show a caller
is scanned for CLI spellings (``--flag``, ``nsqctl <command>``); the CLI's translation is
checked against the flags and commands the CLI has, and on real library errors."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import nsqctl
from nsqctl.admin.base import topic_not_found
from nsqctl.admin.partitions.plans import MetaChange
from nsqctl.admin.planners import check_create_options, parse_offset
from nsqctl.cli.wording import ACTION_COMMANDS, SETTING_WORDS, cli_message, cli_words
from nsqctl.errors import ConfigError
from nsqctl.protocol.errors import AuthRequiredError

PACKAGE = Path(nsqctl.__file__).parent

#: front ends, whose words are the user's: the CLI, the dashboard, and the sandbox's
#: server tooling (it builds and starts servers by their own command lines)
FRONT_ENDS = ("cli", "tui", "servers")

#: the servers' own options, which an operator sets on nsqd (not nsqctl's flags)
SERVER_FLAGS = {"--max-msg-size", "--max-body-size", "--max-req-timeout", "--max-rdy-count"}

CLI_SPELLING = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+|`nsqctl [a-z]")
ACTION = re.compile(r"`([a-z][a-z0-9_]*)\(")


def library_modules() -> list[Path]:
    return sorted(
        p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in FRONT_ENDS
    )


def _docstrings(tree: ast.AST) -> set[int]:
    """Ids of the docstring constants (they document, they are never shown as messages),
    of modules, classes, functions, and attributes (a string right after an assignment)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for i, stmt in enumerate(body):
            first = i == 0 and isinstance(
                node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
            )
            after_assign = i > 0 and isinstance(body[i - 1], ast.Assign | ast.AnnAssign)
            if (
                (first or after_assign)
                and isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Constant)
                and isinstance(stmt.value.value, str)
            ):
                found.add(id(stmt.value))
    return found


def library_strings() -> list[tuple[str, int, str]]:
    """``(module, line, text)`` of every string constant of the library that is no
    docstring (the literal parts of f-strings included)."""
    out: list[tuple[str, int, str]] = []
    for path in library_modules():
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        where = str(path.relative_to(PACKAGE.parent))
        out.extend(
            (where, node.lineno, node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docs
        )
    return out


def test_the_scan_reads_the_library() -> None:
    modules = {m for m, _, _ in library_strings()}
    assert "nsqctl/admin/planners.py" in modules and "nsqctl/producer/routing.py" in modules
    assert not any(m.startswith("nsqctl/cli/") for m in modules)


def test_library_messages_name_settings_and_actions_not_flags_and_commands() -> None:
    found = [
        f"{module}:{line}: {spelling!r} in {text[:80]!r}"
        for module, line, text in library_strings()
        for spelling in CLI_SPELLING.findall(text)
        if spelling not in SERVER_FLAGS
    ]
    assert not found, "\n".join(found)


def test_every_action_the_library_names_has_a_command() -> None:
    named = {
        (module, line, action)
        for module, line, text in library_strings()
        for action in ACTION.findall(text)
    }
    assert named  # the scan does see the library's hints
    unknown = [f"{m}:{n}: {a}()" for m, n, a in sorted(named) if a not in ACTION_COMMANDS]
    assert not unknown, unknown


def _cli() -> tuple[set[str], set[str]]:
    """The CLI's flags and its commands (``topic list``)."""
    from nsqctl.cli.app import root_command

    flags: set[str] = set()
    commands: set[str] = set()

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        for param in getattr(cmd, "params", []):
            flags.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
        if path:
            commands.add(" ".join(path))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, (*path, name))

    walk(root_command(), ())
    return flags, commands


def test_the_translation_names_flags_and_commands_the_cli_has() -> None:
    flags, commands = _cli()
    for setting, flag in SETTING_WORDS.items():
        assert set(flag.split("/")) <= flags, (setting, flag)
    for action, command in ACTION_COMMANDS.items():
        assert command in commands, (action, command)


def test_an_action_becomes_the_command_with_its_flags() -> None:
    text = "run `channel_setoffset(t, c, partition=2, virtual_offset=0)`; `stat(t, end=True)`"
    assert cli_words(text) == (
        "run `nsqctl channel setoffset t c --partition 2 --virtual-offset 0`; `nsqctl stat t --end`"
    )
    # other backquoted words, and unknown names, are left alone
    assert cli_words("at `$.producers`, `java`, `nope(x)`") == "at `$.producers`, `java`, `nope(x)`"


@pytest.mark.parametrize(
    ("make", "library", "cli"),
    [
        (
            lambda: MetaChange(sync_every=-1).params(),
            "`sync_every` must be between",
            "--sync-every must be between",
        ),
        (
            lambda: MetaChange().params(),
            "give `replicas`, `sync_every`, `retention_days`, `upgrade_ext` or "
            "`channel_auto_create`",
            "give --replicas, --sync-every, --retention-days, --ext or "
            "--channel-auto-create/--no-channel-auto-create",
        ),
        (
            lambda: check_create_options("original", 2, 1, False, False),
            "drop `partitions`/`replicas`/`ordered`/`ext`",
            "drop --partitions/--replicas/--ordered/--ext",
        ),
        (
            lambda: parse_offset(),
            "one of `timestamp` (seconds), `virtual_offset` (bytes), `msgcount` or `end`",
            "one of --timestamp (seconds), --virtual-offset (bytes), --msgcount or --end",
        ),
    ],
    ids=["sync-every", "nothing-to-update", "original-create", "setoffset"],
)
def test_a_library_error_names_the_setting_and_the_cli_the_flag(
    make: object, library: str, cli: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        make()  # type: ignore[operator]
    assert library in str(caught.value)
    assert cli in cli_message(caught.value)


def test_an_auth_secret_missing_names_the_setting_and_the_cli_its_flag() -> None:
    err = AuthRequiredError("127.0.0.1:4150")
    assert "requires AUTH" in str(err) and "`auth_secret`" in str(err)
    assert "(--auth-secret-file)" in cli_message(err)
    assert "`" not in cli_message(err)


def test_an_unknown_topic_points_the_cli_user_at_commands() -> None:
    err = topic_not_found("orders", ["nsqlookupd 127.0.0.1:4161"])
    assert "`topic_list()`" in str(err) and "`topic_create(orders)`" in str(err)
    assert (
        "list topics with `nsqctl topic list`, or create it with `nsqctl topic create orders`"
        in (cli_message(err))
    )


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_an_admin_report_shows_the_cli_words(
    as_json: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    from nsqctl.admin.requests import AdminReport, AdminRequest, Node, NodeResult
    from nsqctl.cli.admin_actions import emit_report

    request = AdminRequest(Node("127.0.0.1:4161", "lookupd"), "/topic/create", (("topic", "t"),))
    report = AdminReport("topic create", "t", "redesign")
    report.results = [NodeResult(request, "failed", 500, "did not settle: check `lookup(t)`")]
    report.warnings = ["only 1/2 partitions writable: check `lookup(t)`"]
    with pytest.raises(nsqctl.AdminError) as caught:
        emit_report(report, as_json)
    shown = capsys.readouterr()
    assert "`lookup(t)`" not in shown.out + shown.err
    assert "warning: only 1/2 partitions writable: check `nsqctl lookup t`" in shown.err
    assert "did not settle: check `nsqctl lookup t`" in shown.out  # the failed request
    assert "`nsqctl lookup t`" in cli_message(caught.value)
