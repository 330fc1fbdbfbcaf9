"""``tail --format TEMPLATE``: every token, escapes, what a family lacks, and bad input.

Messages are built from decoded frames (the Message type a consumer hands tail); nothing
here connects, so the connection is a plain stand-in with the one attribute read (its
address).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from nsqctl.cli.commands.tail_stop import UntilTime
from nsqctl.cli.output.template import TOKENS, TOKENS_HELP, compile_template, is_template
from nsqctl.errors import ConfigError
from nsqctl.message import Delivery, Message
from nsqctl.protocol.raw_message import RawMessage, make_redesign_id
from tests.helpers.cli import assert_one_line_error, invoke, run_cli

TS_NS = 1_764_000_000_123_456_789


def _message(partition: int | None = None, **raw: Any) -> Message:
    fields: dict[str, Any] = {
        "timestamp": TS_NS,
        "attempts": 3,
        "id": b"0a1b2c3d4e5f6a7b",
        "body": b"caf\xc3\xa9\x00\xff",
    }
    fields.update(raw)
    conn = SimpleNamespace(address="127.0.0.1:4150")
    via = Delivery(conn, None, "orders", "audit", partition)  # type: ignore[arg-type]
    return Message(RawMessage(**fields), via, 0.0, 0)


ORIGINAL = _message()
REDESIGN = _message(
    1,
    id=make_redesign_id(77, 4242),
    internal_id=77,
    trace_id=4242,
    offset=9000,
    ext_header=b'{"region":"eu","n":5}',
)


@pytest.mark.parametrize(
    ("template", "original", "redesign"),
    [
        ("%s", ORIGINAL.body, REDESIGN.body),
        ("%S", b"7", b"7"),
        ("%t", b"orders", b"orders"),
        ("%p", b"-1", b"1"),
        ("%o", b"-1", b"9000"),
        ("%T", b"1764000000123", b"1764000000123"),
        ("%h", b"", b"region=eu,n=5"),
        ("%i", b"0a1b2c3d4e5f6a7b", make_redesign_id(77, 4242).hex().encode()),
        ("%a", b"3", b"3"),
        ("%n", b"127.0.0.1:4150", b"127.0.0.1:4150"),
        ("%r", b"", b"4242"),
    ],
)
def test_every_token_renders_its_field(template: str, original: bytes, redesign: bytes) -> None:
    compiled = compile_template(template)
    assert compiled.render(ORIGINAL) == original
    assert compiled.render(REDESIGN) == redesign


def test_every_token_is_tested_and_documented() -> None:
    letters = {t.letter for t in TOKENS}
    assert letters == set("sStpoThianr")
    for token in TOKENS:
        assert f"%{token.letter} " in TOKENS_HELP


def test_literals_escapes_and_no_added_newline() -> None:
    compiled = compile_template(r"[%t:%p] 100%% \\ %a\t%s\r\n")
    assert compiled.render(ORIGINAL) == b"[orders:-1] 100% \\ 3\t" + ORIGINAL.body + b"\r\n"
    assert compile_template("%s").render(ORIGINAL) == ORIGINAL.body  # nothing appended
    assert compile_template("%%").render(ORIGINAL) == b"%"


def test_a_batch_renders_as_its_messages_one_after_another() -> None:
    compiled = compile_template("%p %s\n")
    batch = [ORIGINAL, REDESIGN, ORIGINAL]
    assert compiled.render_all(batch) == b"".join(compiled.render(m) for m in batch)
    assert compiled.render_all([]) == b""


def test_a_value_with_a_percent_is_a_template() -> None:
    assert is_template("%s") and is_template("100%%")
    assert not is_template("raw") and not is_template("json")


@pytest.mark.parametrize(
    ("template", "named"),
    [("%x", "%x"), ("%s %k", "%k"), ("abc%", "lone '%'"), ("%s\\q", "\\q"), ("x\\", "lone")],
)
def test_a_bad_token_is_named_with_the_valid_ones(template: str, named: str) -> None:
    with pytest.raises(ConfigError) as err:
        compile_template(template)
    assert named in str(err.value) and "%s %S %t %p" in str(err.value)


def test_a_bad_token_is_one_line_exit_2_before_connecting() -> None:
    proc = run_cli(["tail", "t", "--format", "%s %q\\n", "--nsqd", "127.0.0.1:1"])
    line = assert_one_line_error(proc, 2)
    assert "unknown token %q" in line and "%T" in line, line


def _refusal(*args: str) -> str:
    """What ``nsqctl tail ARGS`` refuses with, before connecting (in process)."""
    result = invoke("tail", *args)
    assert isinstance(result.exception, ConfigError), (result.exception, result.output)
    assert result.stdout_bytes == b""
    return str(result.exception)


def test_print_topic_with_a_template_says_to_use_t() -> None:
    assert "%t" in _refusal("t", "--format", "%s", "--print-topic", "--nsqd", "127.0.0.1:1")


@pytest.mark.parametrize("flag", [["--until", "2026-01-01T00:00:00"], ["--from-start"]])
def test_history_on_a_named_channel_is_refused(flag: list[str]) -> None:
    """SUB_ADVANCED would move the user's channel for its other readers."""
    line = _refusal("t", "-c", "work", *flag, "--lookupd", "127.0.0.1:1")
    assert "temporary channel" in line and "'work'" in line, line


def test_until_empty_without_an_http_address_says_what_to_add() -> None:
    assert "--nsqd-http" in _refusal("t", "--until-empty", "--nsqd", "127.0.0.1:1")


def test_until_holds_a_partition_from_its_first_message_past_the_time() -> None:
    until = UntilTime(TS_NS)
    before = _message(0, timestamp=TS_NS - 1)
    at = _message(0, timestamp=TS_NS)
    past = _message(0, timestamp=TS_NS + 1)
    late_but_older = _message(0, timestamp=TS_NS - 5)  # the partition already ended
    other = _message(1, timestamp=TS_NS)
    assert [until.holds(m) for m in (before, at, past, late_but_older, other)] == [
        False,
        False,
        True,
        True,
        False,
    ]
    assert until.reached == {0} and until.held == [past, late_but_older]
