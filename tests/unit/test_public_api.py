"""The library's front door: everything a program needs at ``nsqctl.X``, one exception
tree, and an ``import nsqctl`` that stays cheap for the CLI."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import nsqctl
from nsqctl import errors
from tests.helpers.mypy_snippet import mypy_errors, mypy_revealed


def test_the_documented_names_import_from_the_top() -> None:
    from nsqctl import (  # noqa: F401
        ConnectionConfig,
        Consumer,
        Message,
        NsqctlError,
        Producer,
        Receipt,
        TLSSettings,
    )


def test_every_public_name_resolves_and_all_is_the_export_table() -> None:
    assert "__version__" in nsqctl.__all__
    assert "Producer" in nsqctl.__all__ and "TopicNotFoundError" in nsqctl.__all__
    for name in nsqctl.__all__:
        assert getattr(nsqctl, name) is not None, name
    assert set(nsqctl.__all__) <= set(dir(nsqctl))


def test_the_public_names_are_listed_once_as_type_checking_imports() -> None:
    """``__all__`` and the run-time look-up come from the imports a type checker reads,
    so the three cannot disagree: every such import is a public name, and nothing else."""
    tree = ast.parse(Path(nsqctl.__file__).read_text(encoding="utf-8"))
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    imported = {
        alias.asname or alias.name
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert set(nsqctl.__all__) == imported | {"__version__"}
    for node in block.body:  # "X as X": what mypy --strict treats as a re-export
        if isinstance(node, ast.ImportFrom):
            assert all(alias.asname == alias.name for alias in node.names), ast.unparse(node)


def test_import_nsqctl_does_not_load_typing() -> None:
    """``typing`` was most of ``import nsqctl``'s cost: the names come without it."""
    code = "import sys, nsqctl\nprint('typing' in sys.modules)\n"
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


MYPY_SNIPPET = """\
import nsqctl


async def publish() -> None:
    async with nsqctl.Producer(nsqd_tcp="127.0.0.1:4150") as producer:
        try:
            await producer.publish("t", b"x")
        except nsqctl.ConectError:
            pass
        except nsqctl.TransportError:
            pass
    nsqctl.Consumr("t", "c")
"""


def test_mypy_strict_rejects_a_misspelt_top_level_name(tmp_path: Path) -> None:
    """The names a program uses at ``nsqctl.X`` are checked, not waved through as Any.
    The modules behind them are not analysed (``follow_imports = skip``): this checks
    the front door only, in about a second."""
    assert [error.split(" ", 1)[1] for error in mypy_errors(MYPY_SNIPPET, tmp_path)] == [
        'Module has no attribute "ConectError"  [attr-defined]',
        'Module has no attribute "Consumr"  [attr-defined]',
    ]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        nsqctl.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_import_nsqctl_loads_no_client() -> None:
    """The CLI imports nsqctl for every command: the clients load on first use only."""
    code = (
        "import sys, nsqctl\n"
        "heavy = [m for m in ('nsqctl.consumer', 'nsqctl.producer', 'nsqctl.connection',"
        " 'httpx', 'asyncio') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "name", [n for n in nsqctl.__all__ if n.endswith("Error") and n != "NsqctlError"]
)
def test_every_public_error_is_an_nsqctl_error_of_a_kind(name: str) -> None:
    cls = getattr(nsqctl, name)
    assert issubclass(cls, nsqctl.NsqctlError)
    assert any(issubclass(cls, kind) for kind in drawn_kinds()), name


def test_errors_carry_the_setting_that_would_change_the_outcome() -> None:
    err = errors.FailoverTimeoutError("no leader", 3, setting="failover_window")
    assert (err.setting, err.partition, str(err)) == ("failover_window", 3, "no leader")
    assert isinstance(err, errors.LeaderUnavailableError)
    assert isinstance(err, errors.NsqctlTimeoutError)
    assert errors.ConfigError("bad").setting is None


# --------------------------------------------------------------------------- the tree


