"""Text from message bodies made safe for a terminal.

A body is data from whoever published it: written verbatim, an ESC sequence can set the
window title (OSC), clear the screen, move the cursor or recolour what follows, and BEL
rings. Formats meant for reading on a terminal show such bytes as escapes instead; raw and
JSON output stay exact, since a program reads those.
"""

from __future__ import annotations

import re

__all__ = ["escape_controls"]

# C0 controls but newline and tab, DEL, and the C1 controls (U+0080..U+009F: U+009B is a
# one-character CSI on terminals that honour 8-bit controls)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape_controls(text: str) -> str:
    """``text`` with every terminal control character but newline and tab shown as
    ``\\xNN`` (``\\x1b`` for ESC), so it prints as what it is and does nothing."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
