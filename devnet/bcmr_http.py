"""The devnet's little HTTP server: token registries (BCMR) and the scenario's ledger.

Registries published on chain as `ipfs://<cid>` are served at `/ipfs/<cid>` (point an indexer's
IPFS gateway at `http://host:port/ipfs/`), those published as `http://…` at their own path.
A tiny asyncio HTTP/1.1 server (GET and HEAD, keep-alive) is all this needs: it binds to
loopback, serves a fixed set of byte strings, and must start in milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from http import HTTPStatus

import orjson

MAX_HEAD = 16 * 1024
IDLE_TIMEOUT = 30.0


class DocumentServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.documents: dict[str, tuple[bytes, str]] = {}
        self.requests = 0
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def publish(self, path: str, body: bytes, content_type: str = "application/json") -> None:
        if not path.startswith("/"):
            raise ValueError(f"a path starts with '/': {path!r}")
        self.documents[path] = (body, content_type)

    async def start(self) -> None:
        """Listen (port 0 picks a free one, read back from `port`)."""
        if self._server is None:
            self._server = await asyncio.start_server(
                self._serve, self.host, self.port, limit=MAX_HEAD
            )
            self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in list(self._connections):
            writer.close()
        await server.wait_closed()

    def _index(self) -> bytes:
        return orjson.dumps({"documents": sorted(self.documents)})

    def _response(self, method: str, path: str) -> tuple[HTTPStatus, bytes, str]:
        if method not in ("GET", "HEAD"):
            return (
                HTTPStatus.METHOD_NOT_ALLOWED,
                b'{"error":"GET or HEAD only"}',
                "application/json",
            )
        path = path.split("?", 1)[0]
        if path == "/":
            return HTTPStatus.OK, self._index(), "application/json"
        found = self.documents.get(path)
        if found is None:
            return HTTPStatus.NOT_FOUND, b'{"error":"not found"}', "application/json"
        return HTTPStatus.OK, found[0], found[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            while True:
                try:
                    async with asyncio.timeout(IDLE_TIMEOUT):
                        head = await reader.readuntil(b"\r\n\r\n")
                except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
                    writer.write(_head(HTTPStatus.BAD_REQUEST, 0, "text/plain", close=True))
                    return
                method, path, version = parts
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                if headers.get("content-length", "0") != "0":
                    writer.write(_head(HTTPStatus.BAD_REQUEST, 0, "text/plain", close=True))
                    return
                connection = headers.get("connection", "").lower()
                close = connection == "close" or (
                    version == "HTTP/1.0" and connection != "keep-alive"
                )
                status, body, content_type = self._response(method, path)
                self.requests += 1
                writer.write(_head(status, len(body), content_type, close=close))
                if method != "HEAD":
                    writer.write(body)
                await writer.drain()
                if close:
                    return
        except ConnectionError:
            return
        finally:
            self._connections.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


def _head(status: HTTPStatus, length: int, content_type: str, *, close: bool) -> bytes:
    return (
        f"HTTP/1.1 {status.value} {status.phrase}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\n"
        "Access-Control-Allow-Origin: *\r\n"
        f"Connection: {'close' if close else 'keep-alive'}\r\n"
        "\r\n"
    ).encode()
