"""The API reference (docs/api, Sphinx autodoc) builds without a warning and documents
every public name of ``nsqctl``, including the ones loaded lazily by the package's
PEP 562 ``__getattr__``.

Needs Sphinx (the ``docs`` extra). The build runs in a child process, as CI runs it, so
Sphinx's and docutils' global state stays out of the test process.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import nsqctl

SOURCE = Path(__file__).resolve().parents[2] / "docs" / "api"


def _build(out: Path) -> str:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-E",
            "-b",
            "html",
            "-d",
            str(out / ".doctrees"),
            str(SOURCE),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "No module named sphinx" not in proc.stderr, (
        "Sphinx is missing: pip install -e '.[docs]'"
    )
    assert proc.returncode == 0, f"the API reference has warnings:\n{proc.stderr}"
    return (out / "index.html").read_text(encoding="utf-8")


def test_reference_builds_without_warnings_and_lists_the_public_api(tmp_path: Path) -> None:
    html = _build(tmp_path / "html")
    documented = set(re.findall(r'id="nsqctl\.([A-Za-z_][\w.]*)"', html))
    public = {name for name in nsqctl.__all__ if not name.startswith("__")}
    assert public - documented == set(), "public names missing from the reference"
    # The clients' public methods, whatever they are when this runs.
    for cls in (nsqctl.Producer, nsqctl.Consumer, nsqctl.Message):
        methods = {
            name
            for name, value in vars(cls).items()
            if not name.startswith("_")
            and (inspect.isfunction(value) or isinstance(value, property))
        }
        assert methods, cls
        missing = {m for m in methods if f"{cls.__name__}.{m}" not in documented}
        assert missing == set(), f"{cls.__name__} methods missing from the reference"
    # Docstrings are rendered, not just names: the exception tree's own words.
    assert "Base of every error nsqctl raises on purpose" in html
