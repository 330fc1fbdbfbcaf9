"""The library's warnings as a command's own stderr lines (``nsqctl tail: ...``).

The library only logs (logger ``nsqctl``); what a warning looks like on a terminal is the
command's to say. Without a handler Python's last-resort handler printed the bare
message, so a lost connection or a handshake timeout was the one line of a command's
output without its prefix. With ``NSQCTL_LOG`` set the operator asked for the full log
records (time, level, logger), and those are printed instead, not as well. A record that
carries a traceback (a bug the library caught and logged) shows it only when the command
runs with ``tracebacks`` (``--debug``): otherwise the one line says what failed.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

__all__ = ["CommandWarnings", "command_warnings"]


class CommandWarnings(logging.Handler):
    """Writes each warning (or worse) as one ``nsqctl COMMAND: message`` line on stderr."""

    def __init__(self, command: str, *, tracebacks: bool = False) -> None:
        super().__init__(logging.WARNING)
        self.prefix = f"nsqctl {command}: "
        self.tracebacks = tracebacks

    def emit(self, record: logging.LogRecord) -> None:
        stream = sys.stderr  # looked up now: a test runner swaps it
        if stream is None:  # started with stderr closed: nowhere to say it
            return
        try:
            # One line each: a record's text may carry a server's multi-line reply.
            text = " ".join(record.getMessage().split("\n"))
            stream.write(f"{self.prefix}{text}\n")
            if self.tracebacks and record.exc_info:
                stream.write(logging.Formatter().formatException(record.exc_info) + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def command_warnings(command: str, *, tracebacks: bool = False) -> Iterator[None]:
    """Within the block, the library's warnings go to stderr as ``command``'s lines (with
    the traceback a record carries when ``tracebacks``), unless ``NSQCTL_LOG`` already
    gave the ``nsqctl`` logger a handler."""
    logger = logging.getLogger("nsqctl")
    if logger.handlers:
        yield
        return
    handler = CommandWarnings(command, tracebacks=tracebacks)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
