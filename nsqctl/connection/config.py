"""What a connection to nsqd is set up with: TLS, IDENTIFY's features, timeouts.
No IO: the CLI and the library build these before connecting.
"""

from __future__ import annotations

import os
import socket
import ssl
from dataclasses import dataclass, field, replace
from typing import Any

from nsqctl import __version__
from nsqctl.bounds import Bound, check_bounds
from nsqctl.errors import ConfigError
from nsqctl.protocol.compression import validate_compression
from nsqctl.protocol.names import is_ephemeral
from nsqctl.protocol.output_buffer import output_buffer_fields
from nsqctl.secrets import Secret


@dataclass(frozen=True)
class TLSSettings:
    """TLS towards nsqd: verification is on unless ``insecure`` is set explicitly."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    server_hostname: str | None = None
    #: The passphrase of an encrypted client key (a :class:`Secret`: never shown).
    key_password: Secret | None = None

    def __post_init__(self) -> None:
        # A key is half of a client identity: without its certificate ssl would load
        # nothing and the connection would go out without one, which nsqd's
        # require-verify answers with an alert that blames the certificate, not the key.
        if self.key_file and not self.cert_file:
            raise ConfigError(
                "a TLS client key (key_file) needs its certificate (cert_file)",
                setting="tls_key",
            )

    def context(self) -> ssl.SSLContext:
        """The client's SSL context; a file that cannot be loaded is a :class:`ConfigError`
        whose ``setting`` names it (``tls_ca``, or ``tls_cert`` for the certificate/key)."""
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as err:
            raise ConfigError(
                f"cannot load the TLS CA file {self.ca_file!r} ({_reason(err)})",
                setting="tls_ca",
            ) from None
        asked: list[bool] = []

        def passphrase() -> bytes:  # OpenSSL asks only for an encrypted key
            asked.append(True)
            if self.key_password is None:  # raised through OpenSSL to load_cert_chain's caller
                raise ConfigError(
                    f"the TLS client key {self.key_file or self.cert_file!r} is encrypted: give "
                    "its passphrase (`key_password`) or use a decrypted copy of the key",
                    setting="tls_key_password",
                )
            return self.key_password.reveal()

        if self.cert_file:
            try:
                # Always a password callback: without one OpenSSL asks for an encrypted
                # key's passphrase on the terminal, which stalls a script and, with no
                # terminal, fails with a reason that does not say why.
                ctx.load_cert_chain(self.cert_file, self.key_file, password=passphrase)
            except (OSError, ssl.SSLError) as err:
                if asked and self.key_password is not None and _not_decrypted(err):
                    raise ConfigError(
                        f"the passphrase given ({self.key_password.source}) does not decrypt "
                        f"the TLS client key {self.key_file or self.cert_file!r}",
                        setting="tls_key_password",
                    ) from None
                # Without a key file, OpenSSL looks for the key in the certificate's file
                # and reports only "PEM lib" when it is not there: say where it looked.
                where = (
                    f"with the key {self.key_file!r}"
                    if self.key_file
                    else "(no key file given, so the key must be in the same file)"
                )
                raise ConfigError(
                    f"cannot load the TLS client certificate {self.cert_file!r} {where}: "
                    f"{_reason(err)}",
                    setting="tls_cert",
                ) from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


def _not_decrypted(err: OSError | ssl.SSLError) -> bool:
    """Whether loading failed at the key's decryption: OpenSSL 3 says so as "bad decrypt"
    or, for PEM, with no reason but "PEM lib". Anything else (a key that does not match
    the certificate) is not the passphrase's fault."""
    reason = getattr(err, "reason", None)
    return reason in (None, "BAD_DECRYPT", "BAD_PASSWORD_READ") or "bad decrypt" in str(err)


def _reason(err: OSError | ssl.SSLError) -> str:
    return str(getattr(err, "strerror", None) or err)


#: nsqd's heartbeat interval asked in IDENTIFY unless a config says otherwise: a silent
#: connection is declared dead after about two missed heartbeats (``idle_timeout``).
DEFAULT_HEARTBEAT_INTERVAL_MS = 30_000
#: Environment variable that replaces that default for every connection of a process (the
#: CLI's included): an operator who must notice a hung nsqd (SIGSTOP, a full disk, a stalled
#: VM) sooner than in a minute lowers it without a flag on every command.
HEARTBEAT_INTERVAL_ENV = "NSQCTL_HEARTBEAT_INTERVAL_MS"
#: nsqd refuses an IDENTIFY asking for a heartbeat more often than this.
MIN_HEARTBEAT_INTERVAL_MS = 1000


