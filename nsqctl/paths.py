"""Where nsqctl keeps state on this machine (sandbox, replay checkpoints, dead letters)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def state_dir() -> Path:
    """The state directory: ``NSQCTL_STATE_DIR``, else the platform's user state dir."""
    env = os.environ.get("NSQCTL_STATE_DIR")
    return Path(env) if env else Path(platformdirs.user_state_dir("nsqctl"))


def unusable_directory(err: OSError) -> str:
    """Why a directory nsqctl keeps files in could not be made or written, for an error
    message: ``mkdir`` answers a file where the directory (or a parent) should be with
    "File exists", which reads as if all were well."""
    if isinstance(err, FileExistsError | NotADirectoryError):
        return "a file is where the directory should be"
    return err.strerror or str(err)
