"""Type-check a user's snippet against the package with ``mypy --strict``, quickly.

Every module behind ``nsqctl.X`` is skipped (``follow_imports = skip``) but those named in
``analysed``, whose types the snippet's checks need (their own errors are ignored: they
are not the snippet's), so a check takes seconds, not a whole analysis of the package.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import nsqctl


def mypy_errors(snippet: str, tmp_path: Path, analysed: Sequence[str] = ()) -> list[str]:
    """The errors mypy --strict reports for ``snippet``, each as ``"LINE MESSAGE"``."""
    return _report(snippet, tmp_path, analysed, ": error: ")


def mypy_revealed(snippet: str, tmp_path: Path, analysed: Sequence[str] = ()) -> list[str]:
    """What mypy --strict says of each ``reveal_type(...)`` in ``snippet``, each as
    ``"LINE TYPE"`` (a type mypy could not resolve shows as ``Any?``)."""
    return [
        f"{line} {note.removeprefix('Revealed type is ').strip(chr(34))}"
        for line, note in (
            found.split(" ", 1) for found in _report(snippet, tmp_path, analysed, ": note: ")
        )
        if note.startswith("Revealed type is ")
    ]


def _report(snippet: str, tmp_path: Path, analysed: Sequence[str], kind: str) -> list[str]:
    """The lines of mypy --strict's report on ``snippet`` of ``kind`` (``": error: "``,
    ``": note: "``), each as ``"LINE MESSAGE"``."""
    package = Path(nsqctl.__file__).parent
    behind = sorted(
        f"nsqctl.{p.name}.*" if p.is_dir() else f"nsqctl.{p.stem}"
        for p in package.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists())
        or (p.suffix == ".py" and p.stem != "__init__")
    )
    config = f"[mypy]\nstrict = True\n[mypy-{','.join(behind)}]\nfollow_imports = skip\n"
    if analysed:
        config += f"[mypy-{','.join(analysed)}]\nfollow_imports = normal\nignore_errors = True\n"
    (tmp_path / "mypy.ini").write_text(config)
    source = tmp_path / "snippet.py"
    source.write_text(snippet)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(tmp_path / "mypy.ini"),
            "--cache-dir",
            str(tmp_path / "cache"),
            str(source),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "MYPYPATH": str(package.parent)},
        cwd=tmp_path,
    )
    errors, found_any = [], False
    for line in proc.stdout.splitlines():
        where, found, message = line.partition(kind)
        if found:
            errors.append(f"{where.rsplit(':', 1)[1]} {message}")
        found_any = found_any or ": error: " in line
    if not found_any and proc.returncode != 0:
        raise AssertionError(f"mypy failed without an error line:\n{proc.stdout}{proc.stderr}")
    return errors
