"""Test-only helpers: throw-away TLS material and a tiny nsqd auth server."""
