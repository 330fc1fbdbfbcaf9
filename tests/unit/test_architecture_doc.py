"""docs/architecture.md maps every package of nsqctl: a package added without its
paragraph there (or a paragraph left behind for one that is gone) fails here.

A package is a directory under ``nsqctl/`` with an ``__init__.py``, named as it is
imported (``nsqctl.admin.partitions``), plus the dashboard, ``nsqctl.tui``: its sources
are the top-level ``tui/`` folder and ``nsqctl/tui`` only links to it, so a walk of
``nsqctl/`` that does not follow links would miss it. The map names a package in
backticks, as its heading does (`` ### `nsqctl.consumer` ``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
#: packages whose sources live outside nsqctl/ and are linked in
LINKED = {"nsqctl.tui": ROOT / "tui"}
HEADING = re.compile(r"^#{2,4} `(nsqctl(?:\.\w+)+)`\s*$", re.MULTILINE)


def packages(root: Path = ROOT) -> set[str]:
    """Every package below the root package, as an import name."""
    found = {
        ".".join(init.parent.relative_to(root).parts)
        for init in (root / "nsqctl").rglob("__init__.py")  # does not follow links
        if init.parent != root / "nsqctl"
    }
    found |= {name for name, path in LINKED.items() if (path / "__init__.py").is_file()}
    return found


def test_every_package_is_in_the_map() -> None:
    text = DOC.read_text()
    missing = sorted(name for name in packages() if f"`{name}`" not in text)
    assert not missing, (
        f"{DOC.relative_to(ROOT)} does not name these packages (add a paragraph saying what "
        f"each does and what it imports): {', '.join(missing)}"
    )


def test_every_package_heading_names_a_package() -> None:
    headings = set(HEADING.findall(DOC.read_text()))
    gone = sorted(headings - packages())
    assert not gone, f"{DOC.relative_to(ROOT)} has paragraphs for no package: {', '.join(gone)}"


def test_the_walk_finds_nested_and_linked_packages() -> None:
    """The scan itself, so the two checks above cannot pass by finding nothing."""
    found = packages()
    assert {"nsqctl.admin", "nsqctl.admin.partitions", "nsqctl.tui", "nsqctl.consumer"} <= found
    assert "nsqctl" not in found
