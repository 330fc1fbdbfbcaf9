"""The port check before a start asks what the servers' own bind would answer: a port
whose last connections sit in TIME-WAIT is free (the Go servers bind it with
SO_REUSEADDR), a port someone listens on is not. Real loopback sockets, no server."""

from __future__ import annotations

import socket

from nsqctl.servers import process
from tests.helpers.sockets import tcp_table

TIME_WAIT = "06"  # the kernel's hex state in /proc/net/tcp


def _leave_in_time_wait() -> int:
    """A loopback port that nothing listens on any more, whose accepted connection the
    server side closed first: that side's end stays in TIME-WAIT on the port, as a
    stopped server's connections do."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go servers do
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port: int = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = listener.accept()
            accepted.close()  # the server end closes first: it will hold TIME-WAIT
            assert client.recv(1) == b""  # the FIN arrived
    return port


def test_a_port_only_in_time_wait_is_free_and_a_listened_one_is_not() -> None:
    port = _leave_in_time_wait()
    assert any(r.local_port == port and r.state == TIME_WAIT for r in tcp_table())
    assert not process.port_in_use(port)
    assert process.free_ports(1, base=port) == [port]
    with socket.socket() as holder:  # listening, with the option the probe itself sets
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen()
        assert process.port_in_use(port)


def test_a_port_bound_without_the_option_is_in_use() -> None:
    """A socket bound (not listening) without SO_REUSEADDR refuses the servers' bind too."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        assert process.port_in_use(holder.getsockname()[1])
