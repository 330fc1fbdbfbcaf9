"""Which real NSQ servers nsqctl builds, from which Go modules, at which versions.

Both families are built from their Go modules (never downloaded as prebuilt binaries)
so tests, the sandbox and benchmarks run the servers' own code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Flavor = Literal["original", "redesign"]
FLAVORS: tuple[Flavor, ...] = ("original", "redesign")


@dataclass(frozen=True)
class ServerBuild:
    """One family's module, version and the commands built from it."""

    flavor: Flavor
    module: str
    version: str
    # binary name -> package path inside the module
    packages: dict[str, str]
    # Dependencies raised in the wrapper module because a newer Go toolchain trips on the
    # versions the upstream go.mod pins (module -> version).
    raise_deps: dict[str, str] = field(default_factory=dict)
    # Package (inside the module) that receives the test-mode overlay file, if any.
    overlay_package: str | None = None

    @property
    def key(self) -> str:
        """Cache key: flavour and version (a new version builds into a new directory)."""
        return f"{self.flavor}-{self.version}"


ORIGINAL = ServerBuild(
    flavor="original",
    module="github.com/nsqio/nsq",
    version="v1.3.0",
    packages={
        "nsqd": "apps/nsqd",
        "nsqlookupd": "apps/nsqlookupd",
        "nsq_tail": "apps/nsq_tail",
        "to_nsq": "apps/to_nsq",
        "nsq_stat": "apps/nsq_stat",
        "nsq_to_file": "apps/nsq_to_file",
        "bench_writer": "bench/bench_writer",
        "bench_reader": "bench/bench_reader",
    },
)

REDESIGN = ServerBuild(
    flavor="redesign",
    module="github.com/youzan/nsq",
    version="v0.3.7-HA.1.12.7",
    # youzan's own Go tools are the redesign's reference peers (nsq_tail has -ordered).
    packages={
        "nsqd": "apps/nsqd",
        "nsqlookupd": "apps/nsqlookupd",
        "nsq_tail": "apps/nsq_tail",
        "to_nsq": "apps/to_nsq",
        "bench_writer": "bench/bench_writer",
        "bench_reader": "bench/bench_reader",
    },
    raise_deps={"github.com/modern-go/reflect2": "v1.0.2"},
    overlay_package="nsqdserver",
)

BUILDS: dict[Flavor, ServerBuild] = {"original": ORIGINAL, "redesign": REDESIGN}

# Environment variable the overlay file reads to switch youzan nsqd into its test mode.
TESTMODE_ENV = "NSQCTL_NSQD_TESTMODE"
