"""BCHN's JSON-RPC over HTTP/1.1: `RpcAddress` (where and how to log in) and `BitcoindRpc`.

The node's HTTP server (libevent) keeps connections alive and serves `-rpcthreads` requests at
once, queueing up to `-rpcworkqueue` (beyond: HTTP 503). `BitcoindRpc` therefore keeps a few
keep-alive connections and lets at most `connections` requests be in flight; a pipelined block
fetch waits for a free one rather than overflowing the node's queue. JSON-RPC batches (one HTTP
request, an array of calls) carry the many small calls (block hashes, headers).

Every call here is a read, so a broken connection, a timeout or a full work queue is retried on
a fresh connection (`retries` times, with a growing pause); the node's own errors are answers
and are raised at once. The cookie file is read again after a refused login: the node writes a
new one each time it starts.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson

from indexer.bitcoind.errors import (
    RpcBusy,
    RpcConnectionError,
    RpcError,
    RpcProtocolError,
    RpcTimeout,
    error_of,
)

log = logging.getLogger(__name__)

DEFAULT_PORT = 8332
DEFAULT_CONNECTIONS = 4  # BCHN's default -rpcthreads
DEFAULT_TIMEOUT = 120.0  # a 32 MB block is 64 MB of hex
MAX_HEADER_BYTES = 64 * 1024

RpcCall = tuple[str, Sequence[Any]]


@dataclass(frozen=True, slots=True)
class RpcAddress:
    """A node's RPC endpoint and login: user and password from the URL, or a cookie file."""

    host: str
    port: int
    user: str = ""
    password: str = ""
    cookie: Path | None = None

    @classmethod
    def parse(cls, url: str, *, cookie: str | Path | None = None) -> RpcAddress:
        """`http://user:password@host:port` (or `host:port` with a `cookie` file, as the node
        writes it: `__cookie__:secret`). ValueError naming the problem."""
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http":
            raise ValueError(f"bitcoind RPC URL must be http://, got {url!r}")
        if not parts.hostname:
            raise ValueError(f"bitcoind RPC URL without a host: {url!r}")
        try:
            port = parts.port or DEFAULT_PORT
        except ValueError:
            raise ValueError(f"bitcoind RPC URL with a bad port: {url!r}") from None
        user, password = unquote(parts.username or ""), unquote(parts.password or "")
        if cookie is not None and user:
            raise ValueError("give the RPC login in the URL or a cookie file, not both")
        if cookie is None and not user:
            raise ValueError(
                "bitcoind RPC needs a login: http://user:password@host:port or a cookie file"
            )
        return cls(parts.hostname, port, user, password, None if cookie is None else Path(cookie))

    @property
    def url(self) -> str:
        """The endpoint without its secret, for logs."""
        return f"http://{self.host}:{self.port}"

    def authorization(self) -> str:
        """The `Authorization` header's value (the cookie file read now)."""
        if self.cookie is not None:
            try:
                login = self.cookie.read_text().strip()
            except OSError as exc:
                message = f"cannot read the RPC cookie {self.cookie}: {exc}"
                raise RpcConnectionError(message) from None
        else:
            login = f"{self.user}:{self.password}"
        return "Basic " + base64.b64encode(login.encode()).decode()


