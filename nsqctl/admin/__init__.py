"""Cluster administration over the servers' HTTP APIs, for both families.

Where each operation goes (taken from nsqadmin and the servers' HTTP handlers):

- Original: topic create registers the topic on every lookupd (as nsqadmin does) and also
  creates it on every nsqd, so it is visible and writable everywhere at once. Delete finds
  the topic's producers *first*, then deletes on every lookupd, then on those nsqds
  (nsqadmin's order). Pause/unpause/empty go to every nsqd that has the topic; channel
  create/delete also go to every lookupd.
- Redesign: topic create/delete only on the lookupd *leader* (``partition=**`` deletes every
  partition); channel operations on each partition's leader nsqd with ``partition=``. Its
  nsqd has no topic pause/empty. skip/unskip/setoffset exist only there.

The planners (``plan_*``) are pure: they turn a :class:`Placement` into HTTP requests, so
both families' URLs are unit-tested without servers. :func:`execute` runs the requests in
stages and reports per node.

The package is layered, each module importing only from those above it: ``base`` (errors,
header, timeout), ``requests`` (requests, results, :func:`execute`), ``settle`` (a request
sent again while nsqlookupd turns it away in passing), ``leader`` (what the lookupds say
about the cluster), ``placement`` (where a topic lives), ``planners`` (pure),
``versions``, ``offsets`` (a setoffset checked on every partition before any moves),
``preflight`` (what every front end asks before a plan is sent, :func:`check_plan`),
``operations``, ``listing``, ``describe``, ``blast`` (what a destructive command would
lose), ``guard`` (the one confirmation rule, :func:`confirmation`, for the CLI's prompt
and any other front end) and ``preview`` (a plan in words, for prompts and dry runs);
the redesign's partition operations (expand, move, meta update) are the package
:mod:`nsqctl.admin.partitions`. Everything public is re-exported here;
``NUDGE_INTERVAL`` lives in :mod:`nsqctl.admin.operations` (patch it there).
"""

from __future__ import annotations

from nsqctl.admin.base import (
    NSQ_V1,
    TIMEOUT,
    FamilyUnsupportedError,
    topic_not_found,
)
from nsqctl.admin.blast import (
    DEFAULT_CONFIRM_ABOVE,
    MEASURED,
    BlastRadius,
    Loss,
    measure,
    measure_plan,
    nodes_at_risk,
)
from nsqctl.admin.describe import describe_topic, lookup_from_nsqds, lookup_topic
from nsqctl.admin.guard import Confirmation, confirmation
from nsqctl.admin.leader import find_leader, lookupd_leader
from nsqctl.admin.listing import Listing, list_channels, list_topics
from nsqctl.admin.operations import (
    TopicCreated,
    create_topic,
    create_topic_async,
    prepare,
    run_action,
    run_plan,
    run_sync,
)
from nsqctl.admin.partitions import (
    MetaChange,
    NotRedesignError,
    NsqdNode,
    PartitionPlan,
    PartitionState,
    TopicState,
    apply_plan,
    expand_partitions,
    move_partition,
    plan_expand,
    plan_move,
    plan_update,
    registered_nsqds,
    update_topic_meta,
)
from nsqctl.admin.placement import (
    NsqdStats,
    Placement,
    locate_topic,
    placement_from_leaders,
    placement_from_stats,
    placement_from_topology,
)
from nsqctl.admin.planners import (
    CHANNEL_ACTIONS,
    MAX_PARTITIONS,
    MAX_REPLICAS,
    REDESIGN_ONLY,
    TOPIC_ACTIONS,
    check_create_options,
    check_node_count,
    parse_offset,
    plan_channel_action,
    plan_topic_action,
    plan_topic_create,
    plan_topic_delete,
    select_nodes,
)
from nsqctl.admin.preflight import action_subject, check_plan
from nsqctl.admin.preview import describe_plan
from nsqctl.admin.requests import AdminReport, AdminRequest, Node, NodeResult, Outcome, execute
from nsqctl.admin.versions import ServerVersion, family_of, server_versions
from nsqctl.errors import AdminError, TopicNotFoundError
from nsqctl.protocol.raw_message import Family

__all__ = [
    "CHANNEL_ACTIONS",
    "DEFAULT_CONFIRM_ABOVE",
    "MAX_PARTITIONS",
    "MAX_REPLICAS",
    "MEASURED",
    "NSQ_V1",
    "REDESIGN_ONLY",
    "TIMEOUT",
    "TOPIC_ACTIONS",
    "AdminError",
    "AdminReport",
    "AdminRequest",
    "BlastRadius",
    "Confirmation",
    "Family",
    "FamilyUnsupportedError",
    "Listing",
    "Loss",
    "MetaChange",
    "Node",
    "NodeResult",
    "NotRedesignError",
    "NsqdNode",
    "NsqdStats",
    "Outcome",
    "PartitionPlan",
    "PartitionState",
    "Placement",
    "ServerVersion",
    "TopicCreated",
    "TopicNotFoundError",
    "TopicState",
    "action_subject",
    "apply_plan",
    "check_create_options",
    "check_node_count",
    "check_plan",
    "confirmation",
    "create_topic",
    "create_topic_async",
    "describe_plan",
    "describe_topic",
    "execute",
    "expand_partitions",
    "family_of",
    "find_leader",
    "list_channels",
    "list_topics",
    "locate_topic",
    "lookup_from_nsqds",
    "lookup_topic",
    "lookupd_leader",
    "measure",
    "measure_plan",
    "move_partition",
    "nodes_at_risk",
    "parse_offset",
    "placement_from_leaders",
    "placement_from_stats",
    "placement_from_topology",
    "plan_channel_action",
    "plan_expand",
    "plan_move",
    "plan_topic_action",
    "plan_topic_create",
    "plan_topic_delete",
    "plan_update",
    "prepare",
    "registered_nsqds",
    "run_action",
    "run_plan",
    "run_sync",
    "select_nodes",
    "server_versions",
    "topic_not_found",
    "update_topic_meta",
]
