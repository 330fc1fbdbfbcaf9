"""Start, watch and stop one local server process, by PID.

Processes run in their own session so a sandbox outlives the CLI that started it; every
stop is by the PID we recorded, after checking that PID still runs our executable (a
recycled PID must never be killed).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from nsqctl.errors import ServerSetupError
from nsqctl.pids import pid_alive

LOOPBACK = "127.0.0.1"


def loopback_host(index: int) -> str:
    """The ``index``-th spare loopback address, 127.0.0.2 onwards: Linux routes all of
    127/8 to ``lo``, so a node can listen on one of its own with no setup, and a cluster
    spread over several looks like several hosts to code that confuses them."""
    if not 0 <= index < 250:
        raise ServerSetupError(f"no spare loopback address for node {index}: at most 250")
    return f"127.0.0.{index + 2}"


@dataclass
class NodeRecord:
    """What we started: enough to reach it, read its log and stop it later."""

    role: str  # "nsqd" | "nsqlookupd" | "etcd"
    name: str
    exe: str
    pid: int = 0
    tcp_port: int = 0
    http_port: int = 0
    rpc_port: int = 0
    log: str = ""
    data_dir: str = ""
    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    # The address it listens on and broadcasts (127.0.0.1 unless the cluster is spread).
    host: str = LOOPBACK

    @property
    def tcp_address(self) -> str:
        return f"{self.host}:{self.tcp_port}"

    @property
    def http_address(self) -> str:
        return f"{self.host}:{self.http_port}"

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, object]) -> NodeRecord:
        return cls(**data)  # type: ignore[arg-type]


def port_in_use(port: int) -> bool:
    """True when a server could not bind 127.0.0.1:port: something listens on (or holds)
    it.

    The probe binds as the servers do. nsqd, nsqlookupd and etcd are Go programs, and Go
    sets SO_REUSEADDR on every listener on Unix, so they bind a port whose last
    connections still sit in TIME-WAIT (for about a minute after a server on it stopped,
    e.g. between `sandbox down` and `sandbox up` on the same ports), while a port someone
    listens on stays refused. A probe without the option would call that port taken and
    refuse a start that would succeed. Not on Windows, where the option lets a bind steal
    a port someone listens on (and Go does not set it there).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        if os.name == "posix":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return True
    return False


# Where pooled ports start: high enough to stay clear of the well-known services below.
POOL_START = 20000


