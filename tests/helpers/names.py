"""Names for what a test makes on a shared cluster."""

from __future__ import annotations

import uuid


def unique(prefix: str) -> str:
    """``prefix`` and 8 random hex digits: a topic or channel name no other test, worker
    or earlier run uses (valid on both families while ``prefix`` is under 55 characters)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
