"""The user's config file: named cluster profiles in TOML under the platform config dir.

Example (``nsqctl config path`` prints where it lives)::

    default_profile = "prod"

    [profiles.prod]
    lookupd = ["10.0.0.1:4161", "10.0.0.2:4161"]
    tls_ca = "/etc/nsq/ca.pem"
    auth_secret_file = "~/.config/nsqctl/prod.secret"

Keys of a profile: lookupd, nsqd, nsqd_http (lists of HOST:PORT), tls (bool), tls_ca,
tls_cert, tls_key (only with tls_cert), tls_key_password_file (a file holding an encrypted
tls_key's passphrase), tls_insecure (any tls_* key turns TLS on, as its flag does),
auth_secret_file, compression (none|snappy|deflate), output_buffer (auto, none
or a duration such as "100ms": how long nsqd may hold a consumer's messages, see
:mod:`nsqctl.protocol.output_buffer`), read_only (bool: refuse
every command that changes the cluster or consumes a durable channel, as ``--read-only``),
check (health rules for ``nsqctl check`` and ``nsqctl exporter``, e.g.
``["max-depth:orders*/*=1000,5000", "orphan=crit"]``; see :mod:`nsqctl.health.spec`).
A secret itself never lives in this file, only the path of a file holding it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

from nsqctl.errors import ConfigError
from nsqctl.protocol.compression import validate_compression
from nsqctl.protocol.output_buffer import AUTO, parse_output_buffer

CONFIG_ENV = "NSQCTL_CONFIG"
PROFILE_ENV = "NSQCTL_PROFILE"
_LIST_KEYS = ("lookupd", "nsqd", "nsqd_http")
_STR_KEYS = (
    "tls_ca",
    "tls_cert",
    "tls_key",
    "tls_key_password_file",
    "auth_secret_file",
    "compression",
    "output_buffer",
)
_BOOL_KEYS = ("tls", "tls_insecure", "read_only")
_RULE_KEYS = ("check",)


def config_path() -> Path:
    """``$NSQCTL_CONFIG`` if set, else ``<user config dir>/nsqctl/config.toml``."""
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs  # here: its import costs more than the rest of this module

    return Path(platformdirs.user_config_dir("nsqctl")) / "config.toml"


# A NamedTuple, not a dataclass: Python 3.11 compiles a dataclass's methods as its module
# loads, at every start (what it costs: bench/README.md, Start-up), and every command
# that finds its cluster loads this module.
class Profile(NamedTuple):
    """One named cluster: where it is and how to talk to it."""

    name: str
    lookupd: tuple[str, ...] = ()
    nsqd: tuple[str, ...] = ()
    nsqd_http: tuple[str, ...] = ()
    tls: bool = False
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_key_password_file: str | None = None
    tls_insecure: bool = False
    auth_secret_file: str | None = None
    compression: str = "none"
    output_buffer: str = AUTO
    check: tuple[str, ...] = ()
    read_only: bool = False

    def to_toml_table(self) -> dict[str, Any]:
        """The non-default keys, as written back to the file."""
        out: dict[str, Any] = {}
        for name in self._fields:
            if name == "name":
                continue
            value = getattr(self, name)
            if value in ((), None, False) or value == _DEFAULTS.get(name):
                continue
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


#: string keys whose default is not None: left out of the file when they hold it
_DEFAULTS = {"compression": "none", "output_buffer": AUTO}


class ConfigFile:
    """The config file as read: its profiles by name and the default one's name. A plain
    class (never compared, printed or replaced), not a dataclass: see :class:`Profile`."""

    __slots__ = ("default_profile", "path", "profiles")

    def __init__(
        self,
        path: Path,
        profiles: dict[str, Profile] | None = None,
        default_profile: str | None = None,
    ) -> None:
        self.path = path
        self.profiles: dict[str, Profile] = {} if profiles is None else profiles
        self.default_profile = default_profile

    def profile(self, name: str) -> Profile:
        try:
            return self.profiles[name]
        except KeyError:
            known = ", ".join(sorted(self.profiles)) or "none defined"
            raise ConfigError(
                f"no profile {name!r} in {self.path} (profiles: {known}); add one with "
                f"`config_set_profile({name}, lookupd=HOST:PORT)`"
            ) from None


def _profile_from_table(name: str, table: object, path: Path) -> Profile:
    where = f"{path}: [profiles.{name}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table of settings")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key in _LIST_KEYS:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f'{where}: {key} must be a list of "HOST:PORT" strings')
            values[key] = tuple(value)
        elif key in _STR_KEYS:
            if not isinstance(value, str):
                raise ConfigError(f"{where}: {key} must be a string")
            if key == "compression":
                try:
                    values[key] = validate_compression(value)
                except ConfigError as err:
                    raise ConfigError(f"{where}: {err}") from None
            elif key == "output_buffer":
                values[key] = parse_output_buffer(value, setting=f"{where}: output_buffer")
            else:
                values[key] = str(Path(value).expanduser())
        elif key in _BOOL_KEYS:
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: {key} must be true or false")
            values[key] = value
        elif key in _RULE_KEYS:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(
                    f'{where}: {key} must be a list of rule strings ("max-depth=100")'
                )
            values[key] = tuple(value)
        else:
            allowed = ", ".join((*_LIST_KEYS, *_STR_KEYS, *_BOOL_KEYS, *_RULE_KEYS))
            raise ConfigError(f"{where}: unknown key {key!r} (known keys: {allowed})")
    return Profile(name=name, **values)


def load_config(path: Path | None = None) -> ConfigFile:
    """Read the config file; a missing file is an empty config, a broken one an error."""
    path = path or config_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return ConfigFile(path)
    except OSError as err:
        raise ConfigError(f"cannot read the config file {path}: {err.strerror}") from None
    import tomllib  # here: every command reads the config, most find no file

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"the config file {path} is not valid TOML: {err}") from None
    tables = data.get("profiles", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"{path}: `profiles` must be a table of [profiles.NAME] tables")
    profiles = {name: _profile_from_table(name, t, path) for name, t in tables.items()}
    default = data.get("default_profile")
    if default is not None and not isinstance(default, str):
        raise ConfigError(f"{path}: default_profile must be a profile name")
    return ConfigFile(path, profiles, default)


def save_profile(profile: Profile, path: Path | None = None, make_default: bool = False) -> Path:
    """Add or replace one profile, keeping the others; written atomically."""
    import tomli_w

    cfg = load_config(path)
    data: dict[str, Any] = {}
    default = profile.name if make_default else cfg.default_profile
    if default:
        data["default_profile"] = default
    profiles = dict(cfg.profiles)
    profiles[profile.name] = profile
    data["profiles"] = {name: p.to_toml_table() for name, p in sorted(profiles.items())}
    tmp = cfg.path.with_suffix(".toml.tmp")
    try:
        cfg.path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(tomli_w.dumps(data))
        os.replace(tmp, cfg.path)
    except OSError as err:
        raise ConfigError(
            f"cannot write the config file {cfg.path}: {err.strerror or err}"
        ) from None
    return cfg.path
