"""A progress display on stderr that appears only for inputs taking over a second.

Off when stderr is not a terminal (pipes, CI logs) or with ``--quiet``. Counting is a
couple of integer additions per message; the clock is read every 1024 messages.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich loads only when a bar is shown, not on every `nsqctl pub`
    from rich.progress import Progress, TaskID

SHOW_AFTER = 1.0  # seconds


class LazyProgress:
    def __init__(self, label: str, total_bytes: int | None, *, enabled: bool = True) -> None:
        self.label = label
        self.total = total_bytes
        self.enabled = enabled and sys.stderr.isatty()
        self.quiet = not enabled
        self.count = 0
        self.bytes = 0
        self.started_at = time.monotonic()
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def advance(self, nbytes: int) -> None:
        self.count += 1
        self.bytes += nbytes
        if self.enabled and not self.count & 1023:
            self._tick()

    def _tick(self) -> None:
        if self._progress is None:
            if time.monotonic() - self.started_at < SHOW_AFTER:
                return
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TransferSpeedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TextColumn("{task.fields[count]} msgs"),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._task = self._progress.add_task(self.label, total=self.total, count=0)
            self._progress.start()
        assert self._task is not None
        self._progress.update(self._task, completed=self.bytes, count=self.count)

    def note(self, text: str) -> None:
        """A line on stderr (above the bar when one is shown); shown even when stderr is
        not a terminal, unless the display was turned off (``--quiet``)."""
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        elif self.quiet is False:
            print(text, file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
