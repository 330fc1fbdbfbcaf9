"""Long admin jobs started from the dashboard (a node drain, a restore), each run in a
thread of its own with its own event loop.

A drain runs for minutes and builds a stats view of the whole cluster every second (the
redesign's needs every topic's ISR); on the app's loop that work would stall key handling
on a big cluster, so it runs beside it, as the app's poll builds its views in a thread.
The job keeps what the screen shows (the latest progress line, the last lines said, the
outcome) behind a lock, and the screens read it on a timer: nothing crosses back into
the app's loop from the thread. Cancelling cancels the library call's task inside the
thread's loop, so the library records how far it got (a drain: "gave up, interrupted"),
exactly as an interrupted ``nsqctl node drain`` does; leaving the app cancels every job
that still runs and waits for it to record that.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Literal

from textual.app import App

from nsqctl.errors import NsqctlError

JobKind = Literal["drain", "restore"]
KEEP_LINES = 6
"""Lines said by the library (each move, each step) kept for the node screen."""
STOP_WAIT = 15.0
"""Seconds leaving the app waits for a cancelled job to record where it stopped."""


class NodeJob:
    """One drain or restore of one nsqd, run by :meth:`run` in a worker thread."""

    def __init__(self, kind: JobKind, node: str) -> None:
        self.kind = kind
        self.node = node
        self._lock = threading.Lock()
        self._lines: deque[str] = deque(maxlen=KEEP_LINES)
        self._progress = ""
        self._outcome = ""
        self.failed = False
        self.cancelled = False
        self.reported = False
        """The app told the operator how the job ended (once)."""
        self.finished = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[str] | None = None

    # -- written from the job's thread
    def say(self, line: str) -> None:
        with self._lock:
            self._lines.append(line)

    def set_progress(self, line: str) -> None:
        with self._lock:
            self._progress = line

    # -- read from the app
    @property
    def running(self) -> bool:
        return not self.finished.is_set()

    def snapshot(self) -> tuple[str, list[str], str]:
        """The latest progress line, the lines said (oldest first) and the outcome ("" while
        it runs)."""
        with self._lock:
            return self._progress, list(self._lines), self._outcome

    def cancel(self) -> None:
        """Cancel the library call where it is (it records that itself); safe from any
        thread, before the call started too."""
        self.cancelled = True
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            loop.call_soon_threadsafe(task.cancel)

    def run(self, work: Callable[[NodeJob], Awaitable[str]], cancelled: str) -> None:
        """The thread's body: run ``work`` in a new event loop; its answer (or the error,
        or ``cancelled`` once cancelled) is the outcome."""

        async def main() -> str:
            self._loop = asyncio.get_running_loop()
            self._task = asyncio.current_task()
            if self.cancelled:  # cancelled before the loop was up
                raise asyncio.CancelledError
            return await work(self)

        outcome, failed = cancelled, True
        try:
            outcome, failed = asyncio.run(main()), False
        except asyncio.CancelledError:
            pass
        except NsqctlError as exc:
            outcome = str(exc)
        except Exception as exc:  # a bug must end the job visibly, not hang it as running
            outcome = f"{self.kind} of {self.node} failed: {type(exc).__name__}: {exc}"
        with self._lock:
            self._outcome = outcome
        self.failed = failed or self.failed
        self.finished.set()


class NodeJobs:
    """The jobs of one app, one per nsqd at a time; the app reports each one's end."""

    def __init__(self) -> None:
        self._jobs: dict[str, NodeJob] = {}
        self._ticking = False

    def get(self, node: str) -> NodeJob | None:
        return self._jobs.get(node)

    def running(self, node: str) -> NodeJob | None:
        job = self._jobs.get(node)
        return job if job is not None and job.running else None

    def __iter__(self) -> Iterator[NodeJob]:
        return iter(list(self._jobs.values()))

    def start(
        self,
        app: App[None],
        job: NodeJob,
        work: Callable[[NodeJob], Awaitable[str]],
        cancelled: str,
    ) -> None:
        """Run ``work`` for ``job`` in a thread worker; the app says how it ended."""
        self._jobs[job.node] = job
        app.run_worker(
            lambda: job.run(work, cancelled),
            name=f"{job.kind}-{job.node}",
            group="node-jobs",
            thread=True,
            exit_on_error=False,
        )
        if not self._ticking:
            self._ticking = True
            app.set_interval(0.5, lambda: self.report(app))

    def report(self, app: App[None]) -> None:
        """Tell the operator, once, how each finished job ended (whatever screen is up)."""
        for job in self:
            if job.running or job.reported:
                continue
            job.reported = True
            _, _, outcome = job.snapshot()
            app.notify(outcome, severity="error" if job.failed else "information", timeout=10)

    async def stop(self) -> None:
        """Cancel every job still running and wait (bounded) for each to record it."""
        running = [job for job in self if job.running]
        for job in running:
            job.cancel()
        for job in running:
            await asyncio.to_thread(job.finished.wait, STOP_WAIT)
