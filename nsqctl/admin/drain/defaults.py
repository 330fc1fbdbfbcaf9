"""The drain's default settings, apart from :mod:`.run` so that the CLI can
show them in ``--help`` without loading the stats model (start-up time)."""

DEFAULT_TIMEOUT = 600.0
"""Seconds a drain waits for the node to empty before it gives up (exit 1)."""
DEFAULT_INTERVAL = 1.0
"""Seconds between two looks at the node."""
DEFAULT_RESTORE_WAIT = 120.0
"""Seconds a restore waits for the node to take traffic again."""
