"""An option that takes one value, given several times with different values: refused.

click keeps the last value of a repeated option silently, so ``--node a --node b`` would
act on b alone, which the operator may not have meant. The whole command line is read
once, level by level as click will read it (the root's options, each group's, the
command's), before click parses it (:func:`check_repeats`, hooked on the root group).

A global option works before the command and after it, and the two places are two
scopes: the options before the command are defaults (an alias or a wrapper gives them
to every run), and the command's own line overrides them, so ``--profile a stat
--profile b`` reads profile b, as it always has. Given twice in one scope (``--profile a
--profile b stat``; ``stat --profile a --profile b``; after a group's name and again after
its command) it is refused. An option taken as a list on purpose, a flag and a counter
are left alone, and so is the same value given twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nsqctl.errors import ConfigError


def repeated_error(name: str, given: Sequence[object], why: str = "give it once") -> ConfigError:
    """The one-line refusal of option ``name`` given several values (``given``, in order)."""
    return ConfigError(f"{name} given {len(given)} times ({', '.join(map(str, given))}): {why}")


def _is_flag(param: Any) -> bool:
    """An option that takes no value on the command line (a flag, a counter)."""
    return bool(param.is_flag or param.count)


def _takes_one_value(param: Any) -> bool:
    """An option whose value click replaces when it is given again."""
    return (
        param.param_type_name == "option"
        and not _is_flag(param)
        and not param.multiple
        and param.nargs == 1
    )


def _key(param: Any) -> str:
    """The name an option's values are gathered under: its first long name, so that
    ``-i 2`` and ``--interval 3`` are one option given twice."""
    key: str = next((o for o in param.opts if o.startswith("--")), param.opts[0])
    return key


def _short_options(
    short: dict[str, Any], token: str, found: list[tuple[Any, str | None]]
) -> tuple[Any, str | None] | None:
    """``-abV`` read as click reads it: the flags (``-a``, ``-b``) added to ``found``, and
    the valued option that ends them with what follows it in ``token`` (None: its value is
    the next argument); None when there is none, or click would refuse a character."""
    for at, char in enumerate(token[1:], 2):
        param = short.get(f"-{char}")
        if param is None:
            return None
        if not _is_flag(param):
            return param, token[at:] or None
        found.append((param, None))
    return None


def read_options(
    params: Sequence[Any], args: Sequence[str], *, group: bool = False
) -> tuple[list[tuple[Any, str | None]], int]:
    """The options of ``args`` read as click reads them for a command of ``params``: each
    (option, its value; None for a flag), in order, from ``--opt V``, ``--opt=V``, ``-o V``,
    ``-oV`` and ``-abV``; and where the command's own arguments end: a group's at its
    subcommand's name (click reads a group's options before the subcommand only), a
    command's at the end of ``args``. A value is never taken for an option, and nothing
    after ``--`` is an option. What click refuses (an unknown option, a missing value) is
    passed over: click says what is wrong."""
    long: dict[str, Any] = {}
    short: dict[str, Any] = {}
    for param in params:
        if param.param_type_name == "option":
            for name in (*param.opts, *param.secondary_opts):
                (short if len(name) == 2 and name[1] != "-" else long)[name] = param
    found: list[tuple[Any, str | None]] = []
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            return found, i if group else len(args)
        if len(token) < 2 or token[0] != "-":
            if group:
                return found, i - 1
            continue
        name, eq, attached = token.partition("=")
        param, value = long.get(name), attached if eq else None
        if param is None:
            if token[1] == "-":
                continue
            short_read = _short_options(short, token, found)
            if short_read is None:
                continue
            param, value = short_read
        if _is_flag(param):
            if value is None:  # click refuses a flag given a value
                found.append((param, None))
            continue
        if value is None:
            if i >= len(args):
                break  # click says the value is missing
            value, i = args[i], i + 1
        found.append((param, value))
    return found, len(args)


#: Where an option's values are gathered: :data:`BEFORE` the command (the root's own
#: options) or :data:`COMMAND` (every level after it: each group's, the command's).
Scope = str
BEFORE: Scope = "before the command"
COMMAND: Scope = "the command"


def _single_values(
    found: Sequence[tuple[Any, str | None]], scope: Scope, into: dict[tuple[Scope, str], list[str]]
) -> None:
    """Add the values of ``found``'s single-value options to ``into``, by ``scope`` and
    :func:`_key`."""
    for param, value in found:
        if value is not None and _takes_one_value(param):
            into.setdefault((scope, _key(param)), []).append(value)


def command_line_values(
    root: Any, ctx: Any, args: Sequence[str]
) -> tuple[Any, dict[tuple[Scope, str], list[str]]]:
    """Each single-value option's values over the whole command line ``args`` of the
    group ``root`` (whose context is ``ctx``), by scope (:data:`BEFORE` the command, or
    :data:`COMMAND`: see the module docstring) and first long name; and the context of
    the command the line reaches (its help is the one to read). An empty dict when help
    is asked at some level: click shows it before reading the rest, and so the line is
    not refused."""
    command, level, rest = root, ctx, list(args)
    values: dict[tuple[Scope, str], list[str]] = {}
    while True:
        is_group = hasattr(command, "commands")
        found, end = read_options(command.get_params(level), rest, group=is_group)
        help_option = command.get_help_option(level)
        if any(param is help_option for param, _ in found):
            return level, {}
        _single_values(found, BEFORE if command is root else COMMAND, values)
        if not is_group or end >= len(rest):
            return level, values
        name = rest[end]
        sub = command.get_command(level, name)
        if sub is None:  # click says so
            return level, values
        level = sub.context_class(sub, info_name=name, parent=level, **sub.context_settings)
        command, rest = sub, rest[end + 1 :]


def check_repeats(root: Any, usage_error: Callable[..., Exception]) -> None:
    """Have the group ``root`` refuse a command line giving a single-value option
    different values in one scope (:func:`command_line_values`), before click parses it
    and keeps the last.

    The refusal is raised as click's ``usage_error`` (``UsageError``) in the context of
    the command the line reaches, as click's own are: a usage error is what it is, and so
    it exits as one does (2, or UNKNOWN under ``check``, whose exit code a monitor
    reads), pointing at that command's help."""
    parse = root.parse_args

    def parse_args(ctx: Any, args: list[str]) -> Any:
        if not ctx.resilient_parsing:  # completion parses half-typed lines: never refuse
            level, values = command_line_values(root, ctx, args)
            for (_scope, name), given in values.items():
                if len(set(given)) > 1:
                    raise usage_error(str(repeated_error(name, given)), ctx=level)
        return parse(ctx, args)

    root.parse_args = parse_args
