"""Options every cluster command shares, and how they resolve.

Order: flags beat environment beat profile. Addresses come per command (``--lookupd``,
``--nsqd``, ``--nsqd-http``, ``--profile``); connection security (TLS, AUTH, compression),
consumers' ``--output-buffer``, ``--read-only`` and ``--debug`` are global flags
(:func:`global_flags`), accepted before the command (``nsqctl --tls-ca ca.pem tail ...``)
and after it (``nsqctl tail ... --tls-ca ca.pem``), then env, then the profile.

This module is imported by every command at start-up: it must stay cheap (the config,
connection and secrets modules load only when a selection is resolved).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

import typer

from nsqctl.errors import ConfigError, NsqctlError

if TYPE_CHECKING:
    from nsqctl.connection import ConnectionConfig, TLSSettings
    from nsqctl.profiles import Profile
    from nsqctl.secrets import Secret
    from nsqctl.stats.view import ClusterView

LookupdOption = typer.Option(
    None,
    "--lookupd",
    metavar="ADDR",
    help="nsqlookupd HTTP address HOST:PORT (repeatable; env NSQCTL_LOOKUPD).",
)
NsqdOption = typer.Option(
    None,
    "--nsqd",
    metavar="ADDR",
    help="nsqd TCP address HOST:PORT (repeatable; env NSQCTL_NSQD).",
)
NsqdHttpOption = typer.Option(
    None,
    "--nsqd-http",
    metavar="ADDR",
    help="nsqd HTTP address HOST:PORT (repeatable; env NSQCTL_NSQD_HTTP).",
)


def complete_profiles(incomplete: str) -> list[str]:
    """Shell completion of --profile: the profile names of the config file (nothing when
    the file cannot be read: a completion never prints an error into the shell)."""
    from nsqctl.profiles import load_config

    try:
        names = load_config().profiles
    except NsqctlError:
        return []
    return sorted(n for n in names if n.startswith(incomplete))


ProfileOption = typer.Option(
    None,
    "--profile",
    metavar="NAME",
    help="Cluster profile from the config file (env NSQCTL_PROFILE).",
    autocompletion=complete_profiles,
)
#: the exit status when stdout's reader went away (`nsqctl ... | head`): 128 + SIGPIPE,
#: what a Unix tool stopped by the signal reports (`yes | head` under pipefail)
SIGPIPE_STATUS = 141

JsonOption = typer.Option(False, "--json", help="Machine-readable output.")


class SecurityFlags:
    """The global flags (before or after the command); None means "not given".

    A plain class, not a dataclass: Python 3.11 compiles a dataclass's methods as its
    module loads, and every command loads this one."""

    __slots__ = (
        "auth_secret_file",
        "compression",
        "debug",
        "output_buffer",
        "profile",
        "read_only",
        "tls",
        "tls_ca",
        "tls_cert",
        "tls_insecure",
        "tls_key",
        "tls_key_password_file",
    )

    def __init__(
        self,
        debug: bool = False,
        profile: str | None = None,
        tls: bool | None = None,
        tls_ca: str | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        tls_key_password_file: str | None = None,
        tls_insecure: bool | None = None,
        auth_secret_file: str | None = None,
        compression: str | None = None,
        output_buffer: str | None = None,
        read_only: bool | None = None,
    ) -> None:
        self.debug = debug
        self.profile = profile
        self.tls = tls
        self.tls_ca = tls_ca
        self.tls_cert = tls_cert
        self.tls_key = tls_key
        self.tls_key_password_file = tls_key_password_file
        self.tls_insecure = tls_insecure
        self.auth_secret_file = auth_secret_file
        self.compression = compression
        self.output_buffer = output_buffer
        self.read_only = read_only

    def reset(self) -> None:
        """Back to "nothing given"."""
        fresh = SecurityFlags()
        for name in self.__slots__:
            setattr(self, name, getattr(fresh, name))


GLOBAL_FLAGS = SecurityFlags()


def global_flags(
    debug: bool = typer.Option(
        False, "--debug", envvar="NSQCTL_DEBUG", help="Show tracebacks on errors."
    ),
    profile: str | None = typer.Option(
        None,
        "--profile",
        metavar="NAME",
        help="Cluster profile from the config file (env NSQCTL_PROFILE).",
        autocompletion=complete_profiles,
    ),
    tls: bool | None = typer.Option(
        None,
        "--tls/--no-tls",
        help="TLS to nsqd (verified); any --tls-* option turns it on. --no-tls: plaintext, "
        "whatever TLS settings the environment or the profile give.",
    ),
    tls_ca: str | None = typer.Option(
        None, "--tls-ca", metavar="FILE", help="CA file (env NSQCTL_TLS_CA)."
    ),
    tls_cert: str | None = typer.Option(
        None, "--tls-cert", metavar="FILE", help="Client certificate file (env NSQCTL_TLS_CERT)."
    ),
    tls_key: str | None = typer.Option(
        None,
        "--tls-key",
        metavar="FILE",
        help="Client key file, with --tls-cert (env NSQCTL_TLS_KEY).",
    ),
    tls_key_password_file: str | None = typer.Option(
        None,
        "--tls-key-password-file",
        metavar="FILE",
        help="File holding the passphrase of an encrypted --tls-key (env "
        "NSQCTL_TLS_KEY_PASSWORD_FILE).",
    ),
    tls_insecure: bool | None = typer.Option(
        None, "--tls-insecure", help="TLS without certificate verification (testing only)."
    ),
    auth_secret_file: str | None = typer.Option(
        None,
        "--auth-secret-file",
        metavar="FILE",
        help="File holding the AUTH secret (env NSQCTL_AUTH_SECRET_FILE or NSQCTL_AUTH_SECRET).",
    ),
    compression: str | None = typer.Option(
        None,
        "--compression",
        metavar="CODEC",
        help="none | snappy | deflate (env NSQCTL_COMPRESSION).",
    ),
    output_buffer: str | None = typer.Option(
        None,
        "--output-buffer",
        metavar="auto|none|DURATION",
        help="How long nsqd may hold messages for a consumer before sending them. auto "
        "(default): unbuffered on a durable channel of the original family, so a kill -9 "
        "of its nsqd cannot lose messages it handed out but had not sent; nsqd's default "
        "(250 ms) on an ephemeral channel and on the redesign (known from the lookupd). "
        "none: unbuffered. DURATION (100ms, 1s): buffered, flushed that often (env "
        "NSQCTL_OUTPUT_BUFFER).",
    ),
    read_only: bool | None = typer.Option(
        None,
        "--read-only/--no-read-only",
        help="Refuse every command that changes the cluster or consumes a durable channel "
        "(env NSQCTL_READ_ONLY=1, or a profile's read_only = true).",
    ),
) -> None:
    """The global flags, declared once: the root callback, and (through
    :func:`store_global_flag`) the same options accepted after every command.

    As the root callback it runs first in every invocation: it starts from "nothing
    given", so an in-process caller (tests, CliRunner) never inherits an earlier run's."""
    given = dict(locals())
    GLOBAL_FLAGS.reset()
    for name, value in given.items():
        store_global_flag(name, value)


