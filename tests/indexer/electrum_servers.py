"""Shared pieces for the Electrum client tests (this module holds no tests).

- `running_devnet`: the devnet, the client's protocol peer, on free loopback ports.
- `RecordingProxy`: forwards TCP lines to a server and keeps what the client sent on each
  connection, to check the client's side of the protocol (version first and once, ids, batches).
- `ScriptedServer`: a loopback JSON-RPC server answering as a test scripts it, for what a
  well-behaved server never does (unknown ids, garbage, a lying answer, protocol 1.5 shapes).
- `TlsFront`: TLS termination in front of a plain TCP or WebSocket listener (TLS and WSS).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

from devnet.service import Devnet, DevnetConfig
from indexer.electrum import Backoff, ElectrumClient

LIMIT = 64 * 1024 * 1024


@asynccontextmanager
async def running_devnet(**overrides: Any) -> AsyncIterator[Devnet]:
    settings: dict[str, Any] = {"tcp_base": 0, "ws_base": 0, "verify": False}
    settings.update(overrides)
    net = Devnet(DevnetConfig(**settings))
    await net.start()
    try:
        yield net
    finally:
        await net.stop()


def tcp_url(net: Devnet, node: int = 0) -> str:
    return f"tcp://127.0.0.1:{net.servers[node].tcp_port}"


def ws_url(net: Devnet, node: int = 0) -> str:
    return f"ws://127.0.0.1:{net.servers[node].ws_port}"


async def set_down(net: Devnet, node: int, down: bool) -> None:
    """The node's Electrum listener goes down (every connection closed) or comes back."""
    net.nodes[node].set_faults(down=down)
    await net.servers[node].apply_faults()


def client(urls: list[str], **overrides: Any) -> ElectrumClient:
    """A client with test-sized timeouts and backoff."""
    settings: dict[str, Any] = {
        "timeout": 3.0,
        "connect_timeout": 3.0,
        "backoff": Backoff(base=0.02, cap=0.2),
        "give_up_after": 3.0,
        "ping_interval": None,
    }
    settings.update(overrides)
    return ElectrumClient(urls, **settings)


@asynccontextmanager
async def connected(urls: list[str], **overrides: Any) -> AsyncIterator[ElectrumClient]:
    """A started client that connected to the servers in the order given (no probing)."""
    c = client(urls, **overrides)
    try:
        await c.start(probe=False)
        yield c
    finally:
        await c.close()


async def eventually(check: Callable[[], bool], timeout: float = 3.0) -> None:
    """Wait until `check()` holds (polling), failing the test after `timeout` seconds."""
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.01)


class RecordingProxy:
    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.sessions: list[list[Any]] = []  # per client connection: the messages it sent
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    @classmethod
    @asynccontextmanager
    async def running(cls, host: str, port: int) -> AsyncIterator[RecordingProxy]:
        proxy = cls(host, port)
        proxy._server = await asyncio.start_server(proxy._handle, "127.0.0.1", 0, limit=LIMIT)
        proxy.port = proxy._server.sockets[0].getsockname()[1]
        try:
            yield proxy
        finally:
            proxy._server.close()
            for w in list(proxy._writers):
                w.close()
            await proxy._server.wait_closed()

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def calls(self, session: int) -> list[dict[str, Any]]:
        """The requests of one connection in order, batches flattened."""
        out: list[dict[str, Any]] = []
        for message in self.sessions[session]:
            out.extend(message if isinstance(message, list) else [message])
        return out

    def methods(self, session: int) -> list[str]:
        return [c["method"] for c in self.calls(session)]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        log: list[Any] = []
        self.sessions.append(log)
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream, limit=LIMIT)
        except OSError:
            writer.close()
            return
        self._writers.add(up_writer)

        async def upward() -> None:
            while line := await reader.readline():
                log.append(orjson.loads(line))
                up_writer.write(line)
                await up_writer.drain()

        async def downward() -> None:
            while line := await up_reader.readline():
                writer.write(line)
                await writer.drain()

        tasks = [asyncio.create_task(upward()), asyncio.create_task(downward())]
        with contextlib.suppress(Exception):
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        for w in (writer, up_writer):
            w.close()
            self._writers.discard(w)


class ScriptedPeer:
    """The server side of one connection to a ScriptedServer."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.received: list[dict[str, Any]] = []

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data + b"\n")
        await self.writer.drain()

    async def send(self, message: object) -> None:
        await self.send_raw(orjson.dumps(message))

    async def reply(self, request: dict[str, Any], result: object) -> None:
        await self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    async def error(self, request: dict[str, Any], code: int, message: str) -> None:
        error = {"code": code, "message": message}
        await self.send({"jsonrpc": "2.0", "id": request["id"], "error": error})

    def close(self) -> None:
        self.writer.close()


Handler = Callable[[ScriptedPeer, dict[str, Any]], Awaitable[None]]


class ScriptedServer:
    """Answers `server.version` with `protocol` itself; every other request (batch elements
    one by one, answered individually) goes to `handler`."""

    def __init__(self, handler: Handler, *, protocol: str = "1.5") -> None:
        self.handler = handler
        self.protocol = protocol
        self.peers: list[ScriptedPeer] = []
        self.port = 0

    @classmethod
    @asynccontextmanager
    async def running(
        cls, handler: Handler, *, protocol: str = "1.5"
    ) -> AsyncIterator[ScriptedServer]:
        scripted = cls(handler, protocol=protocol)
        server = await asyncio.start_server(scripted._handle, "127.0.0.1", 0, limit=LIMIT)
        scripted.port = server.sockets[0].getsockname()[1]
        try:
            yield scripted
        finally:
            server.close()
            for peer in scripted.peers:
                peer.close()
            await server.wait_closed()

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = ScriptedPeer(writer)
        self.peers.append(peer)
        with contextlib.suppress(ConnectionError, OSError):
            while line := await reader.readline():
                message = orjson.loads(line)
                for request in message if isinstance(message, list) else [message]:
                    peer.received.append(request)
                    if request["method"] == "server.version":
                        await peer.reply(request, ["scripted 0", self.protocol])
                    else:
                        await self.handler(peer, request)
        writer.close()


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and localhost), made with the openssl CLI."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


class TlsFront:
    """Terminates TLS and pipes the bytes to a plain listener on 127.0.0.1:`upstream_port`."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0

    @classmethod
    @asynccontextmanager
    async def running(cls, upstream_port: int, cert: Path, key: Path) -> AsyncIterator[TlsFront]:
        front = cls(upstream_port)
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        server = await asyncio.start_server(front._handle, "127.0.0.1", 0, ssl=ctx, limit=LIMIT)
        front.port = server.sockets[0].getsockname()[1]
        try:
            yield front
        finally:
            server.close()
            await server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