def drawn_tree() -> dict[str, set[str]]:
    """The tree drawn in nsqctl/errors.py's docstring: each drawn class -> the parents
    the drawing gives it (the one it hangs under, and each ``+Kind``)."""
    assert errors.__doc__ is not None
    parents: dict[str, set[str]] = {}
    path: list[str] = []
    for line in errors.__doc__.splitlines():
        if line.strip() == "NsqctlError":
            root_col = line.index("NsqctlError")
            path = ["NsqctlError"]
            parents["NsqctlError"] = set()
            continue
        if not path:
            continue
        branch = re.match(r"^(.*?)[├└]── (\w+)(.*)$", line)
        if branch is None:
            if not line.strip():
                break  # the drawing ends at its first blank line
            continue  # a description's second line
        depth = (len(branch.group(1)) - root_col) // 4 + 1
        name = branch.group(2)
        del path[depth:]
        parents[name] = {path[-1], *re.findall(r"\+(\w+)", branch.group(3))}
        path.append(name)
    return parents


def drawn_kinds() -> set[type[BaseException]]:
    """The kinds: the classes drawn right under the root."""
    return {getattr(nsqctl, name) for name, ps in drawn_tree().items() if ps == {"NsqctlError"}}


def test_the_drawn_tree_is_the_class_hierarchy() -> None:
    tree = drawn_tree()
    assert len(tree) > 20, tree
    for name, drawn_parents in tree.items():
        cls = getattr(nsqctl, name)
        real = {base.__name__ for base in cls.__bases__} - {"Exception"}
        assert drawn_parents == real, f"{name}: drawn under {drawn_parents}, is under {real}"
        assert all(getattr(nsqctl, b) in cls.__bases__ for b in drawn_parents), name
    defined_here = {
        n
        for n, obj in vars(errors).items()
        if inspect.isclass(obj)
        and issubclass(obj, BaseException)
        and obj.__module__ == errors.__name__
    }
    assert defined_here <= set(tree), f"not drawn: {sorted(defined_here - set(tree))}"


def library_exception_classes() -> set[type[BaseException]]:
    """Every exception class defined in the library (nsqctl, its CLI included)."""
    found: set[type[BaseException]] = set()
    for info in pkgutil.walk_packages(nsqctl.__path__, "nsqctl."):
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as err:
            # an optional extra's package (pyarrow, pyspark) is not installed here: that
            # module cannot run, so no caller can meet its errors
            assert err.name is not None and not err.name.startswith("nsqctl"), err
            continue
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__.startswith("nsqctl")
            ):
                found.add(obj)
    return found


def test_every_exception_class_is_under_the_one_root_and_at_the_top_level() -> None:
    classes = library_exception_classes()
    assert len(classes) > 60, classes
    kinds = drawn_kinds()
    for cls in classes - {nsqctl.NsqctlError}:
        where = f"{cls.__module__}.{cls.__qualname__}"
        assert issubclass(cls, nsqctl.NsqctlError), f"{where} is not an NsqctlError"
        assert any(issubclass(cls, kind) for kind in kinds), f"{where} is of no drawn kind"
        if not cls.__name__.startswith("_"):
            assert getattr(nsqctl, cls.__name__, None) is cls, (
                f"{where} is not nsqctl.{cls.__name__}"
            )


def test_no_public_name_is_any_to_a_type_checker(tmp_path: Path) -> None:
    """Each ``nsqctl.X`` has its real type for mypy, not Any: a name re-exported by a
    package that loads it lazily (a module ``__getattr__``) would reach a user's program
    as Any, and every call on it would go unchecked. Checked for the names imported from
    another module than their own (a re-export); only those modules are analysed."""
    tree = ast.parse(Path(nsqctl.__file__).read_text(encoding="utf-8"))
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    )
    reexported: dict[str, tuple[str, str]] = {}  # name -> (imported from, defined in)
    for node in block.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                defined_in = getattr(getattr(nsqctl, alias.name), "__module__", node.module)
                if defined_in != node.module:
                    reexported[alias.name] = (node.module, defined_in)
    assert "Consumer" in reexported and "LookupClient" in reexported
    names = sorted(reexported)
    snippet = "import nsqctl\n\n" + "".join(f"reveal_type(nsqctl.{name})\n" for name in names)
    analysed = sorted({module for pair in reexported.values() for module in pair})
    revealed = dict(line.split(" ", 1) for line in mypy_revealed(snippet, tmp_path, analysed))
    types = {name: revealed.get(str(line), "") for line, name in enumerate(names, start=3)}
    assert {name: type_ for name, type_ in types.items() if type_.startswith("Any")} == {}
    assert "" not in types.values()  # mypy revealed every name
