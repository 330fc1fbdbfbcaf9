"""Options every cluster command shares, and how they resolve (flags beat environment)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import typer

from nsqctl.errors import ConfigError

LookupdOption = typer.Option(
    None, "--lookupd", help="nsqlookupd HTTP address HOST:PORT (repeatable; env NSQCTL_LOOKUPD)."
)
NsqdOption = typer.Option(
    None, "--nsqd", help="nsqd TCP address HOST:PORT (repeatable; env NSQCTL_NSQD)."
)


@dataclass(frozen=True)
class ClusterSelection:
    lookupd: list[str]
    nsqd: list[str]

    def require(self) -> ClusterSelection:
        if not self.lookupd and not self.nsqd:
            raise ConfigError(
                "no cluster given: pass --lookupd HOST:PORT or --nsqd HOST:PORT, or run "
                '`eval "$(nsqctl sandbox env)"`'
            )
        return self


def _split(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for value in values or []:
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return out


def resolve_cluster(lookupd: list[str] | None, nsqd: list[str] | None) -> ClusterSelection:
    """Flags win; otherwise NSQCTL_LOOKUPD / NSQCTL_NSQD (comma-separated)."""
    lk, nd = _split(lookupd), _split(nsqd)
    if not lk and not nd:
        lk = _split([os.environ.get("NSQCTL_LOOKUPD", "")])
        nd = _split([os.environ.get("NSQCTL_NSQD", "")])
    return ClusterSelection(lk, nd).require()
