"""Moving JSON-RPC messages over TCP, TLS, WS or WSS behind one interface: `send(message)`,
`recv()`, `close()`.

A message is one JSON text. On TCP/TLS it travels as one `\\n`-terminated line; on WS/WSS as one
text frame (a trailing newline, which some servers add, is stripped). Incoming messages are
capped at `max_message` bytes so a misbehaving server cannot exhaust memory: the cap must hold a
whole raw block in hex (a 32 MB block is ~64 MB of hex), hence the 64 MiB default. Every failure
surfaces as `ElectrumConnectionError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Protocol

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from indexer.electrum.address import ServerAddress
from indexer.electrum.errors import ElectrumConnectionError

MAX_MESSAGE = 64 * 1024 * 1024
CLOSE_TIMEOUT = 2.0


class Transport(Protocol):
    address: ServerAddress

    async def send(self, message: bytes) -> None:
        """Send one JSON message (no framing: the transport adds it)."""

    async def recv(self) -> bytes:
        """The next whole message, without framing; ElectrumConnectionError once closed."""

    async def close(self) -> None: ...


def ssl_context(*, verify: bool = True, cafile: str | None = None) -> ssl.SSLContext:
    """A client TLS context. `verify=False` accepts any certificate: many Electrum servers use
    self-signed ones, and the data is checked anyway (hashes, merkle roots)."""
    ctx = ssl.create_default_context(cafile=cafile)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class StreamTransport:
    """TCP or TLS: newline-delimited messages over an asyncio stream."""

    def __init__(
        self,
        address: ServerAddress,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_message: int,
    ) -> None:
        self.address = address
        self._reader = reader
        self._writer = writer
        self._max = max_message

    async def send(self, message: bytes) -> None:
        try:
            self._writer.write(message + b"\n")
            await self._writer.drain()
        except (OSError, RuntimeError) as exc:  # RuntimeError: writing to a closed transport
            raise ElectrumConnectionError(f"{self.address}: send failed: {exc}") from exc

    async def recv(self) -> bytes:
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            raise ElectrumConnectionError(f"{self.address}: connection closed by server") from None
        except asyncio.LimitOverrunError:
            raise ElectrumConnectionError(
                f"{self.address}: message longer than {self._max} bytes"
            ) from None
        except OSError as exc:
            raise ElectrumConnectionError(f"{self.address}: receive failed: {exc}") from exc
        return line.rstrip(b"\r\n")

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await self._writer.wait_closed()


class WebSocketTransport:
    """WS or WSS: one message per frame."""

    def __init__(self, address: ServerAddress, ws: ClientConnection) -> None:
        self.address = address
        self._ws = ws

    async def send(self, message: bytes) -> None:
        try:
            await self._ws.send(message.decode())
        except ConnectionClosed as exc:
            raise ElectrumConnectionError(f"{self.address}: send failed: {exc}") from exc

    async def recv(self) -> bytes:
        try:
            frame = await self._ws.recv()
        except ConnectionClosed as exc:
            raise ElectrumConnectionError(f"{self.address}: connection closed: {exc}") from exc
        raw = frame.encode() if isinstance(frame, str) else frame
        return raw.rstrip(b"\r\n")

    async def close(self) -> None:
        with contextlib.suppress(OSError, ConnectionClosed, TimeoutError):
            await self._ws.close()


async def open_transport(
    address: ServerAddress,
    *,
    timeout: float = 10.0,
    ssl_ctx: ssl.SSLContext | None = None,
    max_message: int = MAX_MESSAGE,
) -> Transport:
    """Connect to `address` (TLS for tls/wss, with `ssl_ctx` or a verifying default)."""
    tls = (ssl_ctx or ssl_context()) if address.secure else None
    try:
        async with asyncio.timeout(timeout):
            if address.websocket:
                ws = await connect(
                    address.url,
                    ssl=tls,
                    max_size=max_message,
                    compression=None,
                    ping_interval=None,  # keep-alive is `server.ping`, answered in order
                    close_timeout=CLOSE_TIMEOUT,
                    proxy=None,
                    open_timeout=None,  # bounded by the timeout above
                )
                return WebSocketTransport(address, ws)
            reader, writer = await asyncio.open_connection(
                address.host,
                address.port,
                ssl=tls,
                server_hostname=address.host if tls is not None else None,
                limit=max_message,
            )
            return StreamTransport(address, reader, writer, max_message)
    except TimeoutError:
        raise ElectrumConnectionError(f"{address}: connect timed out after {timeout}s") from None
    except (OSError, InvalidHandshake, InvalidURI) as exc:  # ssl.SSLError is an OSError
        raise ElectrumConnectionError(f"{address}: connect failed: {exc}") from exc
