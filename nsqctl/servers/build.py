"""Build the real NSQ servers from their Go modules into a per-version cache.

How a build works, and why:

* ``go install module/pkg@version`` refuses modules whose go.mod has ``replace``
  directives (both nsqio/nsq v1.3.0 and youzan/nsq have one). So each build makes a small
  throw-away *wrapper module* that requires the server module, copies its ``replace``
  lines, and runs ``go build`` with ``GOFLAGS=-mod=mod`` and no checksum database.
* A newer Go toolchain trips on some old pinned dependencies (modern-go/reflect2 v1.0.1
  breaks on recent runtimes), so the wrapper may raise such a dependency
  (``ServerBuild.raise_deps``).
* youzan's nsqd refuses to start when the open-file hard limit is below 100000; on our
  machines it is 20000 and cannot be raised. The server skips that check in its own test
  mode (the package-level ``testMode`` variable of package ``nsqdserver``). We add ONE file
  to that package with ``go build -overlay``: an ``init`` that sets ``testMode`` when the
  environment variable ``NSQCTL_NSQD_TESTMODE=1`` is set. Nothing else of the server is
  changed, and a server started without that variable behaves exactly as upstream.

Binaries land in ``<cache>/<flavor>-<version>/bin`` (platformdirs user cache, or
``NSQCTL_SERVER_CACHE``) and are reused while present.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import platformdirs

from nsqctl.errors import ServerSetupError
from nsqctl.servers.catalog import BUILDS, TESTMODE_ENV, Flavor, ServerBuild

STAMP = "build.json"

OVERLAY_SOURCE = f"""// Added by nsqctl at build time through `go build -overlay`, not upstream.
// It turns on the server's own test mode (which skips the open-file limit check that
// machines with a 20000 hard limit cannot pass) only when {TESTMODE_ENV}=1.
package nsqdserver

import "os"