class _Http:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def post(self, host: str, auth: str, body: bytes) -> tuple[int, bytes]:
        head = (
            f"POST / HTTP/1.1\r\nHost: {host}\r\nAuthorization: {auth}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        await self.writer.drain()
        status_line = await self.reader.readuntil(b"\r\n")
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise RpcProtocolError(f"not an HTTP answer: {status_line[:80]!r}")
        status = int(parts[1])
        headers: dict[bytes, bytes] = {}
        size = 0
        while True:
            line = await self.reader.readuntil(b"\r\n")
            size += len(line)
            if size > MAX_HEADER_BYTES:
                raise RpcProtocolError("HTTP headers too long")
            if line == b"\r\n":
                break
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
            data = await self._chunked()
        elif b"content-length" in headers:
            data = await self.reader.readexactly(int(headers[b"content-length"]))
        else:
            data = await self.reader.read()
            self.writer.close()
        if headers.get(b"connection", b"").lower() == b"close":
            self.writer.close()
        return status, data

    async def _chunked(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return b"".join(chunks)
            chunks.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)

    @property
    def closed(self) -> bool:
        return self.writer.is_closing()

    def close(self) -> None:
        self.writer.close()


class BitcoindRpc:
    """See the module doc. `call` and `batch` are safe to run concurrently."""

    def __init__(
        self,
        address: RpcAddress,
        *,
        connections: int = DEFAULT_CONNECTIONS,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        retry_delay: float = 0.25,
    ) -> None:
        if connections < 1:
            raise ValueError("at least one RPC connection is needed")
        self.address = address
        self.timeout = timeout
        self.retries = retries
        self.retry_delay = retry_delay
        self.requests = 0  # HTTP requests sent (a batch is one)
        self.calls = 0  # JSON-RPC calls sent (each of a batch counts)
        self._gate = asyncio.Semaphore(connections)
        self._idle: list[_Http] = []
        self._auth: str | None = None
        self._ids = itertools.count(1)
        self._closed = False

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
            with contextlib.suppress(Exception):
                await conn.writer.wait_closed()

    async def call(self, method: str, *params: Any, timeout: float | None = None) -> Any:
        """The result of `method(*params)`; RpcError (or a subclass) when the node refuses."""
        body = orjson.dumps({"jsonrpc": "1.0", "id": 0, "method": method, "params": params})
        self.calls += 1
        reply = await self._post(body, timeout)
        if not isinstance(reply, dict):
            raise RpcProtocolError(f"{method}: the answer is not a JSON-RPC object")
        return _result(reply, method)

    async def batch(
        self, calls: Sequence[RpcCall], *, timeout: float | None = None
    ) -> list[Any | RpcError]:
        """Each call's result or RpcError, in order, from one HTTP request."""
        if not calls:
            return []
        first = next(self._ids) * 1_000_000
        body = orjson.dumps(
            [
                {"jsonrpc": "1.0", "id": first + i, "method": m, "params": list(p)}
                for i, (m, p) in enumerate(calls)
            ]
        )
        self.calls += len(calls)
        reply = await self._post(body, timeout)
        if not isinstance(reply, list) or len(reply) != len(calls):
            raise RpcProtocolError("a batch answer is not one reply per call")
        by_id = {r.get("id"): r for r in reply if isinstance(r, dict)}
        out: list[Any | RpcError] = []
        for i, (method, _) in enumerate(calls):
            item = by_id.get(first + i)
            if item is None:
                raise RpcProtocolError(f"a batch answer lacks the reply to {method}")
            try:
                out.append(_result(item, method))
            except RpcError as exc:
                out.append(exc)
        return out

    # --- HTTP -----------------------------------------------------------------------------------

    async def _post(self, body: bytes, timeout: float | None) -> Any:
        attempt = 0
        while True:
            try:
                status, data = await self._post_once(body, timeout)
            except (RpcBusy, RpcTimeout, RpcConnectionError):
                if attempt >= self.retries or self._closed:
                    raise
                attempt += 1
                await asyncio.sleep(self.retry_delay * attempt)
                continue
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                raise RpcProtocolError(
                    f"{self.address.url}: HTTP {status}, not JSON: {data[:120]!r}"
                ) from None

    async def _post_once(self, body: bytes, timeout: float | None) -> tuple[int, bytes]:
        async with self._gate:
            conn = await self._connection()
            try:
                async with asyncio.timeout(self.timeout if timeout is None else timeout):
                    self.requests += 1
                    status, data = await conn.post(
                        f"{self.address.host}:{self.address.port}", self._authorization(), body
                    )
            except TimeoutError:
                conn.close()
                raise RpcTimeout(f"{self.address.url}: no answer in time") from None
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                conn.close()
                reason = str(exc) or type(exc).__name__
                raise RpcConnectionError(f"{self.address.url}: {reason}") from None
            except BaseException:
                conn.close()
                raise
            if not conn.closed and not self._closed:
                self._idle.append(conn)
        if status in (401, 403):
            self._auth = None  # a cookie is read again: the node may have restarted
            raise RpcConnectionError(f"{self.address.url}: login refused (HTTP {status})")
        if status == 503:
            raise RpcBusy(f"{self.address.url}: work queue full (HTTP 503)")
        return status, data

    def _authorization(self) -> str:
        if self._auth is None:
            self._auth = self.address.authorization()
        return self._auth

    async def _connection(self) -> _Http:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        if self._closed:
            raise RpcConnectionError("the RPC client is closed")
        try:
            async with asyncio.timeout(10.0):
                reader, writer = await asyncio.open_connection(
                    self.address.host, self.address.port, limit=1 << 20
                )
        except (OSError, TimeoutError) as exc:
            raise RpcConnectionError(
                f"{self.address.url}: cannot connect ({exc or type(exc).__name__})"
            ) from None
        return _Http(reader, writer)


def _result(reply: dict[str, Any], method: str) -> Any:
    error = reply.get("error")
    if error:
        if not isinstance(error, dict):
            raise RpcProtocolError(f"{method}: error {error!r}")
        raise error_of(int(error.get("code", 0)), str(error.get("message", "")), method)
    return reply.get("result")
