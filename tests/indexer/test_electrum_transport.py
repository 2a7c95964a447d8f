"""Transports over real loopback sockets: TCP lines, WebSocket frames, TLS and WSS, the message
size cap, and failures surfacing as ElectrumConnectionError."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, serve

from indexer.electrum import ElectrumConnection, ElectrumConnectionError, ServerAddress
from indexer.electrum.transport import open_transport, ssl_context
from tests.indexer.electrum_servers import TlsFront, make_certificate, running_devnet

RawHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def raw_server(handler: RawHandler) -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_tcp_lines_are_messages_however_the_bytes_arrive() -> None:
    received: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readline())
        writer.write(b'{"a":1}\n{"b":2}\r\n{"c"')
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b":3}\n")
        await writer.drain()
        writer.close()

    async with raw_server(handler) as port:
        t = await open_transport(ServerAddress("tcp", "127.0.0.1", port))
        await t.send(b'{"x":"y"}')
        assert [await t.recv() for _ in range(3)] == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
        with pytest.raises(ElectrumConnectionError, match="closed"):
            await t.recv()
        await t.close()
    assert received == [b'{"x":"y"}\n']


async def test_tcp_message_size_cap() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"x" * 1000 + b"\n" + b"y" * 1025 + b"\n")
        await writer.drain()
        await reader.read()

    async with raw_server(handler) as port:
        t = await open_transport(ServerAddress("tcp", "127.0.0.1", port), max_message=1024)
        assert await t.recv() == b"x" * 1000
        with pytest.raises(ElectrumConnectionError, match="longer than 1024"):
            await t.recv()
        await t.close()


async def test_connect_refused() -> None:
    for scheme in ("tcp", "ws"):
        with pytest.raises(ElectrumConnectionError, match="connect failed"):
            await open_transport(ServerAddress(scheme, "127.0.0.1", free_port()), timeout=2)


async def test_websocket_frames_with_or_without_trailing_newline() -> None:
    got: list[str | bytes] = []

    async def handler(ws: ServerConnection) -> None:
        got.append(await ws.recv())
        await ws.send('{"a":1}\n')
        await ws.send('{"b":2}')
        await ws.send(b'{"c":3}\r\n')  # a binary frame is accepted too
        await ws.send("z" * 2000)

    async with serve(handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        t = await open_transport(ServerAddress("ws", "127.0.0.1", port, "/"), max_message=1024)
        await t.send(b'{"x":"y"}')
        assert [await t.recv() for _ in range(3)] == [b'{"a":1}', b'{"b":2}', b'{"c":3}']
        with pytest.raises(ElectrumConnectionError):  # over the cap: the frame is refused
            await t.recv()
        await t.close()
    assert got == ['{"x":"y"}']  # one text frame, no newline


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    return make_certificate(tmp_path)


@pytest.mark.parametrize("scheme", ["tls", "wss"])
async def test_tls_and_wss_against_the_devnet(scheme: str, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    async with running_devnet() as net:
        server = net.servers[0]
        upstream = server.tcp_port if scheme == "tls" else server.ws_port
        assert upstream is not None
        async with TlsFront.running(upstream, cert, key) as front:
            url = f"{scheme}://127.0.0.1:{front.port}"
            conn = await ElectrumConnection.open(url, ssl_ctx=ssl_context(cafile=str(cert)))
            try:
                assert conn.protocol == (1, 6)
                tip = await conn.request("blockchain.headers.get_tip")
                assert tip["hex"] == net.nodes[0].chain.tip.header_bytes.hex()
            finally:
                await conn.close()
            # A certificate nobody vouches for is refused by default …
            with pytest.raises(ElectrumConnectionError, match="connect failed"):
                await ElectrumConnection.open(url, connect_timeout=2)
            # … and accepted when verification is turned off on purpose.
            conn = await ElectrumConnection.open(url, ssl_ctx=ssl_context(verify=False))
            assert await conn.request("server.ping") is None
            await conn.close()