def store_global_flag(name: str, value: Any) -> None:
    """Record one global flag that was given; "not given" (None, or --debug off) keeps
    what an earlier position set, so ``nsqctl --tls-ca A cmd`` is not undone by ``cmd``."""
    if value is None or (name == "debug" and not value):
        return
    setattr(GLOBAL_FLAGS, name, value)


class ClusterSelection:
    """Where the cluster is and how to connect, with where each setting came from.

    A plain class (never compared, printed or replaced), not a dataclass: Python 3.11
    compiles a dataclass's methods as its module loads, and every command loads this one.
    """

    __slots__ = (
        "auth_secret",
        "compression",
        "lookupd",
        "nsqd",
        "nsqd_http",
        "output_buffer",
        "profile",
        "read_only",
        "sources",
        "tls",
    )

    def __init__(
        self,
        lookupd: list[str],
        nsqd: list[str],
        nsqd_http: list[str] | None = None,
        profile: str | None = None,
        tls: TLSSettings | None = None,
        auth_secret: Secret | None = None,
        compression: str = "none",
        output_buffer: str = "auto",
        read_only: bool = False,
        sources: dict[str, str] | None = None,
    ) -> None:
        self.lookupd = lookupd
        self.nsqd = nsqd
        self.nsqd_http: list[str] = [] if nsqd_http is None else nsqd_http
        self.profile = profile
        self.tls = tls
        self.auth_secret = auth_secret
        self.compression = compression
        self.output_buffer = output_buffer
        self.read_only = read_only
        self.sources: dict[str, str] = {} if sources is None else sources

    def require(self) -> ClusterSelection:
        if not self.lookupd and not self.nsqd:
            raise ConfigError(
                "no cluster given: pass --lookupd HOST:PORT or --nsqd HOST:PORT, use "
                '--profile NAME, or run `eval "$(nsqctl sandbox env)"`'
            )
        return self

    def require_http(self) -> ClusterSelection:
        """For commands that read HTTP APIs: lookupd or nsqd HTTP addresses are needed."""
        if not self.lookupd and not self.nsqd_http:
            raise ConfigError(
                "this command reads the HTTP APIs: pass --lookupd HOST:PORT or --nsqd-http "
                'HOST:PORT (nsqd\'s HTTP port, usually 4151), or run `eval "$(nsqctl sandbox env)"`'
            )
        return self

    def connection_config(self, **overrides: Any) -> ConnectionConfig:
        """A ConnectionConfig carrying the selected TLS, AUTH and compression.

        The TLS files are loaded here, before any connection: a missing or unreadable
        one is named as such, instead of surfacing after the TCP connect as a failure
        that seems to be the server's (or never, against an nsqd that offers no TLS)."""
        from nsqctl.connection import ConnectionConfig

        if self.tls is not None:
            self.tls.context()

        base = ConnectionConfig(
            tls=self.tls, auth_secret=self.auth_secret, compression=self.compression
        )
        return replace(base, **overrides) if overrides else base

    def consumer_config(self, channel: str, **overrides: Any) -> ConnectionConfig:
        """:meth:`connection_config` for a consumer of ``channel``, with the output
        buffering the selection's output-buffer setting asks for on that channel
        (:meth:`~nsqctl.connection.ConnectionConfig.for_consumer`)."""
        return self.connection_config(**overrides).for_consumer(self.output_buffer, channel)

    def read_only_setting(self) -> ReadOnlySetting:
        """:attr:`read_only` with where it came from."""
        return ReadOnlySetting(self.read_only, self.sources.get("read_only", ""))

    def describe(self) -> dict[str, Any]:
        """Resolved settings for display; a secret (the AUTH secret, a TLS key's
        passphrase) shows only where it came from."""
        tls = None
        if self.tls is not None:
            tls = {
                "ca_file": self.tls.ca_file,
                "cert_file": self.tls.cert_file,
                "key_file": self.tls.key_file,
                "insecure": self.tls.insecure,
            }
            if self.tls.key_password is not None:  # said, as the AUTH secret is: masked
                tls["key_password"] = "<hidden>"
                tls["key_password_source"] = self.tls.key_password.source
        return {
            "profile": self.profile,
            "lookupd": self.lookupd,
            "nsqd": self.nsqd,
            "nsqd_http": self.nsqd_http,
            "tls": tls,
            "auth_secret": None if self.auth_secret is None else "<hidden>",
            "auth_secret_source": None if self.auth_secret is None else self.auth_secret.source,
            "compression": self.compression,
            "output_buffer": self.output_buffer,
            "read_only": self.read_only,
            "sources": self.sources,
        }


