"""The README's in-page links and relative file links lead somewhere.

The README opens with a contents line pointing into the tour; a heading renamed later would
leave that link dead without anyone noticing, so every ``(#anchor)`` must match a heading's
GitHub slug and every relative link must name a file or folder of the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.lstrip("#").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def headings(text: str) -> set[str]:
    in_code = False
    slugs: set[str] = set()
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            slugs.add(github_slug(line))
    return slugs


def links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_in_page_link_names_a_heading() -> None:
    text = readme_text()
    known = headings(text)
    anchors = [link[1:] for link in links(text) if link.startswith("#")]
    assert anchors, "the README has a contents line of in-page links"
    dead = [anchor for anchor in anchors if anchor not in known]
    assert not dead, f"README links to headings that do not exist: {dead}"


def test_every_relative_link_names_a_file() -> None:
    relative = [
        link.split("#", 1)[0]
        for link in links(readme_text())
        if not link.startswith(("#", "http://", "https://", "mailto:"))
    ]
    missing = [link for link in relative if not (ROOT / link).exists()]
    assert not missing, f"README links to paths that do not exist: {missing}"


def test_slug_follows_github() -> None:
    assert github_slug("### Take an nsqd out of service: `nsqctl node drain`") == (
        "take-an-nsqd-out-of-service-nsqctl-node-drain"
    )
    assert github_slug("## Quick start (fresh machine)") == "quick-start-fresh-machine"
