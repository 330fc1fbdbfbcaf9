"""When ``nsqctl archive`` cuts a Parquet file.

Apart from the writer so that the archive command can build its policy from its options
(and check them) without importing pyarrow, which is the ``archive`` extra.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RotationPolicy:
    """When the buffer becomes a file: whichever limit is reached first.

    Buffered messages are in flight on nsqd, so ``max_age`` must stay well under the
    server's msg_timeout (60 s by default) and ``max_rows`` at most half of max-in-flight:
    the other half keeps arriving while the previous file is written and fsynced.
    """

    max_rows: int = 100_000
    max_bytes: int = 64 * 1024 * 1024
    max_age: float = 5.0
