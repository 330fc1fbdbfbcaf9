"""One module per ``nsqctl`` command, named after it (``dead-letter`` is ``dead_letter``).

A ``<command>_<part>`` module is a part only that command uses (``pub_input``,
``tail_stop``, ``topic_partitions``, ``dash_serve``...). What several commands share is one
level up, in :mod:`nsqctl.cli` (options, completion, error wording, numbers) and
:mod:`nsqctl.cli.output` (how messages and progress are printed). :mod:`nsqctl.cli.app`
imports a command's module only when that command runs, so this ``__init__`` imports
nothing.
"""
