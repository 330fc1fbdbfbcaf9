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
    errors = []
    for line in proc.stdout.splitlines():
        where, found, message = line.partition(": error: ")
        if found:
            errors.append(f"{where.rsplit(':', 1)[1]} {message}")
    if not errors and proc.returncode != 0:
        raise AssertionError(f"mypy failed without an error line:\n{proc.stdout}{proc.stderr}")
    return errors