def split_addresses(values: list[str] | tuple[str, ...] | None) -> list[str]:
    """Flatten repeated and comma-separated address values."""
    out: list[str] = []
    for value in values or []:
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return out


def _pick_list(name: str, env: str, profile: Profile | None, sources: dict[str, str]) -> list[str]:
    """Addresses from ``env``, else the profile (flags are handled as a group by the caller)."""
    values = split_addresses([os.environ.get(env, "")])
    if values:
        sources[name] = f"${env}"
        return values
    if profile is not None and getattr(profile, name):
        sources[name] = f"profile {profile.name}"
        return list(getattr(profile, name))
    return []


def _pick(flag: Any, env: str | None, profile_value: Any) -> Any:
    if flag is not None:
        return flag
    if env and os.environ.get(env):
        return os.environ[env]
    return profile_value


def _pick_source(
    name: str, flag: Any, env: str | None, profile: Profile | None, sources: dict[str, str]
) -> Any:
    """:func:`_pick` for the profile key ``name``, recording in ``sources`` where a value
    that was found came from."""
    if flag is not None:
        sources[name] = "flag"
        return flag
    if env and os.environ.get(env):
        sources[name] = f"${env}"
        return os.environ[env]
    value = getattr(profile, name) if profile is not None else None
    if value:
        sources[name] = f"profile {profile.name}" if profile is not None else ""
    return value