func init() {{
	if os.Getenv("{TESTMODE_ENV}") == "1" {{
		testMode = true
	}}
}}
"""

_REPLACE_LINE = re.compile(r"^\s*(\S+(?:\s+v\S+)?)\s*=>\s*(\S+(?:\s+v\S+)?)\s*$")


def cache_root() -> Path:
    """Where built servers live; ``NSQCTL_SERVER_CACHE`` overrides the user cache dir."""
    override = os.environ.get("NSQCTL_SERVER_CACHE")
    if override:
        return Path(override)
    return Path(platformdirs.user_cache_dir("nsqctl")) / "servers"


def bin_dir(flavor: Flavor, root: Path | None = None) -> Path:
    """The directory holding the built binaries of one flavour."""
    return (root or cache_root()) / BUILDS[flavor].key / "bin"


def is_built(flavor: Flavor, root: Path | None = None) -> bool:
    """True when every binary of the flavour is present and the stamp matches."""
    build = BUILDS[flavor]
    directory = bin_dir(flavor, root)
    stamp = directory.parent / STAMP
    if not stamp.is_file():
        return False
    try:
        recorded = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    if recorded.get("module") != build.module or recorded.get("version") != build.version:
        return False
    return all(os.access(directory / name, os.X_OK) for name in build.packages)


def find_go() -> str:
    """The Go toolchain to build with (``NSQCTL_GO`` or ``go`` on PATH)."""
    go = os.environ.get("NSQCTL_GO") or shutil.which("go")
    if not go:
        raise ServerSetupError(
            "Go toolchain not found: install Go 1.21 or newer (e.g. `apt-get install golang`)"
            " or set NSQCTL_GO to its path; it is needed once to build the NSQ servers"
        )
    return go


def parse_replaces(gomod_text: str) -> list[str]:
    """The ``replace`` directives of a go.mod, one ``old => new`` string each."""
    replaces: list[str] = []
    in_block = False
    for raw in gomod_text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if in_block:
            if line == ")":
                in_block = False
            elif _REPLACE_LINE.match(line):
                replaces.append(line)
            continue
        if line in ("replace (", "replace("):
            in_block = True
        elif line.startswith("replace "):
            body = line[len("replace ") :].strip()
            if _REPLACE_LINE.match(body):
                replaces.append(body)
    return replaces


def wrapper_gomod(build: ServerBuild, replaces: list[str]) -> str:
    """The go.mod of the throw-away wrapper module."""
    lines = ["module nsqctl.local/serverbuild", "", "go 1.21", "", "require ("]
    lines.append(f"\t{build.module} {build.version}")
    lines.extend(f"\t{mod} {ver}" for mod, ver in sorted(build.raise_deps.items()))
    lines.append(")")
    lines.extend(f"replace {r}" for r in replaces)
    return "\n".join(lines) + "\n"


def _go_env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "GOFLAGS": "-mod=mod -buildvcs=false",
            "GOSUMDB": "off",
            "GONOSUMDB": "*",
            "GOTOOLCHAIN": "local",
            "CGO_ENABLED": "0",
            "GOWORK": "off",
        }
    )
    env.setdefault("GOPATH", str(Path.home() / "go"))
    env["PWD"] = str(workdir)
    return env


def _run(cmd: list[str], cwd: Path, log: Path, what: str, check: bool = True) -> str:
    """Run a go command, its stderr into the build log; return stdout."""
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(
            cmd, cwd=cwd, env=_go_env(cwd), stdout=subprocess.PIPE, stderr=fh, text=True
        )
        fh.write(proc.stdout)
    if check and proc.returncode != 0:
        tail = _last_error_line(log)
        raise ServerSetupError(f"{what} failed ({tail}); see the build log {log}")
    return proc.stdout


def _last_error_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    for line in reversed(lines):
        if not line.startswith("$ ") and not line.startswith("go: downloading"):
            return line[:300]
    return lines[-1][:300] if lines else "no output"


def _module_source(build: ServerBuild, go: str, workdir: Path, log: Path) -> tuple[Path, Path]:
    """Download the server module; return (source dir, its go.mod)."""
    what = f"downloading {build.module}@{build.version} from the Go module proxy"
    out = _run(
        [go, "mod", "download", "-json", f"{build.module}@{build.version}"],
        workdir,
        log,
        what,
        check=False,
    )
    try:
        info = json.loads(out)
    except ValueError:
        raise ServerSetupError(
            f"{what} failed ({_last_error_line(log)}); see the build log {log}"
        ) from None
    if info.get("Error") or not info.get("Dir"):
        reason = " ".join(str(info.get("Error", "no module directory")).split())
        raise ServerSetupError(
            f"cannot download {build.module}@{build.version}: {reason[:300]}; "
            f"see the build log {log}"
        )
    return Path(info["Dir"]), Path(info["GoMod"])


def _write_overlay(build: ServerBuild, src: Path, workdir: Path) -> Path | None:
    if build.overlay_package is None:
        return None
    pkg_dir = src / build.overlay_package
    declared = any(
        re.search(r"^\s*(var\s+)?testMode\b.*(=|bool)", f.read_text(errors="replace"), re.M)
        for f in pkg_dir.glob("*.go")
    )
    if not declared:
        raise ServerSetupError(
            f"{build.module}@{build.version} has no `testMode` variable in package "
            f"{build.overlay_package}; the open-file-limit overlay cannot be applied"
        )
    overlay_file = workdir / "zz_nsqctl_testmode.go"
    overlay_file.write_text(OVERLAY_SOURCE)
    overlay = workdir / "overlay.json"
    target = pkg_dir / "zz_nsqctl_testmode.go"
    overlay.write_text(json.dumps({"Replace": {str(target): str(overlay_file)}}))
    return overlay


def build(flavor: Flavor, root: Path | None = None, force: bool = False) -> Path:
    """Build (or reuse) one flavour's servers; return their bin directory."""
    spec = BUILDS[flavor]
    target = bin_dir(flavor, root)
    if not force and is_built(flavor, root):
        return target
    go = find_go()
    base = target.parent
    base.mkdir(parents=True, exist_ok=True)
    log = base / "build.log"
    log.write_text(f"building {spec.module}@{spec.version}\n")
    with tempfile.TemporaryDirectory(prefix="nsqctl-build-") as tmp:
        workdir = Path(tmp)
        (workdir / "go.mod").write_text(wrapper_gomod(spec, []))
        src, gomod = _module_source(spec, go, workdir, log)
        (workdir / "go.mod").write_text(wrapper_gomod(spec, parse_replaces(gomod.read_text())))
        overlay = _write_overlay(spec, src, workdir)
        staging = workdir / "bin"
        staging.mkdir()
        cmd = [go, "build", "-trimpath", "-o", str(staging) + os.sep]
        if overlay is not None:
            cmd.append(f"-overlay={overlay}")
        cmd.extend(f"{spec.module}/{pkg}" for pkg in spec.packages.values())
        _run(cmd, workdir, log, f"building the {flavor} NSQ servers")
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(staging, target)
    (base / STAMP).write_text(
        json.dumps({"module": spec.module, "version": spec.version, "go": go}, indent=2)
    )
    return target
