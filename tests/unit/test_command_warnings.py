"""A library warning that carries a traceback, as a command prints it: one line, and the
traceback under it only when the command runs with ``--debug``."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from nsqctl.cli.library_warnings import CommandWarnings


def _record() -> logging.LogRecord:
    try:
        raise KeyError("partition 3")
    except KeyError:
        exc_info = sys.exc_info()
    return logging.LogRecord(
        "nsqctl.lookup", logging.WARNING, __file__, 1, "it failed (%s)", ("KeyError",), exc_info
    )


@pytest.mark.parametrize("tracebacks", [False, True])
def test_a_traceback_only_when_debugging(tracebacks: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    CommandWarnings("tail", tracebacks=tracebacks).emit(_record())
    lines = err.getvalue().splitlines()
    assert lines[0] == "nsqctl tail: it failed (KeyError)"
    if tracebacks:
        assert lines[1] == "Traceback (most recent call last):"
        assert lines[-1] == "KeyError: 'partition 3'"
    else:
        assert lines == ["nsqctl tail: it failed (KeyError)"]