#: the TLS settings, their flag and environment variable (None: no environment variable)
_TLS_SETTINGS = (
    ("tls", "--tls", None),
    ("tls_ca", "--tls-ca", "NSQCTL_TLS_CA"),
    ("tls_cert", "--tls-cert", "NSQCTL_TLS_CERT"),
    ("tls_key", "--tls-key", "NSQCTL_TLS_KEY"),
    ("tls_insecure", "--tls-insecure", None),
)


def _resolve_tls(prof: Profile | None, sources: dict[str, str]) -> TLSSettings | None:
    """TLS from flags, env and profile: any TLS setting, wherever it came from, turns TLS
    on (a CA, a certificate, a key or --tls-insecure given for plaintext would be a
    silent downgrade); a key without its certificate is refused."""
    from nsqctl.connection import TLSSettings

    values = {
        name: _pick_source(name, getattr(GLOBAL_FLAGS, name), env, prof, sources)
        for name, _, env in _TLS_SETTINGS
    }
    password_file = _pick_source(
        "tls_key_password_file",
        GLOBAL_FLAGS.tls_key_password_file,
        KEY_PASSWORD_FILE_ENV,
        prof,
        sources,
    )
    if values["tls"] is False and sources.get("tls") == "flag":
        # asked for by name: plaintext, over TLS settings from the environment or the
        # profile (complete or not); a TLS flag beside it cannot be obeyed with it
        clashing = [f for n, f, _ in _TLS_SETTINGS[1:] if values[n] and sources.get(n) == "flag"]
        if password_file and sources.get("tls_key_password_file") == "flag":
            clashing.append("--tls-key-password-file")
        if clashing:
            raise ConfigError(
                f"--no-tls conflicts with {', '.join(clashing)}: give one or the other",
                setting="tls",
            )
        return None
    key, cert = values["tls_key"], values["tls_cert"]
    check_client_identity(
        key,
        cert,
        password_file,
        key_from=sources.get("tls_key", ""),
        password_from=sources.get("tls_key_password_file", ""),
    )
    wanted = values["tls"] or any(values[n] for n in ("tls_ca", "tls_cert", "tls_key"))
    if not (wanted or values["tls_insecure"]):
        return None
    return TLSSettings(
        ca_file=values["tls_ca"],
        cert_file=cert,
        key_file=key,
        insecure=bool(values["tls_insecure"]),
        key_password=_key_password(password_file),
    )


KEY_PASSWORD_FILE_ENV = "NSQCTL_TLS_KEY_PASSWORD_FILE"


