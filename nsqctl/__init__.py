"""nsqctl: an NSQ client library, operator CLI and dashboard for both NSQ families.

The client core (``import nsqctl``) is usable on its own; the CLI and the dashboard are
thin layers over it.
"""

from __future__ import annotations

__version__ = "0.1.0"

from nsqctl.errors import ConfigError, NsqctlError, ServerSetupError

__all__ = ["ConfigError", "NsqctlError", "ServerSetupError", "__version__"]
