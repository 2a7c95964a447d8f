"""Shared pieces for the daemon tests (no tests here): a live snapshot built from router test
pools, a real server on 127.0.0.1:0, and a JSON-RPC client over a real WebSocket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect

from bch.hashes import sha256
from bch.tx import OutPoint
from indexer.snapshot import LivePool, PoolSnapshot
from router.daemon import DaemonConfig
from router.params import RouterConfig
from router.pools import Pool
from router.service import RouterServer, start_router
from tests.router.helpers import FEE_WALLET, TOKEN_A, TOKEN_B, even_pools
from tests.router.schemas import validator

FEE = RouterConfig(fee_bps=10, fee_address=FEE_WALLET.token_address)

REPLY = validator("reply.json")
ERROR_REPLY = validator("error.reply.json")
PUSH = validator("push.json")
REQUEST = validator("request.json")
RESULTS = {
    "quote": validator("quote.result.json"),
    "tx.build": validator("tx.build.result.json"),
    "subscribe": validator("subscribe.result.json"),
}


def live(pool: Pool, height: int | None = 100) -> LivePool:
    op = OutPoint.from_hex(pool.txid, pool.vout)
    return LivePool(op, op, pool.owner_pkh, pool.token_id, pool.sats, pool.tokens, height)


def standard_pools() -> list[Pool]:
    return even_pools(TOKEN_A, 30, 2_000_000, 50.0, "a") + even_pools(
        TOKEN_B, 20, 5_000_000, 200.0, "b"
    )


def snapshot_of(pools: Iterable[Pool], height: int = 100) -> PoolSnapshot:
    snap = PoolSnapshot()
    snap.replace_confirmed([live(p, height) for p in pools], height)
    return snap


def pending_trade(snap: PoolSnapshot, old: LivePool, sats: int, tokens: int, tag: str) -> LivePool:
    """Spend `old` in an unconfirmed transaction that re-creates it holding (sats, tokens)."""
    from indexer.snapshot import PendingTx

    txid = sha256(f"pending:{tag}".encode())
    new = LivePool(OutPoint(txid, 0), old.lineage, old.owner_pkh, old.token_id, sats, tokens, None)
    assert snap.add_pending(PendingTx(txid, (old.outpoint,), (new,)))
    return new


class Client:
    """A JSON-RPC client that separates replies (by id) from pushes."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._next = 0
        self.pushes: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._replies: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.order: list[str] = []  # "reply:<id>" / "push:<subscription>" as they arrived
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for raw in self.ws:
            doc = orjson.loads(raw)
            if "method" in doc:
                PUSH.validate(doc)
                self.order.append(f"push:{doc['params']['subscription']}")
                self.pushes.put_nowait(doc)
            else:
                REPLY.validate(doc)
                self.order.append(f"reply:{doc['id']}")
                fut = self._replies.pop(doc["id"], None)
                if fut is not None:
                    fut.set_result(doc)

    async def call_raw(self, method: str, params: Any = None, **extra: Any) -> dict[str, Any]:
        self._next += 1
        req_id = self._next
        doc: dict[str, Any] = {"id": req_id, "method": method, **extra}
        if params is not None:
            doc["params"] = params
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[req_id] = fut
        await self.ws.send(orjson.dumps(doc).decode())
        return await asyncio.wait_for(fut, 10)

    async def call(self, method: str, params: Any = None) -> Any:
        reply = await self.call_raw(method, params)
        assert "error" not in reply, reply
        return reply["result"]

    async def error(self, method: str, params: Any = None) -> dict[str, Any]:
        reply = await self.call_raw(method, params)
        assert "error" in reply, reply
        error: dict[str, Any] = reply["error"]
        return error

    async def push(self, timeout: float = 5.0) -> dict[str, Any]:
        return await asyncio.wait_for(self.pushes.get(), timeout)

    async def no_push(self, wait: float = 0.3) -> None:
        await asyncio.sleep(wait)
        assert self.pushes.empty(), self.pushes.get_nowait()

    async def close(self) -> None:
        await self.ws.close()
        self._reader.cancel()


@asynccontextmanager
async def running(
    snap: PoolSnapshot, config: RouterConfig = FEE, limits: DaemonConfig | None = None
) -> AsyncIterator[RouterServer]:
    server = await start_router(snap, config, "127.0.0.1", 0, limits)
    try:
        yield server
    finally:
        await server.close()


@asynccontextmanager
async def client(server: RouterServer, **options: Any) -> AsyncIterator[Client]:
    async with connect(server.url, **options) as ws:
        c = Client(ws)
        try:
            yield c
        finally:
            c._reader.cancel()
