"""``split_batches`` holds an unfinished record as pieces and joins them once a delimiter
ends it; these check it against ``bytes.split`` where that is delicate: a delimiter of
several bytes straddling reads of one byte, long runs without one, blank records."""

from __future__ import annotations

import io
import random

import pytest

from nsqctl.cli.commands.pub_input import split_batches, split_stream


@pytest.mark.parametrize("delimiter", [b"\n", b"\r\n", b"<|>"])
@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 64])
def test_records_are_those_of_bytes_split(delimiter: bytes, chunk: int) -> None:
    rnd = random.Random(f"{delimiter!r}{chunk}")
    for _ in range(200):
        data = bytes(rnd.choice(b"ab\r\n<|>") for _ in range(rnd.randint(0, 120)))
        got = [(r.number, r.body) for r in split_stream(io.BytesIO(data), delimiter, chunk)]
        want = [(i + 1, p) for i, p in enumerate(data.split(delimiter)) if p]
        assert got == want, (data, got, want)


def test_a_long_line_comes_out_whole_and_its_size_is_counted() -> None:
    data = b"short\n" + b"x" * 300_000 + b"\nend"
    batches = list(split_batches(io.BytesIO(data), b"\n", chunk_size=1000))
    assert [b for batch in batches for b in batch.bodies] == [b"short", b"x" * 300_000, b"end"]
    assert sum(batch.size for batch in batches) == len(data)
