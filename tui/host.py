"""What a screen's own actions (drain, restore, leader move, peek) need from the app: the
latest view, the read-only setting, the node jobs and how to connect to an nsqd over TCP
(the TLS, AUTH and compression the dashboard was started with, and its nsqd TCP
addresses). Screens know the app only through this protocol, so they do not import the
app (which imports them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from textual.app import App

from nsqctl.stats.view import ClusterView
from nsqctl.tui.actions import read_only_refusal
from nsqctl.tui.nodejobs import NodeJobs

if TYPE_CHECKING:
    from nsqctl.connection import ConnectionConfig


@runtime_checkable
class ActionHost(Protocol):
    view: ClusterView | None
    read_only: str | None
    node_jobs: NodeJobs
    connection: ConnectionConfig | None
    """TLS, AUTH and compression for what connects to an nsqd over TCP (a borrow's
    consumer); None: the library's defaults (plaintext, no AUTH)."""
    nsqd_tcp: tuple[str, ...]
    """The nsqd TCP addresses the dashboard was given (what finds them without a lookupd)."""
    output_buffer: str
    """The output-buffer setting (``auto``, ``none`` or a duration) a borrow's consumer
    applies to its channel (:meth:`~nsqctl.connection.ConnectionConfig.for_consumer`)."""


def host_of(app: App[None]) -> ActionHost | None:
    return app if isinstance(app, ActionHost) else None


def refused(app: App[None], host: ActionHost | None, what: str) -> bool:
    """Whether ``what`` may not be done now (read-only, or no poll yet), told to the
    operator with a notification; nothing is asked or sent then."""
    if host is None:
        return True
    if host.read_only is not None:
        app.notify(read_only_refusal(host.read_only, what), severity="warning")
        return True
    if host.view is None:
        app.notify(f"{what}: no poll has landed yet", severity="warning")
        return True
    return False


def lookupds(host: ActionHost) -> tuple[str, ...]:
    """The nsqlookupds the dashboard polls (what a drain, a move or a borrow asks)."""
    return tuple(lk.address for lk in host.view.lookupds) if host.view else ()