def check_client_identity(
    key: str | None,
    cert: str | None,
    password_file: str | None,
    *,
    key_from: str = "",
    password_from: str = "",
) -> None:
    """A client key, or the passphrase file that opens one, without its certificate is
    half of a client identity: refused (when a command runs, and when a profile is saved),
    not left for TLS to go out without one. ``*_from``: where each came from, for the
    message."""
    if key and not cert:
        here = f" (here from {key_from})" if key_from else ""
        raise ConfigError(
            f"--tls-key needs --tls-cert: a client key{here} is half of a client identity; "
            "give its certificate with --tls-cert FILE (or NSQCTL_TLS_CERT, or the "
            "profile's tls_cert)",
            setting="tls_key",
        )
    if password_file and not cert:
        here = f" (here from {password_from})" if password_from else ""
        raise ConfigError(
            f"--tls-key-password-file{here} opens a client key: give its certificate with "
            "--tls-cert FILE (and the key with --tls-key FILE unless it is in the "
            "certificate's file)",
            setting="tls_key_password",
        )


def _key_password(path: str | None) -> Secret | None:
    """The passphrase of an encrypted client key, from the file a flag, the environment
    or the profile names: a file, never a value, so it shows in no process list."""
    if not path:
        return None
    from nsqctl.secrets import read_secret_file

    warn_if_open("TLS key password file", path)
    return read_secret_file(path, "TLS key password file")


READ_ONLY_ENV = "NSQCTL_READ_ONLY"
OUTPUT_BUFFER_ENV = "NSQCTL_OUTPUT_BUFFER"
_TRUE_WORDS = ("1", "true", "yes", "on")
_FALSE_WORDS = ("0", "false", "no", "off")


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up).
class ReadOnlySetting(NamedTuple):
    """Whether commands that write are refused, and where that was decided: ``source`` as
    :attr:`ClusterSelection.sources` writes it ("flag", "$NSQCTL_READ_ONLY", "profile
    NAME"), "" when nothing set it."""

    on: bool
    source: str = ""


def _read_only(prof: Profile | None) -> ReadOnlySetting:
    """Flag, else the environment, else the profile: ``--no-read-only`` (or
    ``NSQCTL_READ_ONLY=0``) lifts a profile's read_only for one command, as a flag lifts
    any profile setting."""
    if GLOBAL_FLAGS.read_only is not None:
        return ReadOnlySetting(GLOBAL_FLAGS.read_only, "flag")
    raw = os.environ.get(READ_ONLY_ENV, "").strip().lower()
    if raw:
        if raw not in _TRUE_WORDS + _FALSE_WORDS:
            raise ConfigError(
                f"{READ_ONLY_ENV}={os.environ[READ_ONLY_ENV]!r} is neither on nor off: "
                "set it to 1 (refuse writes) or 0, or unset it"
            )
        return ReadOnlySetting(raw in _TRUE_WORDS, f"${READ_ONLY_ENV}")
    if prof is not None and prof.read_only:
        return ReadOnlySetting(True, f"profile {prof.name}")
    return ReadOnlySetting(False)


def resolve_read_only(profile: str | None = None) -> ReadOnlySetting:
    """The read-only setting for a command given ``--profile profile`` (or none): only the
    config file is read, nothing is connected to."""
    return _read_only(_active_profile(profile))


def _active_profile(flag: str | None) -> Profile | None:
    from nsqctl.profiles import PROFILE_ENV, load_config

    name = flag or GLOBAL_FLAGS.profile or os.environ.get(PROFILE_ENV)
    cfg = load_config()
    if name:
        return cfg.profile(name)
    if cfg.default_profile:
        return cfg.profile(cfg.default_profile)
    return None


