"""``nsqctl trace``'s timeline reads at 80 columns: addresses, ids and key=value pairs are
never cut or split over lines, and archived files are shown relative to their archive."""

from __future__ import annotations

from nsqctl.cli.trace import render_timeline

ARCHIVE = "/data/nsq-archive"
PARQUET = "topic=orders/partition=0/date=2026-11-21/part-00000-1f2e3d4c5b6a7988-c000.parquet"
EVENTS = [
    {
        "at": "2026-11-21T10:00:00.123+00:00",
        "event": "published",
        "where": "127.0.0.1:48812 orders_with_a_rather_long_topic_name partition 3",
        "detail": {"offset": 0, "size": 5, "internal_id": 123456789012, "trace_id": 2**63 - 1},
    },
    {
        "at": "2026-11-21T10:00:00.200+00:00",
        "event": "delivered, FIN",
        "where": "orders/billing_and_invoicing from 127.0.0.1:48812 to 127.0.0.1:51234",
        "detail": {"attempts": 1, "partition": 3, "offset": 0},
    },
    {
        "at": "2026-11-21T10:00:01.500+00:00",
        "event": "archived",
        "where": f"file://{ARCHIVE}/{PARQUET}",
        "detail": {"channel": "archiver", "nsqd": "127.0.0.1:48812", "trace_id": 2**63 - 1},
    },
]


def test_timeline_at_80_columns() -> None:
    lines = render_timeline("trace id 9223372036854775807", EVENTS, [ARCHIVE], width=80)
    text = "\n".join(lines)
    for value in ("127.0.0.1:48812", "127.0.0.1:51234", f"trace_id={2**63 - 1}", PARQUET):
        assert any(value in line for line in lines), (value, text)
    assert ARCHIVE not in text  # relative to the archive it came from
    for line in lines:
        # only a single unbreakable value (the archived file) may be longer than 80
        assert len(line) <= 80 or line.split()[-1] == PARQUET, line
    assert lines[1] == "2026-11-21 10:00:00.123  published"


def test_unknown_where_is_kept_as_is() -> None:
    event = dict(EVENTS[2], where="s3a://bucket/x.parquet")
    lines = render_timeline("x", [event], [ARCHIVE])
    assert "    where   s3a://bucket/x.parquet" in lines
