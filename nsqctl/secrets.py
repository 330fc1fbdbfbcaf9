"""Secrets (the AUTH secret, a TLS key's passphrase) that never show up in logs, reprs or
error messages."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nsqctl.errors import ConfigError

AUTH_SECRET_ENV = "NSQCTL_AUTH_SECRET"


class Secret:
    """Holds a secret value; ``str``/``repr`` print a mask so it cannot leak by accident."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str | bytes, source: str = "flag") -> None:
        self._value = value.encode() if isinstance(value, str) else bytes(value)
        self.source = source

    def reveal(self) -> bytes:
        """The secret itself; call only where it goes on the wire."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret(<hidden, from {self.source}>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def resolve_auth_secret(
    value: str | None = None, file: str | Path | None = None, env: str = AUTH_SECRET_ENV
) -> Secret | None:
    """The AUTH secret from a flag, else a file, else the environment (first found)."""
    if value:
        return Secret(value, "flag")
    if file:
        return read_secret_file(file, "auth secret file")
    from_env = os.environ.get(env)
    if from_env:
        return Secret(from_env, f"${env}")
    return None


def read_secret_file(file: str | Path, what: str) -> Secret:
    """The secret a file holds (``what`` names the file in errors), surrounding white
    space stripped. Bytes, not text: AUTH sends them as they are and OpenSSL takes a
    passphrase as bytes, so a secret that is not UTF-8 is no error."""
    path = Path(file)
    try:
        text = path.read_bytes().strip()
    except OSError as err:
        raise ConfigError(
            f"cannot read the {what} {path}: {err.strerror}; check the path and its permissions"
        ) from None
    if not text:
        raise ConfigError(f"the {what} {path} is empty")
    return Secret(text, f"file {path}")


def open_permissions(path: str | Path) -> int | None:
    """The permission bits of ``path`` when anyone but its owner may read or use it (the
    rule ssh applies to a private key file), else None (also when it cannot be read: the
    reader says why)."""
    try:
        bits = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None
    return bits if bits & 0o077 else None