def _ephemeral_floor() -> int:
    """The lowest port the kernel picks on its own (a bind to port 0, the local end of an
    outgoing connection); 0 when it cannot be read (not Linux)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _pooled_ports(count: int) -> list[int] | None:
    """``count`` free ports below the kernel's ephemeral range, handed out in turn by every
    process of this user through a locked counter file; None where that cannot be done.

    A port the OS chose for a bind to 0 and that we then release is in the ephemeral
    range: until the server binds it, any outgoing connection on the machine may be given
    it (seen in CI: an nsqd of a test cluster failing with "address already in use" while
    the other test worker's clients connected). Below that range only an explicit bind
    takes a port, and the shared counter keeps concurrent test workers and sandboxes from
    picking the same one; a port is handed out again only after the whole pool went round.
    """
    floor = _ephemeral_floor()
    if floor - POOL_START < 1000:
        return None
    try:
        import fcntl
    except ImportError:
        return None
    counter = Path(tempfile.gettempdir()) / f"nsqctl-next-port-{os.getuid()}"
    try:
        with counter.open("a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes
            f.seek(0)
            text = f.read().strip()
            port = int(text) if text.isdigit() and POOL_START <= int(text) < floor else POOL_START
            ports: list[int] = []
            for _ in range(floor - POOL_START):  # at most once round the pool
                if not port_in_use(port):
                    ports.append(port)
                port = port + 1 if port + 1 < floor else POOL_START
                if len(ports) == count:
                    break
            f.seek(0)
            f.truncate()
            f.write(str(port))
    except OSError:
        return None
    return ports if len(ports) == count else None


def free_ports(count: int, base: int | None = None) -> list[int]:
    """``count`` ports that are free on loopback: sequential from ``base``, else from the
    pool below the ephemeral range (:func:`_pooled_ports`), else OS-chosen."""
    if base is not None:
        ports = list(range(base, base + count))
        for port in ports:
            if not 0 < port < 65536:
                raise ServerSetupError(f"port {port} is out of range: choose a lower --port-base")
            if port_in_use(port):
                raise ServerSetupError(
                    f"port {LOOPBACK}:{port} is already in use: stop what holds it or choose "
                    "another --port-base"
                )
        return ports
    pooled = _pooled_ports(count)
    if pooled is not None:
        return pooled
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            held.append(sock)
        return [s.getsockname()[1] for s in held]
    finally:
        for sock in held:
            sock.close()


def pid_runs(pid: int, exe: str) -> bool:
    """True when ``pid`` is alive and is running ``exe`` (guards against PID reuse)."""
    if not pid_alive(pid, signallable=True):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return True  # no /proc: trust the PID
    return cmdline == exe or os.path.basename(cmdline) == os.path.basename(exe)


def start(record: NodeRecord) -> None:
    """Start ``record.argv`` detached, output to ``record.log``; fill in ``record.pid``."""
    argv = record.argv
    if not os.access(argv[0], os.X_OK):
        raise ServerSetupError(
            f"{record.role} binary not found or not executable at {argv[0]}: run "
            "`nsqctl sandbox build` (or check NSQCTL_SERVER_CACHE)"
        )
    log = Path(record.log)
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    full_env.update(record.env)
    with log.open("ab") as fh:
        proc = subprocess.Popen(
            argv,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=record.data_dir or None,
            env=full_env,
            start_new_session=True,
            preexec_fn=_die_with_parent if DIE_WITH_PARENT else None,
        )
    record.pid = proc.pid
    _CHILDREN[proc.pid] = proc


# Test fixtures set this: their servers get SIGTERM when the test process dies (even by
# kill -9), so an interrupted run leaves nothing behind. The sandbox leaves it off: its
# servers must outlive the `nsqctl sandbox up` command. Linux only (prctl); the signal
# follows the thread that started the server, so start servers from a long-lived thread.
DIE_WITH_PARENT = False
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


# Popen objects of processes this Python process started, so they are reaped on stop.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def last_log_line(log: str) -> str:
    """The last non-empty line of a log file, for one-line error messages."""
    try:
        with open(log, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 8192))
            lines = [ln.strip() for ln in fh.read().decode(errors="replace").splitlines()]
    except OSError:
        return "no log"
    lines = [ln for ln in lines if ln]
    return lines[-1][:300] if lines else "no output"


def exited(record: NodeRecord) -> int | None:
    """The exit code if the process has ended, else None."""
    proc = _CHILDREN.get(record.pid)
    if proc is not None:
        return proc.poll()
    return None if pid_runs(record.pid, record.exe) else -1


def http_ok(url: str, timeout: float = 1.0) -> bool:
    """True when ``url`` answers 200."""
    try:
        return httpx.get(url, timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def wait_until(
    record: NodeRecord,
    check: Callable[[], bool],
    what: str,
    timeout: float = 30.0,
    interval: float = 0.1,
) -> None:
    """Poll ``check`` until true; fail fast (naming the log) if the process dies."""
    deadline = time.monotonic() + timeout
    while True:
        code = exited(record)
        if code is not None:
            raise ServerSetupError(
                f"{record.name} exited at start (code {code}): {last_log_line(record.log)}; "
                f"see {record.log}"
            )
        if check():
            return
        if time.monotonic() > deadline:
            raise ServerSetupError(
                f"{record.name} did not become {what} within {timeout:.0f}s: "
                f"{last_log_line(record.log)}; see {record.log}"
            )
        time.sleep(interval)


def stop(record: NodeRecord, timeout: float = 10.0) -> bool:
    """Stop our process by PID (TERM, then KILL). True if it was running."""
    proc = _CHILDREN.pop(record.pid, None)
    if not pid_runs(record.pid, record.exe) and (proc is None or proc.poll() is not None):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signal.SIGTERM)
        os.kill(record.pid, signal.SIGCONT)  # a paused node acts on the TERM only once resumed
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return True
        if proc is None and not pid_runs(record.pid, record.exe):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(record.pid, signal.SIGKILL)
    if proc is not None:
        proc.wait(timeout=5)
    return True


def pause(record: NodeRecord) -> None:
    """SIGSTOP our process: a hung node (fault tests). Its sockets stay open and answer
    nothing, unlike a killed node's; always :func:`resume` it afterwards."""
    if pid_runs(record.pid, record.exe):
        os.kill(record.pid, signal.SIGSTOP)


def resume(record: NodeRecord) -> None:
    """SIGCONT a node :func:`pause` stopped (harmless on one that runs)."""
    if pid_runs(record.pid, record.exe):
        os.kill(record.pid, signal.SIGCONT)


def kill_hard(record: NodeRecord) -> None:
    """SIGKILL our process (fault-injection tests); it stays recorded for a restart."""
    if pid_runs(record.pid, record.exe):
        os.kill(record.pid, signal.SIGKILL)
        proc = _CHILDREN.pop(record.pid, None)
        if proc is not None:
            proc.wait(timeout=5)
