"""The Electrum server of one node: TCP (one JSON message per line) and WebSocket (one per text
frame), sharing sessions, dispatch and notifications. Node faults act here: `down` closes the
listeners and every connection, `slow` delays answers, `drop` aborts a connection mid-request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import Server as WsServer
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

import devnet.electrum.control
import devnet.electrum.methods  # noqa: F401  (registers the Electrum methods)
from devnet.electrum.errors import INTERNAL_ERROR, RpcError
from devnet.electrum.framing import (
    Invalid,
    Request,
    error_message,
    parse_message,
    result_message,
    strip_frame,
)
from devnet.electrum.registry import Call, lookup
from devnet.electrum.session import Session
from devnet.electrum.shapes import header_json
from devnet.node import Node

if TYPE_CHECKING:
    from devnet.service import Devnet

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024 * 1024
MAX_BATCH = 345


class ElectrumServer:
    def __init__(
        self,
        node: Node,
        *,
        devnet: Devnet | None = None,
        host: str = "127.0.0.1",
        tcp_port: int = 0,
        ws_port: int | None = 0,
        rostrum: bool = True,
        control: bool = True,
    ) -> None:
        self.node = node
        self.devnet = devnet
        self.host = host
        self.tcp_port = tcp_port
        self.ws_port = ws_port
        self.rostrum = rostrum
        self.control = control
        self.sessions: set[Session] = set()
        self._tcp: asyncio.Server | None = None
        self._ws: WsServer | None = None
        self._fault_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        node.listeners.append(self)

    @property
    def listening(self) -> bool:
        return self._tcp is not None

    async def start(self) -> None:
        """Listen (port 0 picks a free port; the chosen one is kept for a later restart)."""
        async with self._lock:
            if self._tcp is None:
                await self._listen()

    async def _listen(self) -> None:
        self._tcp = await asyncio.start_server(
            self._serve_tcp, self.host, self.tcp_port, limit=MAX_LINE
        )
        self.tcp_port = self._tcp.sockets[0].getsockname()[1]
        if self.ws_port is not None:
            self._ws = await serve(
                self._serve_ws, self.host, self.ws_port, max_size=MAX_LINE, compression=None
            )
            self.ws_port = next(iter(self._ws.sockets)).getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and close every connection (what a node going down looks like)."""
        async with self._lock:
            await self._unlisten()

    async def _unlisten(self) -> None:
        tcp, self._tcp = self._tcp, None
        ws, self._ws = self._ws, None
        if tcp is not None:
            tcp.close()
        if ws is not None:
            ws.close(close_connections=False)
        await asyncio.gather(*(s.flush_and_close() for s in list(self.sessions)))
        if tcp is not None:
            tcp.close()
            await tcp.wait_closed()
        if ws is not None:
            ws.close()
            await ws.wait_closed()

    async def close(self) -> None:
        await self.stop()
        if self in self.node.listeners:
            self.node.listeners.remove(self)

    async def apply_faults(self) -> None:
        """Bring the listeners in line with the node's `down` fault."""
        if self.node.faults.down:
            await self.stop()
        else:
            await self.start()

    # --- transports ---------------------------------------------------------------------------

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def send(data: bytes) -> None:
            writer.write(data + b"\n")
            await writer.drain()

        peer = str(writer.get_extra_info("peername"))
        session = Session(send, writer.transport.abort, writer.transport.close, peer)
        self.sessions.add(session)
        try:
            while not session.closed:
                try:
                    line = await reader.readline()
                except (ConnectionError, ValueError):  # ValueError: line over the limit
                    break
                if not line:
                    break
                if line.strip():
                    await self._handle(session, strip_frame(line))
        finally:
            self.sessions.discard(session)
            await session.flush_and_close()

    async def _serve_ws(self, ws: ServerConnection) -> None:
        async def send(data: bytes) -> None:
            await ws.send(data.decode())

        session = Session(send, ws.transport.abort, ws.transport.close, str(ws.remote_address))
        self.sessions.add(session)
        try:
            async for frame in ws:
                if session.closed:
                    break
                await self._handle(session, strip_frame(frame))
        except ConnectionClosed:
            pass
        finally:
            self.sessions.discard(session)
            await session.flush_and_close()

    # --- requests -----------------------------------------------------------------------------

    async def _handle(self, session: Session, raw: bytes) -> None:
        drop = self.node.take_drop()
        is_batch, items = parse_message(raw)
        if is_batch and len(items) > MAX_BATCH:
            session.push(error_message(None, RpcError(4, f"batch larger than {MAX_BATCH}")))
            return
        replies = []
        for item in items:
            reply = await self._answer(session, item)
            if reply is not None:
                replies.append(reply)
        if self.node.faults.slow > 0:
            await asyncio.sleep(self.node.faults.slow)
        if drop:
            # The request took effect but its answer is lost: the outcome is unknown to the
            # client, exactly the case a broadcaster must resolve with get_height elsewhere.
            session.abort()
            return
        if is_batch:
            if replies:
                session.push(replies)
        elif replies:
            session.push(replies[0])

    async def _answer(self, session: Session, item: Request | Invalid) -> dict[str, object] | None:
        if isinstance(item, Invalid):
            return error_message(item.id, item.error)
        try:
            spec = lookup(item.method, rostrum=self.rostrum, control=self.control)
            args = spec.bind(item.params)
            result: Any = await spec.handler(Call(session, self), *args)
        except RpcError as exc:
            return None if item.is_notification else error_message(item.id, exc)
        except Exception as exc:
            log.exception("internal error in %s", item.method)
            err = RpcError(INTERNAL_ERROR, f"internal error: {exc}")
            return None if item.is_notification else error_message(item.id, err)
        return None if item.is_notification else result_message(item.id, result)

    # --- node events (NodeListener) -----------------------------------------------------------

    def on_tip(self, node: Node) -> None:
        tip = header_json(node.chain.height, node.chain.tip)
        for session in self.sessions:
            if session.headers_subscribed:
                session.notify("blockchain.headers.subscribe", [tip])

    def on_scripthashes(self, node: Node, touched: set[bytes]) -> None:
        for session in self.sessions:
            for sh in touched & session.scripthashes.keys():
                status = node.status(sh)
                if status != session.scripthashes[sh]:
                    session.scripthashes[sh] = status
                    session.notify("blockchain.scripthash.subscribe", [sh[::-1].hex(), status])

    def on_faults(self, node: Node) -> None:
        if self.node.faults.down != (self._tcp is None):
            with contextlib.suppress(RuntimeError):  # no running loop: apply on next call
                self._fault_task = asyncio.get_running_loop().create_task(self.apply_faults())
