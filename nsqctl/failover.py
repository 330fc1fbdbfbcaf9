"""How long nsqctl's clients wait through a redesign partition's leader failover.

Shared by the producer and the consumer (which must not import each other: ``tail`` does
not load the producer). Elections measured here after kill -9 of a leader (youzan
v0.3.7-HA.1.12.7, 3 nsqd): a writable new leader after ~22 s with replicas 3, ~105 s with
replicas 2 (an emergency migration waits for nsqlookupd's next topic check). The default
covers both with margin; past it, a client gives up with one line.
"""

from __future__ import annotations

#: seconds a publish or a consumer waits for a partition's new leader (0: give up at once)
DEFAULT_FAILOVER_WINDOW = 180.0
