"""Real NSQ servers for local clusters: building them from their Go modules (``build``,
``modsources``), the catalog of both families' binaries and tools, and starting, pausing
and stopping nsqd/nsqlookupd/etcd processes by PID (``process``, ``cluster``). Used by
``nsqctl sandbox``, the tests' fixtures and the benchmarks; nothing here is imported by the
client library."""
