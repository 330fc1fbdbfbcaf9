"""Go module sources given locally, for building the servers without the module proxy.

Some networks cannot reach the Go module proxy, or reach one that refuses a module (ours
refuses ``github.com/youzan/nsq`` and ``github.com/absolute8511/bolt``). An operator then
gives nsqctl a folder of module sources: source tarballs (``.tar.gz``, ``.tgz``, ``.tar``)
that unpack to one top-level directory holding the module's ``go.mod``, or such
directories themselves. Each is identified by the ``module`` line of that go.mod, never by
its file name. A ``SHA256SUMS`` file beside them, if present, is checked first.

The build then points the wrapper module at them with ``replace`` directives; every other
module still comes from the proxy (or the module cache).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
from dataclasses import dataclass
from pathlib import Path

from nsqctl.errors import ServerSetupError

ENV = "NSQCTL_GO_MODULE_SOURCES"
TARBALL_SUFFIXES = (".tar.gz", ".tgz", ".tar")
_MODULE_LINE = re.compile(rb"^\s*module\s+\"?([^\s\"]+)\"?\s*$", re.M)


@dataclass(frozen=True)
class ModuleSource:
    """One module found in the sources folder."""

    module: str
    origin: Path  # the tarball or directory it came from
    digest: str  # sha256 of the tarball, or "dir" for a directory

    def describe(self) -> str:
        """How a build log or stamp names where the module came from."""
        return f"{self.origin} ({self.digest[:12]})" if self.digest != "dir" else str(self.origin)


def configured(flag: Path | None = None) -> Path | None:
    """The sources folder: the flag, else ``NSQCTL_GO_MODULE_SOURCES``, else none."""
    if flag is not None:
        return flag
    value = os.environ.get(ENV, "").strip()
    return Path(value).expanduser() if value else None


def module_of_gomod(text: bytes) -> str | None:
    """The module path a go.mod declares, or None."""
    match = _MODULE_LINE.search(text)
    return match.group(1).decode() if match else None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _checksums(folder: Path) -> dict[str, str]:
    sums = folder / "SHA256SUMS"
    if not sums.is_file():
        return {}
    table: dict[str, str] = {}
    for line in sums.read_text(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2:
            table[parts[1].lstrip("*")] = parts[0].lower()
    return table


def _tarball_module(path: Path) -> str | None:
    """The module of a tarball: the go.mod in its single top-level directory."""
    try:
        with tarfile.open(path) as tar:
            for member in tar:
                parts = Path(member.name).parts
                if len(parts) == 2 and parts[1] == "go.mod" and member.isfile():
                    fh = tar.extractfile(member)
                    return module_of_gomod(fh.read()) if fh else None
    except (OSError, tarfile.TarError) as err:
        raise ServerSetupError(f"cannot read module source tarball {path}: {err}") from None
    return None


def scan(folder: Path) -> dict[str, ModuleSource]:
    """Every module in the folder, by module path; checksums verified where listed."""
    if not folder.is_dir():
        raise ServerSetupError(
            f"Go module sources folder {folder} does not exist; point --module-sources "
            f"or {ENV} at a folder of module source tarballs or directories"
        )
    sums = _checksums(folder)
    found: dict[str, ModuleSource] = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_dir():
            gomod = entry / "go.mod"
            module = module_of_gomod(gomod.read_bytes()) if gomod.is_file() else None
            digest = "dir"
        elif entry.name.endswith(TARBALL_SUFFIXES):
            digest = _sha256(entry)
            expected = sums.get(entry.name)
            if expected is not None and expected != digest:
                raise ServerSetupError(
                    f"{entry} does not match its SHA256SUMS entry (got {digest[:16]}…, "
                    f"expected {expected[:16]}…); fetch the tarball again"
                )
            module = _tarball_module(entry)
        else:
            continue
        if module is None:
            continue
        if module in found:
            raise ServerSetupError(
                f"two sources for Go module {module} in {folder}: "
                f"{found[module].origin.name} and {entry.name}; keep one"
            )
        found[module] = ModuleSource(module, entry, digest)
    return found


def _safe_members(tar: tarfile.TarFile, dest: Path) -> list[tarfile.TarInfo]:
    """Regular files and directories that stay inside ``dest``; links are left out (module
    sources need none, and one could point outside)."""
    root = dest.resolve()
    members = []
    for member in tar.getmembers():
        if not (member.isfile() or member.isdir()):
            continue
        if not (dest / member.name).resolve().is_relative_to(root):
            raise ServerSetupError(f"unsafe path {member.name!r} in a module source tarball")
        members.append(member)
    return members


def materialize(source: ModuleSource, into: Path) -> Path:
    """A directory holding the module's go.mod: the directory itself, or the tarball unpacked."""
    if source.digest == "dir":
        return source.origin.resolve()
    dest = into / source.digest[:16]
    if not dest.is_dir():
        staging = into / f".{source.digest[:16]}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        with tarfile.open(source.origin) as tar:
            tar.extractall(staging, members=_safe_members(tar, staging))
        staging.rename(dest)
    tops = [p for p in dest.iterdir() if (p / "go.mod").is_file()]
    if len(tops) != 1:
        raise ServerSetupError(f"{source.origin} does not unpack to one module directory")
    return tops[0].resolve()
