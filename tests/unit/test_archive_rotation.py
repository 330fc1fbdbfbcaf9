"""``nsqctl archive``'s rotation policy, built from its options before anything connects."""

from __future__ import annotations

from nsqctl.cli.commands.archive import rotation_policy


def test_rotation_cuts_at_half_the_window_unless_rows_are_given() -> None:
    policy = rotation_policy(5000, 0, 64.0, 5.0)
    assert (policy.max_rows, policy.max_bytes, policy.max_age) == (2500, 64 * 1024 * 1024, 5.0)
    assert rotation_policy(5000, 10, 1.0, 1.0).max_rows == 10
    small = rotation_policy(1, 0, 0.5, 0.25)
    assert (small.max_rows, small.max_bytes, small.max_age) == (1, 512 * 1024, 0.25)  # never 0 rows
