"""NSQCTL_DEBUG is read as --debug reads it wherever it is read: 0, false and off are
off (Spark's JVM output stays in its log file), 1, true and on are on."""

from __future__ import annotations

import pytest

from nsqctl.debug_env import debug_from_env
from nsqctl.pipeline.spark import spark_log_path


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("0", False),
        ("false", False),
        ("Off", False),
        ("", False),
        ("1", True),
        ("true", True),
        ("ON", True),
    ],
)
def test_nsqctl_debug_is_a_boolean(value: str, on: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NSQCTL_DEBUG", value)
    assert debug_from_env() is on
    assert (spark_log_path() is None) is on
