"""CPU cost of the sans-IO decoders (frames and messages), for regressions.

    python -m bench.bench_decode

Prints frames/s and messages/s; compare runs on the same machine only.
"""

from __future__ import annotations

import time

from nsqctl.protocol.frames import FrameDecoder, encode_frame
from nsqctl.protocol.raw_message import MessageLayout, RawMessage, decode_message, encode_message


def _rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s ({seconds:.3f}s CPU for {count:,})"


def main() -> None:
    frame = encode_frame(2, b"\x00" * 26 + b"x" * 100)
    chunk = frame * 1000
    decoder = FrameDecoder()
    start = time.process_time()
    count = sum(len(decoder.feed(chunk)) for _ in range(1000))
    print("frames  ", _rate(count, time.process_time() - start))

    for family in ("original", "redesign"):
        layout = MessageLayout(family=family)
        msg_id = b"0123456789abcdef" if family == "original" else bytes(16)
        raw = RawMessage(
            timestamp=1,
            attempts=1,
            id=msg_id,
            body=b"x" * 100,
            internal_id=None if family == "original" else 0,
            trace_id=None if family == "original" else 0,
        )
        data = encode_message(raw, layout)
        start = time.process_time()
        for _ in range(1_000_000):
            decode_message(data, layout)
        print(f"{family:9}", _rate(1_000_000, time.process_time() - start))


if __name__ == "__main__":
    main()
