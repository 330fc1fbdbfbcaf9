"""The dashboard process ``nsqctl dash --serve`` starts for each browser session.

textual-serve runs a shell command per session and relays its screen; that command is
``python -m nsqctl.cli.commands.dash_served``. What it shows comes from the serving process in
one environment variable (the cluster that process resolved from its flags, environment and
profile, so both show the same cluster), never from a command line: nothing of it is
quoted through a shell, and nothing shows in a process title.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

#: The variable the serving process sets for the session processes it starts.
SERVED_ENV = "NSQCTL_DASH_SERVED"


@dataclass(frozen=True)
class ServedDash:
    """What each served session shows, and whether it may act on the cluster."""

    lookupd: list[str]
    nsqd_http: list[str]
    interval: float
    timeout: float
    read_only: str | None  # what made it read-only (DashApp's read_only); None: may act

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls, value: str) -> ServedDash:
        return cls(**json.loads(value))


def main() -> None:
    from nsqctl.admin.drain.records import drain_labels
    from nsqctl.stats.poller import StatsPoller
    from nsqctl.stats.session import StatsSession
    from nsqctl.tui.app import DashApp

    spec = ServedDash.from_env(os.environ[SERVED_ENV])
    poller = StatsPoller(spec.lookupd, spec.nsqd_http, timeout=spec.timeout)
    DashApp(
        StatsSession(poller),
        interval=spec.interval,
        drain_states=drain_labels,
        read_only=spec.read_only,
    ).run()


if __name__ == "__main__":
    main()
