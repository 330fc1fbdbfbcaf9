"""An option that takes one value, given several times with different values: refused.

click keeps the last value of a repeated option silently, so ``--node a --node b`` would
act on b alone, which the operator may not have meant. Every command's arguments are
checked before click parses them (:func:`refuse_repeated`, hooked where the app builds
its commands); an option taken as a list on purpose, a flag and a counter are left
alone, and so is the same value given twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nsqctl.errors import ConfigError


def repeated_error(name: str, given: Sequence[object], why: str = "give it once") -> ConfigError:
    """The one-line refusal of option ``name`` given several values (``given``, in order)."""
    return ConfigError(f"{name} given {len(given)} times ({', '.join(map(str, given))}): {why}")


def _takes_one_value(param: Any) -> bool:
    return (
        param.param_type_name == "option"
        and not param.is_flag
        and not param.count
        and not param.multiple
        and param.nargs == 1
    )


def given_values(params: Sequence[Any], args: Sequence[str]) -> dict[str, list[str]]:
    """Each single-value option's values in ``args``, in order, by its first long name,
    read as click reads them: ``--opt V``, ``--opt=V``, ``-o V``, ``-oV``; a value is never
    taken for an option, and nothing after ``--``."""
    valued: dict[str, str] = {}  # option name as typed → its key
    single: set[str] = set()
    for param in params:
        if param.param_type_name != "option" or param.is_flag or param.count:
            continue
        key = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        for name in param.opts:
            valued[name] = key
        if _takes_one_value(param):
            single.add(key)
    found: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if token == "--":
            break
        name, eq, value = token.partition("=")
        if token.startswith("--") and eq and name in valued:
            key = valued[name]
        elif token in valued:
            key = valued[token]
            if i >= len(args):
                break  # click says the value is missing
            value, i = args[i], i + 1
        elif len(token) > 2 and token[0] == "-" and token[1] != "-" and token[:2] in valued:
            key, value = valued[token[:2]], token[2:]
        else:
            continue
        if key in single:
            found.setdefault(key, []).append(value)
    return found


def refuse_repeated(params: Sequence[Any], args: Sequence[str]) -> None:
    """Refuse (exit 2) a single-value option of ``params`` given different values."""
    for key, values in given_values(params, args).items():
        if len(set(values)) > 1:
            raise repeated_error(key, values)


def check_repeats(command: Any, usage_error: Callable[..., Exception]) -> None:
    """Have ``command`` (not a group: its arguments go on to a subcommand) refuse a
    single-value option given different values, before click keeps the last.

    The refusal is raised as click's ``usage_error`` (``UsageError``), as click's own are:
    a usage error is what it is, and so it exits as one does (2, or UNKNOWN under
    ``check``, whose exit code a monitor reads)."""
    if hasattr(command, "commands"):
        return
    parse = command.parse_args

    def parse_args(ctx: Any, args: list[str]) -> Any:
        if not ctx.resilient_parsing:  # completion parses half-typed lines: never refuse
            try:
                refuse_repeated(command.params, args)
            except ConfigError as err:
                raise usage_error(str(err), ctx=ctx) from None
        return parse(ctx, args)

    command.parse_args = parse_args
