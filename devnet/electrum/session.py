"""One client connection: negotiated protocol, subscriptions, and an ordered outgoing queue.

Responses and notifications go through the same queue, so a client sees them in the order the
server produced them, and node events (raised synchronously inside the node) never wait on a
socket.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from devnet.electrum.framing import encode, notification

PROTOCOL_MIN = (1, 4)
PROTOCOL_MAX = (1, 6)

Sender = Callable[[bytes], Awaitable[None]]


class Session:
    def __init__(
        self, send: Sender, abort: Callable[[], None], close: Callable[[], None], peer: str
    ) -> None:
        self.peer = peer
        self.protocol: tuple[int, ...] = PROTOCOL_MIN
        self.version_done = False
        self.headers_subscribed = False
        self.scripthashes: dict[bytes, str | None] = {}  # subscribed → last status sent
        self.closed = False
        self._send = send
        self._abort = abort
        self._close = close
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._writer = asyncio.create_task(self._write_loop())

    def push(self, message: object) -> None:
        if not self.closed:
            self._queue.put_nowait(encode(message))

    def notify(self, method: str, params: list[object]) -> None:
        self.push(notification(method, params))

    async def _write_loop(self) -> None:
        try:
            while (data := await self._queue.get()) is not None:
                await self._send(data)
        except Exception:  # OSError on TCP, ConnectionClosed from websockets
            self.abort()

    async def flush_and_close(self, timeout: float = 2.0) -> None:
        """Let queued messages out, then close the connection (a clean end)."""
        if self.closed:
            return
        self._queue.put_nowait(None)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(timeout):
                await asyncio.shield(self._writer)
        self.closed = True
        self._writer.cancel()
        self._close()

    def abort(self) -> None:
        """Drop the connection now, without sending what is queued."""
        if not self.closed:
            self.closed = True
            self._writer.cancel()
            self._abort()
