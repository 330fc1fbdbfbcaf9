"""Servers started by tests die with the test process, even on kill -9."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from nsqctl.servers import process
from tests.helpers.wait import eventually

SCRIPT = """
import sys, time
from pathlib import Path
from nsqctl.servers import cluster, process
process.DIE_WITH_PARENT = True
c = cluster.start("original", Path(sys.argv[1]), nsqd=1, lookupd=1, bin_dir=Path(sys.argv[2]))
print(" ".join(f"{n.pid}={n.argv[0]}" for n in c.nodes), flush=True)
time.sleep(600)
"""


def test_fixture_servers_die_when_the_test_process_is_killed(
    tmp_path: Path, original_bins: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "c"), str(original_bins)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        nodes = {int(pid): exe for pid, exe in (w.split("=", 1) for w in line.split())}
        assert len(nodes) == 2 and all(process.pid_runs(p, e) for p, e in nodes.items())
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with contextlib.suppress(AssertionError):  # the survivors are killed and named below
        eventually(
            lambda: not any(process.pid_runs(p, e) for p, e in nodes.items()),
            20,
            "the servers to exit",
            step=0.05,
        )
    alive = [p for p, e in nodes.items() if process.pid_runs(p, e)]
    for p in alive:  # never leave them behind, even when the assertion fails
        os.kill(p, signal.SIGKILL)
    assert not alive, f"servers {alive} outlived the killed test process"
