"""The console script's start-up (nsqctl.cli.startup, nsqctl.cli.collector): the collector
is off while the command's modules are imported, then what they made is frozen and
collection resumes; a process that imports nsqctl or runs the app in-process keeps its own
collector."""

from __future__ import annotations

import gc
import json
import subprocess
import sys

from nsqctl.cli import collector

PROBE = """
import gc, json, sys
import nsqctl.cli.app as app
from nsqctl.cli import startup

seen = {}

def probe():
    seen["paused_while_importing"] = not gc.isenabled()
    seen["frozen_before_load"] = gc.get_freeze_count()
    app.LazyCommands(app.COMMANDS)["pub"]  # what the root group does for `nsqctl pub`
    seen["enabled_after_load"] = gc.isenabled()
    seen["frozen_after_load"] = gc.get_freeze_count()
    app.LazyCommands(app.COMMANDS)["tail"]
    seen["frozen_after_second_load"] = gc.get_freeze_count()

app.main = probe  # startup.main runs the app's main: this stands in for it
startup.main()
print(json.dumps(seen))
"""


def test_console_script_pauses_the_collector_until_the_command_is_loaded() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(proc.stdout)
    assert seen["paused_while_importing"] is True
    assert seen["frozen_before_load"] == 0
    assert seen["enabled_after_load"] is True
    # the imports (typer, asyncio, the client core, the pub command) were frozen, once
    assert seen["frozen_after_load"] > 10_000, seen
    assert seen["frozen_after_second_load"] == seen["frozen_after_load"], seen


def test_in_process_use_leaves_the_collector_alone() -> None:
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    collector.imports_done()  # what loading a command calls: nothing was paused here
    assert (gc.isenabled(), gc.get_freeze_count()) == (enabled, frozen)