def default_heartbeat_interval_ms() -> int:
    """:data:`DEFAULT_HEARTBEAT_INTERVAL_MS`, or the environment's replacement."""
    raw = os.environ.get(HEARTBEAT_INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_HEARTBEAT_INTERVAL_MS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < MIN_HEARTBEAT_INTERVAL_MS:
        raise ConfigError(
            f"bad {HEARTBEAT_INTERVAL_ENV} {raw!r}: a whole number of milliseconds, at least "
            f"{MIN_HEARTBEAT_INTERVAL_MS}",
            setting="heartbeat_interval_ms",
        )
    return value


#: The longest duration any nsqd can be configured to accept, in ms: its ``max_*``
#: options are Go durations (int64 nanoseconds). What a given nsqd's flags allow below
#: this, nsqd itself checks; a client-side ceiling at nsqd's default would refuse what a
#: server configured higher accepts.
MAX_DURATION_MS = (2**63 - 1) // 1_000_000
#: nsqd's own ranges for IDENTIFY's fields (original and redesign alike, in their
#: IDENTIFY handling), plus the client's own timeouts. Fixed floors are nsqd's code; the
#: ceilings nsqd takes from its flags are left to nsqd (see :data:`MAX_DURATION_MS`).
CONNECTION_BOUNDS: dict[str, Bound] = {
    # nsqd also takes 0 (its own default, derived from its client_timeout), but the
    # connection's idle watch is sized from this value and cannot know that default:
    # asked for, it would close a quiet connection before nsqd's first heartbeat.
    "heartbeat_interval_ms": Bound(
        MIN_HEARTBEAT_INTERVAL_MS,
        MAX_DURATION_MS,
        unit="ms",
        special=((-1, "no heartbeats"),),
        up_to="nsqd's max_heartbeat_interval",
    ),
    "msg_timeout_ms": Bound(
        1000,
        MAX_DURATION_MS,
        unit="ms",
        special=((0, "nsqd's default"),),
        optional=True,
        up_to="nsqd's max_msg_timeout",
    ),
    "output_buffer_size": Bound(
        64,
        2**63 - 1,
        unit="bytes",
        special=((-1, "unbuffered"), (0, "nsqd's default")),
        optional=True,
        up_to="nsqd's max_output_buffer_size",
    ),
    # the original nsqd's floor is its min_output_buffer_timeout (25 ms by default)
    "output_buffer_timeout_ms": Bound(
        1,
        MAX_DURATION_MS,
        unit="ms",
        special=((-1, "no timeout"), (0, "nsqd's default")),
        optional=True,
        up_to="nsqd's max_output_buffer_timeout",
    ),
    "sample_rate": Bound(0, 99, unit="%"),
    # zlib's levels; nsqd lowers a level above its max_deflate_level to that maximum
    "deflate_level": Bound(1, 9),
    "connect_timeout": Bound(0, integer=False, above=True, unit="seconds"),
    "request_timeout": Bound(0, integer=False, above=True, unit="seconds"),
}


@dataclass
class ConnectionConfig:
    """What a connection negotiates and how long it waits.

    ``output_buffer_size`` / ``output_buffer_timeout_ms`` (None: nsqd's default, a 16 KiB
    buffer flushed every 250 ms) set how long nsqd may hold a consumer's messages before
    sending them. Set ``output_buffer_size=-1`` (unbuffered) when consuming a durable
    channel from an original nsqd (v1) that may be killed (kill -9, OOM, power): it moves
    the channel's disk-queue read position when it hands a message to the connection, not
    at FIN, so what its buffer held at the kill is lost once that position was saved; an
    unbuffered connection receives each message as it is handed out. The cost is nsqd's
    write per message (``bench/README.md`` measures it); the redesign confirms positions
    at FIN and gains nothing, so ``output_buffer_original_only`` has a
    :class:`~nsqctl.consumer.Consumer` whose lookupd reports the topic as the redesign's
    leave both fields to nsqd's default (the family is known only from the lookup: an
    nsqd answers IDENTIFY, the one place to ask, before saying which it is).
    :func:`nsqctl.protocol.output_buffer.output_buffer_fields` reads the CLI's
    ``auto``/``none``/duration setting into these fields.
    """

    client_id: str | None = None
    hostname: str | None = None
    user_agent: str = f"nsqctl/{__version__}"
    heartbeat_interval_ms: int = field(default_factory=default_heartbeat_interval_ms)
    msg_timeout_ms: int | None = None
    output_buffer_size: int | None = None
    output_buffer_timeout_ms: int | None = None
    output_buffer_original_only: bool = False
    sample_rate: int = 0
    tls: TLSSettings | None = None
    compression: str = "none"  # none | snappy | deflate
    deflate_level: int = 6
    auth_secret: Secret | None = None
    extend_support: bool = False
    desired_tag: str | None = None
    ext_filter: dict[str, Any] | None = None
    connect_timeout: float = 5.0
    request_timeout: float = 30.0
    extra_identify: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`ConfigError` (``setting`` = the field) for a value nsqd would
        refuse at IDENTIFY, or a timeout that cannot work: refused here, it names the
        field and its range instead of coming back as nsqd's ``E_BAD_BODY``.

        A plain ``str``/``bytes`` secret is wrapped in :class:`Secret` at once, so no
        ``repr`` or error ever shows it; ``tls=True`` means TLS with the defaults."""
        secret: object = self.auth_secret
        if isinstance(secret, (str, bytes)):
            self.auth_secret = Secret(secret, "auth_secret") if secret else None
        elif secret is not None and not isinstance(secret, Secret):
            raise ConfigError(
                f"auth_secret must be an nsqctl.Secret, a str or bytes, not "
                f"{type(secret).__name__}",
                setting="auth_secret",
            )
        tls: object = self.tls
        if tls is True:
            self.tls = TLSSettings()
        elif tls is False:
            self.tls = None
        elif tls is not None and not isinstance(tls, TLSSettings):
            raise ConfigError(
                f"tls must be an nsqctl.TLSSettings (or True for its defaults), not "
                f"{type(tls).__name__}",
                setting="tls",
            )
        check_bounds(self, CONNECTION_BOUNDS)
        try:
            validate_compression(self.compression)
        except ConfigError as err:
            raise ConfigError(str(err), setting="compression") from None

    def for_consumer(self, output_buffer: str, channel: str) -> ConnectionConfig:
        """This config for a consumer of ``channel``, with the output buffering the
        output-buffer setting (``auto``, ``none`` or a duration) asks for on that channel
        (:func:`~nsqctl.protocol.output_buffer.output_buffer_fields`): every consumer of a
        channel, whatever starts it, gets the same buffering from the same setting."""
        buffering: dict[str, Any] = dict(
            output_buffer_fields(output_buffer, durable=not is_ephemeral(channel))
        )
        return replace(self, **buffering) if buffering else self

    def identify_body(self) -> dict[str, Any]:
        """The IDENTIFY JSON (feature negotiation on)."""
        self.validate()  # the fields are assignable after construction
        host = self.hostname or socket.gethostname()
        body: dict[str, Any] = {
            "client_id": self.client_id or host.split(".")[0],
            "hostname": host,
            "user_agent": self.user_agent,
            "feature_negotiation": True,
            "heartbeat_interval": self.heartbeat_interval_ms,
            "tls_v1": self.tls is not None,
            "snappy": self.compression == "snappy",
            "deflate": self.compression == "deflate",
            "deflate_level": self.deflate_level,
            "sample_rate": self.sample_rate,
        }
        if self.msg_timeout_ms is not None:
            body["msg_timeout"] = self.msg_timeout_ms
        if self.output_buffer_size is not None:
            body["output_buffer_size"] = self.output_buffer_size
        if self.output_buffer_timeout_ms is not None:
            body["output_buffer_timeout"] = self.output_buffer_timeout_ms
        if self.extend_support:
            body["extend_support"] = True
        if self.desired_tag:
            body["desired_tag"] = self.desired_tag
        if self.ext_filter:
            body["ext_filter"] = self.ext_filter
        body.update(self.extra_identify)
        return body
