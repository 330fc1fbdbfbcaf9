"""The exception hierarchy every layer raises.

Every error carries a message a user can act on; the CLI prints ``str(err)`` as one
line. Secrets never go into a message.
"""

from __future__ import annotations


class NsqctlError(Exception):
    """Base of every error nsqctl raises on purpose."""


class ConfigError(NsqctlError):
    """Bad input from the user: an address, a name, a flag combination."""


class ServerSetupError(NsqctlError):
    """A local server could not be built or started (sandbox and test fixtures)."""
