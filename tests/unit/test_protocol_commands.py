"""Exact bytes of every command, written by hand from docs/nsq-protocol.md."""

from __future__ import annotations

import itertools
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nsqctl.protocol import commands as c
from nsqctl.protocol.errors import InvalidCommandError
from nsqctl.protocol.names import InvalidNameError, is_ephemeral, validate_channel, validate_topic

RAW_ID = b"\x00\x01\n \xff" + bytes(range(11))  # contains a newline and a space


def test_magic() -> None:
    assert c.MAGIC_V2 == b"  V2"


def test_identify_json_body() -> None:
    out = c.identify({"client_id": "a", "feature_negotiation": True})
    body = b'{"client_id":"a","feature_negotiation":true}'
    assert out == b"IDENTIFY\n" + struct.pack(">I", len(body)) + body
    assert json.loads(out[13:]) == {"client_id": "a", "feature_negotiation": True}


def test_auth() -> None:
    assert c.auth(b"s3cret") == b"AUTH\n\x00\x00\x00\x06s3cret"
    with pytest.raises(InvalidCommandError):
        c.auth(b"")


def test_sub_variants() -> None:
    assert c.sub("t", "ch") == b"SUB t ch\n"
    assert c.sub("t", "ch", 3) == b"SUB t ch 3\n"
    assert c.sub("t#ephemeral", "c.h-1_x#ephemeral") == b"SUB t#ephemeral c.h-1_x#ephemeral\n"
    assert c.sub_ordered("t", "ch", 0) == b"SUB_ORDERED t ch 0\n"
    assert c.sub_ordered("t", "ch") == b"SUB_ORDERED t ch\n"


def test_sub_advanced() -> None:
    assert c.sub_advanced("t", "ch", 2) == b"SUB_ADVANCED t ch 2\n"
    assert c.sub_advanced("t", "ch", None) == b"SUB_ADVANCED t ch\n"
    assert c.sub_advanced("t", "ch", 2, "msgcount:10") == b"SUB_ADVANCED t ch 2 msgcount:10\n"
    # the server reads the partition positionally: None becomes its "default" -1
    assert c.sub_advanced("t", "ch", None, "special:-1") == b"SUB_ADVANCED t ch -1 special:-1\n"
    assert c.start_timestamp(1700000000) == "timestamp:1700000000"
    assert c.start_virtual_queue(4096) == "virtual_queue:4096"
    assert c.start_msgcount(7) == "msgcount:7"
    assert c.start_end() == "special:-1"
    for bad in ("offset:1", "timestamp:", "timestamp:1 ", "msgcount:x", "special:-1\n"):
        with pytest.raises(InvalidCommandError):
            c.sub_advanced("t", "ch", 0, bad)
    with pytest.raises(InvalidCommandError):
        c.start_timestamp(-5)


def test_pub() -> None:
    assert c.pub("t", b"hi") == b"PUB t\n\x00\x00\x00\x02hi"
    assert c.pub("t", b"hi", 1) == b"PUB t 1\n\x00\x00\x00\x02hi"
    with pytest.raises(InvalidCommandError, match="empty"):
        c.pub("t", b"")


def test_mpub() -> None:
    body = b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01a" + b"\x00\x00\x00\x02bc"
    assert c.mpub_body([b"a", b"bc"]) == body
    assert c.mpub("t", [b"a", b"bc"]) == b"MPUB t\n" + struct.pack(">I", len(body)) + body
    assert c.mpub("t", [b"a", b"bc"], 4)[:9] == b"MPUB t 4\n"
    assert c.mpub_body_size([b"a", b"bc"]) == len(body) == 15
    with pytest.raises(InvalidCommandError):
        c.mpub("t", [])
    with pytest.raises(InvalidCommandError, match="empty"):
        c.mpub("t", [b"a", b""])


