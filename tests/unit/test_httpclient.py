"""http_client: a plain-HTTP client that skips loading the CA bundle, and fails closed
if an https:// URL reached it anyway (no trusted roots, verification still on)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import httpx
import pytest

from nsqctl.httpclient import http_client
from tests.helpers.certs import make_tls_files


async def test_plain_http_works() -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with http_client(timeout=5) as client:
            resp = await client.get(f"http://127.0.0.1:{port}/ping")
        assert resp.status_code == 200 and resp.text == "ok"
    finally:
        server.close()
        await server.wait_closed()


async def test_https_fails_closed_even_with_a_valid_chain(tmp_path: Path) -> None:
    """The server's certificate is fine for 127.0.0.1 under its test CA; the client has no
    roots at all, so it must refuse rather than talk unverified."""
    files = make_tls_files(tmp_path)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(files.server_cert, files.server_key)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        async with http_client(timeout=5) as client:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get(f"https://127.0.0.1:{port}/")
    finally:
        server.close()
        await server.wait_closed()
