"""The redesign's partition operations, sent to the nsqlookupd leader: expand a topic's
partitions, move a partition's leader or one of its replicas, change a topic's dynamic
parameters. Each is planned and checked first (the CLI shows the plan and asks), then
sent, then waited on until the change is visible, because the server finishes part of
each on its own schedule.

What youzan v0.3.7-HA.1.12.7 does (its nsqlookupd/http.go and consistence/); the times
seen on a 3-nsqd cluster are in bench/README.md (Server timings):

- An expand and a move are refused with "the cluster is unstable" until nsqlookupd's last
  full topic check passed (a meta update is taken regardless); the periodic check runs
  every 60 s, and a topic created or expanded since then leaves the cluster unstable until
  it does. A partition with no live copy fails every check until one of its nsqds is
  back, so while one exists an expand or a move is refused before anything is sent. A
  meta update that changes nothing triggers a full check at once (dropped within 6 s of
  the previous), so we send one every ``NUDGE_INTERVAL`` while refused, and the
  operation goes through soon after.
- ``/topic/partition/expand`` only adds partitions ("can not be reduced"; the same count
  is accepted and does nothing). The new partitions become writable in the next topic
  check, like a new topic: re-sending the expand is idempotent and triggers one, so
  :func:`nsqctl.admin.operations.wait_partitions_writable` (create's wait) is reused as
  is. New partitions have no channels, and a channel created later starts at the end:
  the topic's channels are created on them as soon as their leaders accept, before the
  expand is reported done (:mod:`nsqctl.admin.partitions.carry` says what remains).
- ``/topic/partition/move`` takes node ids (``ip:rpc_port:tcp_port:id``), which operators
  never see: we map nsqd HTTP addresses to them (``/config/rpc_port`` and ``/config/id``
  of each nsqd). The request blocks while the target catches up (server limit 10 min; it
  checks once a second, so a move to a node outside the ISR takes at least that), then
  moves leadership or drops the source from the ISR. A leader move is an election that
  does not take ``move_to`` into account: the new leader
  is the in-sync copy, the leader aside, with the newest commit and the least leader load
  factor (``/cluster/stats``; nsqlookupd caches each nsqd's figures for a minute). So we
  move leadership on from each copy it elects until the target leads; with replicas 3 on
  3 nsqd the old leader stays in the ISR, and a target loaded more than both other copies
  is never elected (1 → 2 → 1): the move fails once an election comes back to a copy that
  already led, unless the target ties with it (youzan takes the first least load factor
  of a Go map, so a tie is a coin toss): then it moves on again, a bounded number of
  times. A move accepted but not done (that, or not settled within the wait) is a
  failed result, not a warning.
- ``/topic/meta/update`` takes ``replicator`` (1-5), ``syncdisk`` (≤ 4000),
  ``retention`` (days, ≤ 60), ``upgradeext=true`` (one way, writes paused meanwhile) and
  ``disable_channel_auto_create``. Fewer replicas take effect in the next topic check
  (which the update triggers); a missing replica is added only after nsqlookupd's migrate
  interval, 10 min, or 10 s when at most half the replicas are in sync. ``syncdisk`` and
  ``retention`` are stored in etcd and not readable over HTTP, so they are reported as
  accepted, not as seen.
"""

from nsqctl.admin.partitions.apply import (
    apply_plan,
    expand_partitions,
    move_partition,
    update_topic_meta,
)
from nsqctl.admin.partitions.plans import (
    MetaChange,
    PartitionPlan,
    plan_expand,
    plan_move,
    plan_update,
)
from nsqctl.admin.partitions.state import (
    NotRedesignError,
    NsqdNode,
    PartitionState,
    TopicState,
    leader_load_factors,
    redesign_leader,
    registered_nsqds,
    topic_state,
)

__all__ = [
    "MetaChange",
    "NotRedesignError",
    "NsqdNode",
    "PartitionPlan",
    "PartitionState",
    "TopicState",
    "apply_plan",
    "expand_partitions",
    "leader_load_factors",
    "move_partition",
    "plan_expand",
    "plan_move",
    "plan_update",
    "redesign_leader",
    "registered_nsqds",
    "topic_state",
    "update_topic_meta",
]