def test_dpub() -> None:
    assert c.dpub("t", 1500, b"x") == b"DPUB t 1500\n\x00\x00\x00\x01x"
    with pytest.raises(InvalidCommandError):
        c.dpub("t", -1, b"x")


def test_pub_trace() -> None:
    expected = b"PUB_TRACE t 0\n\x00\x00\x00\x0b" + b"\x00" * 7 + b"\x2a" + b"abc"
    assert c.pub_trace("t", 42, b"abc", 0) == expected
    assert c.pub_trace("t", 2**64 - 1, b"a")[-9:] == b"\xff" * 8 + b"a"
    with pytest.raises(InvalidCommandError):
        c.pub_trace("t", 2**64, b"a")


def test_mpub_trace() -> None:
    out = c.mpub_trace("t", [(1, b"ab"), (2, b"c")], 5)
    body = (
        b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x0a"
        + b"\x00" * 7
        + b"\x01ab"
        + b"\x00\x00\x00\x09"
        + b"\x00" * 7
        + b"\x02c"
    )
    assert out == b"MPUB_TRACE t 5\n" + struct.pack(">I", len(body)) + body
    assert c.mpub_body_size([b"ab", b"c"], c.MPUB_TRACE_ENTRY_OVERHEAD) == len(body)


def test_pub_ext() -> None:
    out = c.pub_ext("t", {"k": "v"}, b"body", 1)
    entry = b"\x00\x09" + b'{"k":"v"}' + b"body"
    assert out == b"PUB_EXT t 1\n" + struct.pack(">I", len(entry)) + entry
    # pre-encoded JSON passes through untouched
    assert c.pub_ext("t", b'{"a":1}', b"x") == b'PUB_EXT t\n\x00\x00\x00\x0a\x00\x07{"a":1}x'
    with pytest.raises(InvalidCommandError, match="trace_id"):
        c.pub_ext("t", {"##trace_id": 12}, b"x")
    assert b'"##trace_id":"12"' in c.pub_ext("t", {"##trace_id": "12"}, b"x")
    with pytest.raises(InvalidCommandError):
        c.pub_ext("t", b"x" * 70000, b"x")


def test_mpub_ext() -> None:
    out = c.mpub_ext("t", [({"a": "b"}, b"m1"), (b"{}", b"m2")])
    e1 = b"\x00\x09" + b'{"a":"b"}' + b"m1"
    e2 = b"\x00\x02{}m2"
    body = b"\x00\x00\x00\x02" + struct.pack(">I", len(e1)) + e1 + struct.pack(">I", len(e2)) + e2
    assert out == b"MPUB_EXT t\n" + struct.pack(">I", len(body)) + body


def test_flow_control() -> None:
    assert c.rdy(0) == b"RDY 0\n"
    assert c.rdy(2500) == b"RDY 2500\n"
    assert c.fin(RAW_ID) == b"FIN " + RAW_ID + b"\n"
    assert c.req(RAW_ID, 0) == b"REQ " + RAW_ID + b" 0\n"
    assert c.req(b"0123456789abcdef", 1000) == b"REQ 0123456789abcdef 1000\n"
    assert c.touch(b"0123456789abcdef") == b"TOUCH 0123456789abcdef\n"
    assert c.nop() == b"NOP\n"
    assert c.cls() == b"CLS\n"
    with pytest.raises(InvalidCommandError):
        c.rdy(-1)
    with pytest.raises(InvalidCommandError):
        c.rdy(True)
    with pytest.raises(InvalidCommandError, match="16 bytes"):
        c.fin(b"short")
    with pytest.raises(InvalidCommandError):
        c.req(RAW_ID, -10)


