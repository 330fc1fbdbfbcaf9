"""A history replay (``--from-time``/``--from-offset``) refuses every flag it cannot
honour, up front and in one line (exit 2), rather than run without it: an operator who
sees ``--where`` refused trusts the flags that are not."""

from __future__ import annotations

import pytest

from nsqctl.cli.commands.replay import HISTORY_REFUSED, history_refusal

REFUSED = [
    ("--batch-size", "5"),
    ("--checkpoint", "/nonexistent/ckpt"),
    ("--restart", None),
    ("--tasks", "2"),
    ("--engine", "local"),
    ("--spark-master", "local[1]"),
    ("--topic", "other"),
    ("--where", "1 = 1"),
    ("--since", "1700000000"),
]


def test_each_refused_flag_says_what_to_do_instead() -> None:
    for name, (flag, _why, _instead) in HISTORY_REFUSED.items():
        line = history_refusal(["count", name])
        assert line is not None and "\n" not in line, name
        assert line.startswith(f"{flag} applies to archive and nsq_to_file replays only"), line
        assert f"drop {flag}" in line, line
    checkpoint = history_refusal(["checkpoint"])
    assert checkpoint is not None and "--partition P --from-offset N" in checkpoint
    # the flags a history replay honours are not refused
    assert history_refusal(["rate", "count", "grep", "until", "partitions", "dry_run"]) is None


@pytest.mark.spark  # the replay command, history mode too, needs the archive extra
@pytest.mark.parametrize(("flag", "value"), REFUSED)
def test_history_replay_refuses_a_flag_it_does_not_honour(flag: str, value: str | None) -> None:
    from tests.helpers.cli import assert_one_line_error, run_main

    given = [flag] if value is None else [flag, value]
    args = ["replay", "orders", "--to-topic", "copy", "--from-offset", "0", *given]
    # refused before any server is asked: the nsqd given does not exist
    line = assert_one_line_error(run_main(*args, "--nsqd", "127.0.0.1:1"), 2)
    assert line.startswith(f"nsqctl: error: {flag} applies to archive"), line
    assert f"drop {flag}" in line, line
