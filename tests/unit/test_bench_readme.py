"""The project's documents stay references, not diaries.

bench/README.md is the place a reader finds the current figure for each benchmark, what
bounds it and how to rerun it; past a few hundred lines it turns back into a log of runs,
so its length is capped. And no code, test or document says *when* or *in which piece of
work* something happened (a work session, an issue, a stop or a run named by its number, a
commit hash): such a reference means nothing to a reader without the project's history,
and says nothing about what the behaviour is.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH_README = ROOT / "bench" / "README.md"
MAX_BENCH_README_LINES = 600

SCANNED_DIRS = ("nsqctl", "tui", "tests", "bench", "docs")
SCANNED_FILES = ("README.md",)
SCANNED_SUFFIXES = (".py", ".md", ".rst", ".tcss")

#: Numbered pieces of work. "run" only as a label (the word, then a number with or without
#: "#"), not a run's figures ("a run 520-580 ms", "run 3 times"): a number followed by a
#: range, a decimal or a unit is a measurement.
_UNITS = (
    r"(?:ms|s|µs|us|ns|%|x|msgs?|messages|rows|lines|times|minutes?|seconds?|MiB|MB|GB|KiB|KB)\b"
)
DIARY_WORDS = re.compile(
    r"\b(?:session|issue|stop|item)\s+#?\d+\b"
    r"|\brun\s+#\d+\b"
    r"|\brun\s+\d+\b(?![-–.,/]\d)(?!\s*" + _UNITS + r")",
    re.IGNORECASE,
)
#: A git commit hash: 7-40 hex digits with at least one letter and one digit. Only looked
#: for in prose (comments, docstrings, text outside code in documents): hex message ids,
#: digests and test data live in code and literals, where they are legitimate.
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")

#: (path relative to the repository, the matched text): hits that are not diary references,
#: each with its reason (none today).
ALLOWED: dict[tuple[str, str], str] = {}


def scanned_files() -> list[Path]:
    found = [ROOT / name for name in SCANNED_FILES]
    for top in SCANNED_DIRS:
        found.extend(
            p
            for p in sorted((ROOT / top).rglob("*"))
            if p.suffix in SCANNED_SUFFIXES and p.is_file() and "results" not in p.parts
        )
    return found


def python_prose(source: str) -> str:
    """Comments and docstrings of a Python source: where a person writes sentences."""
    parts: list[str] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            parts.append(tok.string)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                parts.append(doc)
    return "\n".join(parts)


def document_prose(text: str) -> str:
    """A document's text without its code: fenced blocks and inline code spans."""
    text = re.sub(r"^(```|~~~).*?^\1", "", text, flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r"``.+?``|`[^`\n]+`", "", text)
    return text


def diary_references(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    rel = path.relative_to(ROOT).as_posix()
    hits = [m.group(0) for m in DIARY_WORDS.finditer(text)]
    if COMMIT_HASH.search(text):  # most files have no hex at all: skip the parse
        prose = python_prose(text) if path.suffix == ".py" else document_prose(text)
        hits += [m.group(0) for m in COMMIT_HASH.finditer(prose)]
    return [f"{rel}: {hit!r}" for hit in hits if (rel, hit) not in ALLOWED]


def test_bench_readme_is_a_reference_not_a_log() -> None:
    lines = len(BENCH_README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_BENCH_README_LINES, (
        f"bench/README.md has {lines} lines (at most {MAX_BENCH_README_LINES}): keep one current "
        "table per benchmark and drop superseded runs (git log keeps them)"
    )


def test_no_diary_references() -> None:
    hits = [hit for path in scanned_files() for hit in diary_references(path)]
    assert not hits, "say what the behaviour is, not when it was worked on:\n" + "\n".join(hits)


def test_the_scan_recognises_diary_references_and_spares_figures() -> None:
    """The patterns themselves: what they must catch and what they must leave alone."""
    # built here, not written out, so that this file holds no diary reference of its own
    examples = [("Session", " 17"), ("see issue", " #34"), ("issue", " 4"), ("stop", " 3")]
    examples += [("in run", " 12"), ("run", " #2")]
    for word, number in examples:
        diary = word + number
        assert DIARY_WORDS.search(diary), diary
    for figure in ("of a run 520-580 ms", "run 3 times", "a run 1.5 s long", "the soak's run"):
        assert not DIARY_WORDS.search(figure), figure
    assert COMMIT_HASH.search("fixed in 3a2865a")
    assert not COMMIT_HASH.search("a decade and 1234567 messages")
    code = '"""Fixed in 3a2865a."""\nMSG_ID = b"0a1b2c3d4e5f6789"  # the id nsqd gave\n'
    assert COMMIT_HASH.findall(python_prose(code)) == ["3a2865a"]
    doc = (
        "Run `nsqctl trace 0a1b2c3d4e5f6789`.\n"
        "```sh\nnsqctl trace 18a381c98ba69000\n```\n"
        "See 6805e6a.\n"
    )
    assert COMMIT_HASH.findall(document_prose(doc)) == ["6805e6a"]
