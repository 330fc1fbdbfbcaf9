"""``nsqctl trace``'s timeline reads at 80 columns: the timeline first, a line per event,
then the details, where addresses, ids and key=value pairs are never cut or split over
lines and an archived file is shown as its archive, directory and file name."""

from __future__ import annotations

from nsqctl.cli.commands.trace import render_trace

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
    lines = render_trace("trace id 9223372036854775807", EVENTS, [ARCHIVE], width=80)
    text = "\n".join(lines)
    assert all(len(line) <= 80 for line in lines), text
    assert lines[0] == "timeline of trace id 9223372036854775807 (UTC, 2026-11-21)"
    assert lines[1].startswith(" 1  10:00:00.123  published ")
    assert lines[3].startswith(" 3  10:00:01.500  archived ")
    details = lines[lines.index("details") :]
    for value in ("127.0.0.1:48812", "127.0.0.1:51234", f"trace_id={2**63 - 1}"):
        assert any(value in line for line in details), (value, text)
    file_name = PARQUET.rpartition("/")[2]
    assert f"    archive file://{ARCHIVE}" in details
    assert f"    dir     {PARQUET.rpartition('/')[0]}" in details
    assert f"    file    {file_name}" in details


def test_unknown_where_is_kept_as_is() -> None:
    event = dict(EVENTS[2], where="s3a://bucket/x.parquet")
    lines = render_trace("x", [event], [ARCHIVE])
    assert "    file    x.parquet" in lines
    assert "    dir     s3a://bucket" in lines
