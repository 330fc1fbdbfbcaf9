"""``nsqctl dash``'s flags that contradict each other or apply to nothing are refused with
one line and exit 2 before anything is served or drawn: a dashboard that quietly ignores a
flag leaves the operator believing something that is not so (that browsers can act, that
a token guards the terminal). No server is needed: refused before any poll.
"""

from __future__ import annotations

from tests.helpers.cli import assert_one_line_error, clean_env, run_cli, run_main

NODE = ("--nsqd-http", "127.0.0.1:4151")
SERVE_ACTING = ("dash", "--serve", "18099", "--allow-actions", *NODE)


def test_read_only_with_allow_actions_is_refused_saying_read_only_wins() -> None:
    line = assert_one_line_error(run_main("--read-only", *SERVE_ACTING), 2)
    assert "read-only wins" in line, line
    assert "drop --allow-actions" in line and "drop --read-only" in line, line
    # read-only from the environment: the way out names it
    proc = run_cli(list(SERVE_ACTING), env=clean_env({"NSQCTL_READ_ONLY": "1"}))
    line = assert_one_line_error(proc, 2)
    assert "read-only wins" in line and "unset NSQCTL_READ_ONLY" in line, line


def test_token_without_serve_is_refused() -> None:
    line = assert_one_line_error(run_main("dash", "--token", "t" * 32, *NODE), 2)
    assert "--token applies only with --serve" in line, line
