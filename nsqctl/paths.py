"""Where nsqctl keeps state on this machine (sandbox, replay checkpoints, dead letters)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def state_dir() -> Path:
    """The state directory: ``NSQCTL_STATE_DIR``, else the platform's user state dir."""
    env = os.environ.get("NSQCTL_STATE_DIR")
    return Path(env) if env else Path(platformdirs.user_state_dir("nsqctl"))
