"""``tail --jq-field``: a missing field is no match, a malformed path is refused up front,
and filtering a durable channel must be asked for (it acknowledges what it skips)."""

from __future__ import annotations

import pytest

from nsqctl.cli.commands.tail import MessageFilter
from nsqctl.errors import ConfigError
from tests.helpers.cli import assert_one_line_error, run_cli


def test_a_missing_field_is_no_match() -> None:
    keep = MessageFilter.parse(None, ["level=warn"])
    assert not keep.matches(b'{"msg": "no level here"}')
    assert not keep.matches(b'{"level": {"nested": "warn"}}')
    assert not keep.matches(b'{"level": null}')
    assert not keep.matches(b"[" * 100_000)  # nested beyond the parser's recursion limit
    assert keep.matches(b'{"level": "warn"}')


@pytest.mark.parametrize("item", ["a..b=x", ".a=x", "a.=x", ".=x"])
def test_a_malformed_path_is_refused(item: str) -> None:
    with pytest.raises(ConfigError, match="single dots"):
        MessageFilter.parse(None, [item])


def test_malformed_path_is_exit_2_before_connecting() -> None:
    proc = run_cli(["tail", "t", "--jq-field", "a..b=x", "--nsqd", "127.0.0.1:1"])
    assert "single dots" in assert_one_line_error(proc, 2)


@pytest.mark.parametrize("flag", [["--grep", "x"], ["--jq-field", "level=warn"]])
def test_filtering_a_durable_channel_is_refused_without_the_flag(flag: list[str]) -> None:
    proc = run_cli(["tail", "t", "-c", "keep", *flag, "--nsqd", "127.0.0.1:1"])
    line = assert_one_line_error(proc, 2)
    assert "durable channel 'keep'" in line and "--discard-unmatched" in line, line