def test_partition_validation() -> None:
    with pytest.raises(InvalidCommandError):
        c.pub("t", b"x", -1)
    with pytest.raises(InvalidCommandError):
        c.sub("t", "c", "1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        ("a" * 65, "65 characters"),
        ("bad name", "' '"),
        ("bad/name", "'/'"),
        ("#ephemeral", "nothing before"),
        ("a#ephemeral#ephemeral", "'#'"),
        ("tópico", "'ó'"),
        ("t\n", "'\\n'"),
    ],
)
def test_invalid_names(name: str, fragment: str) -> None:
    with pytest.raises(InvalidNameError) as info:
        validate_topic(name)
    assert fragment in str(info.value)
    assert "1-64 characters" in str(info.value)
    with pytest.raises(InvalidNameError):
        c.pub(name, b"x")
    with pytest.raises(InvalidNameError, match="channel"):
        c.sub("ok", name)


def test_valid_names() -> None:
    assert validate_topic("a" * 64) == "a" * 64
    assert validate_channel("x" * 54 + "#ephemeral") == "x" * 54 + "#ephemeral"
    assert is_ephemeral("c#ephemeral")
    assert not is_ephemeral("c")


@given(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=30))
def test_mpub_body_parses_back(bodies: list[bytes]) -> None:
    body = c.mpub_body(bodies)
    assert len(body) == c.mpub_body_size(bodies)
    (count,) = struct.unpack_from(">I", body)
    pos, parsed = 4, []
    for _ in range(count):
        (n,) = struct.unpack_from(">I", body, pos)
        parsed.append(body[pos + 4 : pos + 4 + n])
        pos += 4 + n
    assert pos == len(body)
    assert parsed == bodies


@given(
    st.lists(st.binary(min_size=1, max_size=50), min_size=1, max_size=40),
    st.integers(min_value=58, max_value=400),
)
def test_split_mpub_respects_limit(bodies: list[bytes], limit: int) -> None:
    batches = c.split_mpub(bodies, limit)
    assert [b for batch in batches for b in batch] == bodies
    assert all(c.mpub_body_size(batch) <= limit for batch in batches)
    # greedy: adding the next message to a batch would have overflowed it
    for batch, following in itertools.pairwise(batches):
        assert c.mpub_body_size([*batch, following[0]]) > limit


def test_split_mpub_rejects_oversized_message() -> None:
    with pytest.raises(InvalidCommandError, match=r"max-msg-size.*split the input"):
        c.split_mpub([b"a", b"x" * 100], 50)


def test_mpub_body_same_and_mixed_lengths_encode_alike() -> None:
    """The equal-length fast path must give the bytes the general path gives."""
    same = [b"aa", b"bb", b"cc"]
    expected = b"\x00\x00\x00\x03" + b"".join(b"\x00\x00\x00\x02" + m for m in same)
    assert c.mpub_body(same) == expected
    mixed = [b"a", b"bbb"]
    assert c.mpub_body(mixed) == b"\x00\x00\x00\x02\x00\x00\x00\x01a\x00\x00\x00\x03bbb"
    assert c.mpub_body([b"x"]) == b"\x00\x00\x00\x01\x00\x00\x00\x01x"


def test_split_mpub_fast_path_keeps_everything_in_order() -> None:
    bodies = [bytes([i]) * 10 for i in range(50)]
    batches = c.split_mpub(bodies, 1 << 20)
    assert [list(b) for b in batches] == [bodies]


@given(st.lists(st.binary(min_size=16, max_size=16), max_size=50))
def test_fin_many_is_the_fins_concatenated(ids: list[bytes]) -> None:
    assert c.fin_many(ids) == b"".join(c.fin(i) for i in ids)


@pytest.mark.parametrize("bad", [b"short", b"x" * 17, b""])
def test_fin_many_rejects_any_id_that_is_not_16_bytes(bad: bytes) -> None:
    # 15 + 17 bytes would add up to two valid lengths: every id is checked on its own
    ids = [b"a" * 16, bad, b"y" * 15] if bad == b"x" * 17 else [b"a" * 16, bad]
    with pytest.raises(InvalidCommandError, match="16 bytes"):
        c.fin_many(ids)
