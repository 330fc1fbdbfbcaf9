"""Taking an nsqd out of service before it is stopped, and putting it back
(``nsqctl node drain|restore``, the dashboard's drain action).

The modules, each importing only those listed before it: ``defaults`` (the settings'
defaults, which ``--help`` shows), ``moves`` (a leader move, shared by the planner and the
stop check), ``records`` (the drains recorded in the state directory, read by the
dashboard), ``progress`` (what the node still holds, and an estimate of when it is empty),
``safety`` (whether the node can be stopped: the partitions that would lose their last
in-sync copy), ``original`` (tombstoning on every nsqlookupd), ``redesign`` (moving leaders
off the node), ``restore`` (undoing a drain) and ``run`` (:func:`~.run.plan_drain`,
:func:`~.run.run_drain`, :func:`~.run.refusal`: the drain itself).

This ``__init__`` imports nothing: the CLI reads ``defaults`` and ``records`` to render
``nsqctl node --help`` and ``node list``, and importing ``nsqctl.admin.drain.defaults`` runs
this file first, so anything imported here would be paid by every ``--help``.
"""
