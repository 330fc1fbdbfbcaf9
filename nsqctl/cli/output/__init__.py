"""How commands print: messages in ``tail``'s and ``peek``'s formats (``messages``,
``template``), text made safe for a terminal (``terminal``), whole writes to a file
descriptor (``fd``), FIN timing for output read through a pipe (``pipe_acks``) and the
progress line (``lazy_progress``). Imported by the commands in :mod:`nsqctl.cli.commands`;
this ``__init__`` imports nothing, so a command loads only the parts it prints with.
"""
