"""The shape of nsqctl's imports, read from the source with :mod:`ast` (nothing imported).

(a) No import cycles among the modules of ``nsqctl``, ``tui``, ``tests`` and ``bench``:
    layers depend downward.
    Every import counts, each labelled with its kind in a failure:

    - ``module``: at module level, run on import;
    - ``type-checking``: under ``if TYPE_CHECKING:``, never run but followed by mypy, and a
      loop there means the two modules cannot be understood (or typed) one without the
      other;
    - ``function``: inside a function, deferred for start-up time; still a dependency, and
      a loop through one only works until someone moves the import to the top.

    Two exceptions, both about packages rather than modules:

    - importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``; those implicit
      parent imports are not edges (every module would otherwise sit in a loop with the
      package that re-exports it). An explicit ``from a.b import name`` is an edge to
      ``a.b`` (its ``__init__``), and ``from a.b import c`` to the submodule ``a.b.c``.
    - the root package ``nsqctl`` is the lazy public face: at run time it imports nothing
      (``__getattr__`` loads a name on first use), and its ``TYPE_CHECKING`` imports only
      tell type checkers what those names are. Its outgoing edges are left out; a module
      that reads ``nsqctl.__version__`` depends on it like on any other module.

(b) No ``from X import _name`` across modules in those four: a name shared
    between modules gets a public name in the module it belongs to.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("nsqctl", "tui", "tests", "bench")
#: the dashboard's sources live in ``tui/`` but install, and import each other, as
#: ``nsqctl.tui`` (through the ``nsqctl/tui`` link, which the walk does not follow)
IMPORTED_AS = {"tui": "nsqctl.tui"}
#: the lazy public face (see the module doc): its outgoing edges are not followed
PUBLIC_FACE = "nsqctl"


@dataclass(frozen=True)
class Source:
    name: str  # dotted module name
    path: Path
    is_package: bool  # an __init__.py


@dataclass(frozen=True)
class Import:
    importer: str
    line: int
    target: str  # the nsqctl/tui module imported
    kind: str  # "module", "type-checking" or "function"
    names: tuple[str, ...]  # for ``from X import a, b``: a, b; else ()


def sources() -> dict[str, Source]:
    found: dict[str, Source] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            parts[0] = IMPORTED_AS.get(parts[0], parts[0])
            name = ".".join(parts)
            found[name] = Source(name, path, is_package)
    return found


def _base(src: Source, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` reads from (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    parts = src.name.split(".")
    if not src.is_package:
        parts = parts[:-1]
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(src: Source, known: dict[str, Source], text: str | None = None) -> Iterator[Import]:
    """Every import in ``src`` (or in ``text`` read as ``src``) of a module in
    :data:`PACKAGES`, with its kind."""

    def walk(node: ast.AST, kind: str) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                inner = "type-checking" if kind == "module" else kind
                for stmt in child.body:
                    yield from visit(stmt, inner)
                for stmt in child.orelse:
                    yield from visit(stmt, kind)
                continue
            yield from visit(child, kind)

    def visit(node: ast.AST, kind: str) -> Iterator[Import]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            kind = "function"
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield Import(src.name, node.lineno, alias.name, kind, ())
        elif isinstance(node, ast.ImportFrom):
            base = _base(src, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:  # ``from package import submodule``
                    yield Import(src.name, node.lineno, sub, kind, ())
                elif base in known:
                    yield Import(src.name, node.lineno, base, kind, (alias.name,))
        yield from walk(node, kind)

    source = src.path.read_text() if text is None else text
    yield from walk(ast.parse(source, str(src.path)), "module")


def test_the_dashboard_s_own_imports_are_seen() -> None:
    """The dashboard's modules import each other as ``nsqctl.tui.*``: those edges count."""
    assert any(
        i.importer == "nsqctl.tui.app" and i.target.startswith("nsqctl.tui.") for i in all_imports()
    )


def all_imports() -> list[Import]:
    known = sources()
    return [i for src in known.values() for i in imports_of(src, known)]


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one
    cycle through all of them where possible, else its sorted members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strongconnect(v)
    return found


def _one_cycle(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest path from the component's first module back to itself (breadth-first)."""
    start = component[0]
    members = set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges.get(v, set()) & members):
            if w == start:
                return [*paths[v], start]
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    return component


def test_no_import_cycles() -> None:
    found = all_imports()
    edges: dict[str, set[str]] = {}
    kinds: dict[tuple[str, str], set[str]] = {}
    for imp in found:
        if imp.importer == PUBLIC_FACE or imp.importer == imp.target:
            continue
        edges.setdefault(imp.importer, set()).add(imp.target)
        kinds.setdefault((imp.importer, imp.target), set()).add(f"{imp.kind}:{imp.line}")
    assert edges, "no imports found: is ROOT right?"
    described = []
    for component in cycles(edges):
        loop = _one_cycle(component, edges)
        steps = [
            f"{a} -> {b} ({', '.join(sorted(kinds[a, b]))})" for a, b in itertools.pairwise(loop)
        ]
        described.append(f"cycle among {len(component)} modules: " + "; ".join(steps))
    assert not described, "import cycles:\n" + "\n".join(described)


def test_no_private_names_imported_across_modules() -> None:
    crossing = [
        f"{imp.importer}:{imp.line}: from {imp.target} import {name}"
        for imp in all_imports()
        for name in imp.names
        if name.startswith("_") and not name.startswith("__")
    ]
    assert not crossing, (
        "private names imported from another module (give them a public name where they "
        "belong):\n" + "\n".join(crossing)
    )


def test_the_scan_sees_every_kind_of_import() -> None:
    """The scanner itself: the three kinds, relative imports and submodule resolution,
    on a module written for it (so the two rules above cannot pass by seeing nothing)."""
    text = (
        "from typing import TYPE_CHECKING\n"
        "from nsqctl.errors import ConfigError, _hidden\n"
        "from . import base\n"
        "if TYPE_CHECKING:\n"
        "    from nsqctl.lookup.topology import Topology\n"
        "def f():\n"
        "    import nsqctl.httpclient\n"
    )
    known = sources()
    probe = Source("nsqctl.admin.probe", ROOT / "nsqctl" / "admin" / "probe.py", False)
    got = {(i.target, i.kind, i.names) for i in imports_of(probe, known, text)}
    assert got == {
        ("nsqctl.errors", "module", ("ConfigError",)),
        ("nsqctl.errors", "module", ("_hidden",)),
        ("nsqctl.admin.base", "module", ()),
        ("nsqctl.lookup.topology", "type-checking", ("Topology",)),
        ("nsqctl.httpclient", "function", ()),
    }
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _one_cycle(["a", "b", "c"], {"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [
        "a",
        "b",
        "c",
        "a",
    ]
