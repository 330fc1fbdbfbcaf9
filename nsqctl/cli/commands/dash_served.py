"""The dashboard process ``nsqctl dash --serve`` starts for each browser session.

textual-serve runs a shell command per session and relays its screen; that command is
``python -m nsqctl.cli.commands.dash_served``. What it shows comes from the serving process in
one environment variable (the cluster that process resolved from its flags, environment and
profile, so both show the same cluster, and connect to it alike: TLS, compression), never
from a command line: nothing of it is quoted through a shell, and nothing shows in a
process title. The AUTH secret is not in it: the serving process puts it in the
environment variable the secret is always read from (``NSQCTL_AUTH_SECRET``), which the
sessions inherit as they inherit the rest of its environment. Nor is an encrypted client
key's passphrase: it travels the same way, in :data:`KEY_PASSWORD_ENV`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsqctl.cli.flags import ClusterSelection
    from nsqctl.connection import ConnectionConfig

#: The variable the serving process sets for the session processes it starts.
SERVED_ENV = "NSQCTL_DASH_SERVED"
#: The passphrase of the serving process's encrypted TLS client key, for its sessions
#: (the passphrase file it was read from may be gone, or readable only before a chdir).
KEY_PASSWORD_ENV = "NSQCTL_DASH_SERVED_TLS_KEY_PASSWORD"


@dataclass(frozen=True)
class ServedDash:
    """What each served session shows, and whether it may act on the cluster."""

    lookupd: list[str]
    nsqd_http: list[str]
    interval: float
    timeout: float
    read_only: str | None  # what made it read-only (DashApp's read_only); None: may act
    nsqd: list[str] = field(default_factory=list)  # TCP addresses (a borrow without lookupd)
    tls: dict[str, Any] | None = None  # the TLS settings' fields but the key's passphrase
    compression: str = "none"
    output_buffer: str = "auto"  # a borrow's output buffering (ConnectionConfig.for_consumer)

    @classmethod
    def of(
        cls,
        sel: ClusterSelection,
        interval: float,
        timeout: float,
        read_only: str | None,
    ) -> ServedDash:
        """What the sessions of ``sel``'s dashboard need; the AUTH secret, when there is
        one, goes into this process's environment for them to inherit (see the module
        doc), and so does the TLS key's passphrase. The TLS files are checked here, so a
        bad one stops the server at start."""
        from nsqctl.secrets import AUTH_SECRET_ENV

        sel.connection_config()
        if sel.auth_secret is not None:
            os.environb[AUTH_SECRET_ENV.encode()] = sel.auth_secret.reveal()
        tls = None
        if sel.tls is not None:
            tls = {f.name: getattr(sel.tls, f.name) for f in fields(sel.tls)}
            password = tls.pop("key_password")
            if password is not None:
                os.environb[KEY_PASSWORD_ENV.encode()] = password.reveal()
        if tls is None or password is None:  # none inherited from whoever started this one
            os.environ.pop(KEY_PASSWORD_ENV, None)
        return cls(
            list(sel.lookupd),
            list(sel.nsqd_http),
            interval,
            timeout,
            read_only,
            nsqd=list(sel.nsqd),
            tls=tls,
            compression=sel.compression,
            output_buffer=sel.output_buffer,
        )

    def connection(self) -> ConnectionConfig:
        """How a session connects to an nsqd over TCP (a borrow): the serving process's
        TLS, compression and (inherited through the environment) AUTH secret and TLS
        key passphrase."""
        from nsqctl.connection import ConnectionConfig, TLSSettings
        from nsqctl.secrets import Secret, resolve_auth_secret

        tls = None
        if self.tls is not None:
            password = os.environb.get(KEY_PASSWORD_ENV.encode())
            key_password = None if password is None else Secret(password, "the serving dash")
            tls = TLSSettings(**self.tls, key_password=key_password)
        return ConnectionConfig(
            tls=tls,
            auth_secret=resolve_auth_secret(),
            compression=self.compression,
        )

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, value: str) -> ServedDash:
        return cls(**json.loads(value))


def main() -> None:
    from nsqctl.admin.drain.records import drain_labels
    from nsqctl.stats.poller import StatsPoller
    from nsqctl.stats.sources import StatsSession
    from nsqctl.tui.app import DashApp

    spec = ServedDash.from_env(os.environ[SERVED_ENV])
    poller = StatsPoller(spec.lookupd, spec.nsqd_http, timeout=spec.timeout)
    DashApp(
        StatsSession(poller),
        interval=spec.interval,
        drain_states=drain_labels,
        read_only=spec.read_only,
        connection=spec.connection(),
        nsqd_tcp=spec.nsqd,
        output_buffer=spec.output_buffer,
    ).run()


if __name__ == "__main__":
    main()
