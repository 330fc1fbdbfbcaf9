"""The cyclic garbage collector during the ``nsqctl`` process's start-up.

A command's imports (typer, asyncio, the client core, the command's module) allocate a
few hundred thousand objects: functions, classes, the code dataclasses generate. None of
them is garbage, yet each burst of allocations sets off collections that walk all of them
again, a sizeable share of a short command's CPU (bench/README.md, "Start-up"). So the
console script (:mod:`nsqctl.cli.startup`) turns the collector off before it imports the
app, and once the command's module is loaded (:func:`imports_done`, called by the command
loader) everything made so far is frozen (:func:`gc.freeze`): it leaves the collector's
generations for good, so the later collections of a long ``tail`` or of the dashboard do
not walk the modules either, and the collector runs again for what the command allocates.

Only the console script pauses it: a program that imports nsqctl as a library, or runs
the app in-process (tests, ``typer.testing``), keeps its own collector settings, because
:func:`imports_done` does nothing unless :func:`pause_for_imports` paused the collector.
"""

from __future__ import annotations

import gc

_paused = False


def pause_for_imports() -> None:
    """Turn the collector off until :func:`imports_done` (if it is on)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def imports_done() -> None:
    """Freeze what start-up imported and turn the collector back on, if
    :func:`pause_for_imports` turned it off (once; later calls do nothing)."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
