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

* Modules the proxy cannot serve (ours refuses ``github.com/youzan/nsq`` and
  ``github.com/absolute8511/bolt``) can be given as local sources (``--module-sources DIR``
  or ``NSQCTL_GO_MODULE_SOURCES``, see ``modsources``); the wrapper then ``replace``s them
  with their unpacked directories and takes everything else from the proxy as usual.

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
from collections.abc import Callable
from pathlib import Path

import platformdirs

from nsqctl.errors import ServerSetupError
from nsqctl.servers import modsources
from nsqctl.servers.catalog import BUILDS, TESTMODE_ENV, Flavor, ServerBuild
from nsqctl.servers.tools import Tool, find_go

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
# How go reports a module the proxy would not serve (403/404/410, "not available").
_REFUSED = re.compile(
    r"(?P<mod>[\w.\-]+(?:/[\w.\-]+)+)@(?P<ver>v[\w.\-+]+): (?:reading|verifying)\b.*?"
    r"(?:\b(?:403|404|410)\b|not available|not found)"
)


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


def _go_env(workdir: Path, go: Tool) -> dict[str, str]:
    env = dict(os.environ)
    env.update(go.env)
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


def _run(cmd: list[str], go: Tool, cwd: Path, log: Path, what: str, check: bool = True) -> str:
    """Run a go command, its stderr into the build log; return stdout."""
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(
            cmd, cwd=cwd, env=_go_env(cwd, go), stdout=subprocess.PIPE, stderr=fh, text=True
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


_WAY_OUT = (
    "without proxy access, put the module's source tarball in a folder and pass "
    f"--module-sources DIR (or set {modsources.ENV})"
)


def _refused_module(log: Path) -> str | None:
    """The first module@version the proxy refused, as the build log tells it."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    match = _REFUSED.search(text)
    return f"{match['mod']}@{match['ver']}" if match else None


def _module_source(build: ServerBuild, go: Tool, workdir: Path, log: Path) -> tuple[Path, Path]:
    """Download the server module; return (source dir, its go.mod)."""
    what = f"downloading {build.module}@{build.version} from the Go module proxy"
    out = _run(
        [go.path, "mod", "download", "-json", f"{build.module}@{build.version}"],
        go,
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
            f"cannot download {build.module}@{build.version}: {reason[:200]}; "
            f"{_WAY_OUT}; see the build log {log}"
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


def _local_replaces(
    local: dict[str, modsources.ModuleSource], unpack_root: Path, log: Path
) -> dict[str, Path]:
    """Unpack every local module source; module path -> its directory."""
    dirs: dict[str, Path] = {}
    for module, source in local.items():
        dirs[module] = modsources.materialize(source, unpack_root)
        with log.open("a") as fh:
            fh.write(f"local source for {module}: {source.describe()} -> {dirs[module]}\n")
    return dirs


def build(
    flavor: Flavor,
    root: Path | None = None,
    force: bool = False,
    module_sources: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Build (or reuse) one flavour's servers; return their bin directory.

    ``module_sources`` (else ``NSQCTL_GO_MODULE_SOURCES``) names a folder of local module
    sources used instead of the proxy for the modules it holds.
    """
    spec = BUILDS[flavor]
    target = bin_dir(flavor, root)
    if not force and is_built(flavor, root):
        return target
    sources_dir = modsources.configured(module_sources)
    local = modsources.scan(sources_dir) if sources_dir is not None else {}
    go = find_go()
    if progress is not None:
        progress(f"building the {flavor} servers once (then cached) with {go.describe()}")
    base = target.parent
    base.mkdir(parents=True, exist_ok=True)
    log = base / "build.log"
    log.write_text(f"building {spec.module}@{spec.version}\n")
    local_dirs = _local_replaces(local, (root or cache_root()) / "module-sources", log)
    with tempfile.TemporaryDirectory(prefix="nsqctl-build-") as tmp:
        workdir = Path(tmp)
        (workdir / "go.mod").write_text(wrapper_gomod(spec, []))
        if spec.module in local_dirs:
            src = local_dirs[spec.module]
            gomod = src / "go.mod"
        else:
            src, gomod = _module_source(spec, go, workdir, log)
        replaces = [r for r in parse_replaces(gomod.read_text()) if r.split()[0] not in local_dirs]
        replaces.extend(f"{module} => {path}" for module, path in sorted(local_dirs.items()))
        (workdir / "go.mod").write_text(wrapper_gomod(spec, replaces))
        overlay = _write_overlay(spec, src, workdir)
        staging = workdir / "bin"
        staging.mkdir()
        cmd = [go.path, "build", "-trimpath", "-o", str(staging) + os.sep]
        if overlay is not None:
            cmd.append(f"-overlay={overlay}")
        cmd.extend(f"{spec.module}/{pkg}" for pkg in spec.packages.values())
        try:
            _run(cmd, go, workdir, log, f"building the {flavor} NSQ servers")
        except ServerSetupError:
            refused = _refused_module(log)
            if refused is None:
                raise
            raise ServerSetupError(
                f"building the {flavor} NSQ servers failed: the Go module proxy refused "
                f"{refused}; {_WAY_OUT}; see the build log {log}"
            ) from None
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(staging, target)
    stamp = {
        "module": spec.module,
        "version": spec.version,
        "go": go.path,
        "go_from": go.origin,
        "local_sources": {m: src.describe() for m, src in sorted(local.items())},
    }
    (base / STAMP).write_text(json.dumps(stamp, indent=2))
    return target