def resolve_cluster(
    lookupd: list[str] | None,
    nsqd: list[str] | None,
    profile: str | None = None,
    nsqd_http: list[str] | None = None,
    *,
    require: str | None = "tcp",
) -> ClusterSelection:
    """Resolve flags, env and profile into one selection.

    Addresses are taken as a group: when any address is given by flags, the environment
    and profile addresses are ignored (mixing a flag's nsqd with a profile's lookupd
    would silently talk to two clusters). ``require`` is "tcp", "http" or None.
    """
    from nsqctl.protocol.compression import validate_compression
    from nsqctl.protocol.output_buffer import AUTO, parse_output_buffer
    from nsqctl.secrets import resolve_auth_secret

    prof = _active_profile(profile)
    sources: dict[str, str] = {}
    flags_given = bool(
        split_addresses(lookupd) or split_addresses(nsqd) or split_addresses(nsqd_http)
    )
    if flags_given:
        lk, nd, nh = split_addresses(lookupd), split_addresses(nsqd), split_addresses(nsqd_http)
        for name, vals in (("lookupd", lk), ("nsqd", nd), ("nsqd_http", nh)):
            if vals:
                sources[name] = "flag"
    else:
        env_given = any(
            os.environ.get(v) for v in ("NSQCTL_LOOKUPD", "NSQCTL_NSQD", "NSQCTL_NSQD_HTTP")
        )
        use = None if env_given else prof
        lk = _pick_list("lookupd", "NSQCTL_LOOKUPD", use, sources)
        nd = _pick_list("nsqd", "NSQCTL_NSQD", use, sources)
        nh = _pick_list("nsqd_http", "NSQCTL_NSQD_HTTP", use, sources)

    g = GLOBAL_FLAGS
    tls = _resolve_tls(prof, sources)
    secret_file = _pick(
        g.auth_secret_file, "NSQCTL_AUTH_SECRET_FILE", prof.auth_secret_file if prof else None
    )
    secret = resolve_auth_secret(None, secret_file) if secret_file else resolve_auth_secret()
    if secret_file:
        warn_if_open("auth secret file", secret_file)
    if tls is not None and tls.key_file:
        warn_if_open("TLS key file", tls.key_file)
    compression = _pick(g.compression, "NSQCTL_COMPRESSION", prof.compression if prof else "none")
    validate_compression(compression)
    output_buffer = _pick_source("output_buffer", g.output_buffer, OUTPUT_BUFFER_ENV, prof, sources)
    src = sources.get("output_buffer", "")
    where = {"flag": "--output-buffer", f"${OUTPUT_BUFFER_ENV}": OUTPUT_BUFFER_ENV}.get(
        src, f"output_buffer of the {src}"
    )
    output_buffer = parse_output_buffer(output_buffer, setting=where) if output_buffer else AUTO
    read_only = _read_only(prof)
    if read_only.source:
        sources["read_only"] = read_only.source
    selection = ClusterSelection(
        lookupd=lk,
        nsqd=nd,
        nsqd_http=nh,
        profile=prof.name if prof else None,
        tls=tls,
        auth_secret=secret,
        compression=compression,
        output_buffer=output_buffer,
        read_only=read_only.on,
        sources=sources,
    )
    if require == "tcp":
        selection.require()
    elif require == "http":
        selection.require_http()
    return selection


#: files already warned about in this process: a command may resolve its cluster twice
_WARNED_OPEN: set[str] = set()


def warn_if_open(what: str, path: str) -> None:
    """One stderr line, once per file, when a secret's file is open to other users (as
    ssh warns of a private key): the secret is still used, the operator is told the fix."""
    from nsqctl.secrets import open_permissions

    bits = open_permissions(path)
    if bits is None or path in _WARNED_OPEN:
        return
    _WARNED_OPEN.add(path)
    typer.echo(
        f"nsqctl: warning: the {what} {path} can be read by other users (mode {bits:04o}): "
        f"chmod 600 {path}",
        err=True,
    )


def require_first_answer(view: ClusterView) -> None:
    """Fail on a first poll that no nsqd answered: a wrong address, not an outage to watch.
    With every nsqlookupd down and no nsqd known, the error says how to read the nsqds."""
    if not view.nodes and view.errors:
        lookupds_down = bool(view.lookupds) and not any(lk.ok for lk in view.lookupds)
        hint = "; --nsqd-http reads the nsqds without it" if lookupds_down else ""
        raise NsqctlError(view.errors[0] + hint)
    if view.nodes and all(n.stats.state != "up" for n in view.nodes):
        causes = "; ".join(f"{n.address}: {n.stats.error or n.stats.state}" for n in view.nodes)
        raise NsqctlError(f"no nsqd answered /stats ({causes}): check the addresses")
