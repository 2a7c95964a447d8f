"""A minimal Electrum client for the conformance tests: it only speaks to the devnet over its
sockets (TCP lines or WebSocket text frames), like any external client would."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from typing import Any

from websockets.asyncio.client import ClientConnection, connect


class ServerError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Client:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.other: asyncio.Queue[Any] = asyncio.Queue()  # batches, id-less errors
        self.closed = asyncio.Event()
        self._stash: list[dict[str, Any]] = []
        self._reader: asyncio.Task[None] | None = None

    # transport hooks
    async def send_text(self, text: str) -> None:
        raise NotImplementedError

    async def _recv(self) -> str | None:
        raise NotImplementedError

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader

    def _start(self) -> None:
        self._reader = asyncio.create_task(self._read_loop())

    async def _read_loop(self) -> None:
        try:
            while (text := await self._recv()) is not None:
                msg = json.loads(text)
                if isinstance(msg, dict) and "method" in msg and "id" not in msg:
                    self.notifications.put_nowait(msg)
                elif isinstance(msg, dict) and msg.get("id") in self._pending:
                    self._pending.pop(msg["id"]).set_result(msg)
                else:
                    self.other.put_nowait(msg)
        except Exception:
            pass
        finally:
            self.closed.set()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("connection closed"))

    async def request(self, method: str, *params: Any, timeout: float = 10) -> dict[str, Any]:
        """Send a request and return the whole response object."""
        req_id = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = fut
        body = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": list(params)}
        await self.send_text(json.dumps(body))
        return await asyncio.wait_for(fut, timeout)

    async def call(self, method: str, *params: Any, timeout: float = 10) -> Any:
        msg = await self.request(method, *params, timeout=timeout)
        if "error" in msg:
            raise ServerError(msg["error"]["code"], msg["error"]["message"])
        return msg["result"]

    async def raw(self, text: str, timeout: float = 10) -> Any:
        """Send raw text; return the next message that is not a notification or a response to
        a pending call."""
        await self.send_text(text)
        return await asyncio.wait_for(self.other.get(), timeout)

    async def notification(self, method: str | None = None, timeout: float = 5) -> dict[str, Any]:
        """The oldest notification (of `method`), leaving others for later calls."""
        for i, msg in enumerate(self._stash):
            if method is None or msg["method"] == method:
                return self._stash.pop(i)
        while True:
            msg = await asyncio.wait_for(self.notifications.get(), timeout)
            if method is None or msg["method"] == method:
                return msg
            self._stash.append(msg)

    def drain_notifications(self) -> list[dict[str, Any]]:
        out, self._stash = self._stash, []
        while not self.notifications.empty():
            out.append(self.notifications.get_nowait())
        return out


class TcpClient(Client):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, host: str, port: int) -> TcpClient:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 26)
        client = cls(reader, writer)
        client._start()
        return client

    async def send_text(self, text: str) -> None:
        self.writer.write(text.encode() + b"\n")
        await self.writer.drain()

    async def _recv(self) -> str | None:
        line = await self.reader.readline()
        return line.decode() if line else None

    async def close(self) -> None:
        self.writer.close()
        await super().close()


class WsClient(Client):
    def __init__(self, ws: ClientConnection) -> None:
        super().__init__()
        self.ws = ws

    @classmethod
    async def open(cls, host: str, port: int) -> WsClient:
        ws = await connect(f"ws://{host}:{port}", max_size=None)
        client = cls(ws)
        client._start()
        return client

    async def send_text(self, text: str) -> None:
        await self.ws.send(text)

    async def _recv(self) -> str | None:
        try:
            data = await self.ws.recv()
        except Exception:
            return None
        return data if isinstance(data, str) else data.decode()

    async def close(self) -> None:
        await self.ws.close()
        await super().close()


async def open_client(transport: str, host: str, tcp_port: int, ws_port: int | None) -> Client:
    if transport == "ws":
        assert ws_port is not None
        return await WsClient.open(host, ws_port)
    return await TcpClient.open(host, tcp_port)
