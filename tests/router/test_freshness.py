"""Never a silent answer from a stale snapshot: a real router over a real indexer on the devnet
answers `stale_snapshot` (quotes, builds, subscribes), pushes it once to its subscribers and says
so on `/health` and `/metrics` — when its only server goes away, and when the server it indexes
from falls behind the best tip another server announces. Fresh again, it answers and pushes."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import orjson

from devnet.service import Devnet
from indexer.service import IndexerConfig, run_indexer
from indexer.snapshot import PoolSnapshot
from indexer.tipwatch import TipWatch
from router.daemon import DaemonConfig
from router.pools import BCH
from router.service import RouterServer, start_router
from tests.indexer.electrum_servers import set_down
from tests.indexer.test_follower_support import SMALL, generate, urls, wait_until
from tests.metrics_text import sample
from tests.router.test_daemon_support import FEE, Client, client

ERROR = orjson.loads((Path(__file__).parents[2] / "schemas" / "rpc" / "error.json").read_bytes())


@dataclass
class Stack:
    net: Devnet
    snapshot: PoolSnapshot
    router: RouterServer

    async def get(self, path: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.router.port}") as http:
            return await http.get(path)


@asynccontextmanager
async def stack(
    limits: DaemonConfig, *, nodes: int = 1, index_from: int = 0
) -> AsyncIterator[Stack]:
    """The devnet with a scenario; the indexer follows node `index_from` alone while the tip
    watch hears every node; the router over its snapshot."""
    net, _ = await generate(SMALL, nodes=nodes)
    snapshot = PoolSnapshot()
    tips = TipWatch(urls(net))
    indexer: asyncio.Task[None] | None = None
    router: RouterServer | None = None
    try:
        with tempfile.TemporaryDirectory() as scratch:
            config = IndexerConfig(
                electrum=(urls(net)[index_from],),
                db=f"{scratch}/index.sqlite",
                start_height=0,
                progress=False,
                registry_fetch=False,
                mempool_interval=0.05,
            )
            ready = asyncio.Event()
            indexer = asyncio.create_task(
                run_indexer(config, ready=ready, snapshot=snapshot, tips=tips)
            )
            await asyncio.wait_for(ready.wait(), 60)
            router = await start_router(snapshot, FEE, "127.0.0.1", 0, limits, heard=tips.heard)
            yield Stack(net, snapshot, router)
    finally:
        if router is not None:
            await router.close()
        if indexer is not None:
            indexer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await indexer
        await tips.close()
        await net.stop()


def order(snapshot: PoolSnapshot) -> dict[str, Any]:
    token = sorted(snapshot.tokens())[0]
    return {"sell": BCH, "buy": token, "amount": "20000"}


async def quote_outcome(c: Client, params: dict[str, Any]) -> str:
    reply = await c.call_raw("quote", params)
    return "ok" if "result" in reply else str(reply["error"]["code"])


def best_heard(s: Stack) -> int | None:
    lag = s.router.daemon.lag
    return None if lag is None else lag.best_height


def check_stale(error: dict[str, Any]) -> dict[str, Any]:
    jsonschema.validate(error, ERROR)
    assert error["code"] == "stale_snapshot"
    data: dict[str, Any] = error["data"]
    assert set(data) == {"index_height", "best_height", "lag_blocks", "lag_seconds", "connected"}
    return data


async def test_a_router_whose_server_went_away_refuses_then_recovers() -> None:
    async with stack(DaemonConfig(max_lag_seconds=1.0)) as s, client(s.router) as c:
        params = order(s.snapshot)
        assert await quote_outcome(c, params) == "ok"
        await c.call("route.subscribe", params)
        first = await c.push()
        assert "result" in first["params"]
        health = (await s.get("/health")).json()
        assert health["status"] == "ok" and health["freshness"]["connected"] == 1
        assert health["freshness"]["lag_blocks"] == 0

        await set_down(s.net, 0, True)
        await wait_until(lambda: s.router.daemon.stale is not None, timeout=10)
        error = await c.error("quote", params)
        data = check_stale(error)
        assert data["connected"] == 0 and data["lag_seconds"] > 1.0
        assert data["index_height"] == data["best_height"] == s.snapshot.height
        check_stale(await c.error("route.subscribe", params))
        push = await c.push()
        assert push["params"]["subscription"] == first["params"]["subscription"]
        check_stale(push["params"]["error"])
        response = await s.get("/health")
        assert response.status_code == 503 and response.json()["status"] == "stale"
        text = (await s.get("/metrics")).text
        assert sample(text, "ladle_router_stale") == 1
        assert sample(text, "ladle_router_servers_connected") == 0
        stale_quotes = sample(
            text, "ladle_router_requests_total", method="quote", outcome="stale_snapshot"
        )
        assert stale_quotes == 1

        await set_down(s.net, 0, False)
        await wait_until(lambda: s.router.daemon.stale is None, timeout=5)
        assert await quote_outcome(c, params) == "ok"
        again = await c.push()  # the current outcome, once fresh
        assert again["params"]["result"]["legs"] == first["params"]["result"]["legs"]
        assert (await s.get("/health")).json()["status"] == "ok"


async def test_a_router_whose_index_lags_the_best_tip_heard_refuses() -> None:
    limits = DaemonConfig(max_lag_blocks=2, max_lag_seconds=600)
    async with stack(limits, nodes=2, index_from=1) as s, client(s.router) as c:
        params = order(s.snapshot)
        assert await quote_outcome(c, params) == "ok"
        s.net.nodes[1].set_faults(partitioned=True)  # the indexed server hears no new block
        indexed = s.snapshot.height
        assert indexed is not None
        s.net.nodes[0].mine(2)
        await wait_until(lambda: best_heard(s) == indexed + 2, timeout=10)
        assert await quote_outcome(c, params) == "ok"  # 2 blocks behind: within the bound
        s.net.nodes[0].mine(1)
        await wait_until(lambda: s.router.daemon.stale is not None, timeout=10)
        data = check_stale(await c.error("quote", params))
        assert (data["index_height"], data["best_height"]) == (indexed, indexed + 3)
        assert data["lag_blocks"] == 3 and data["connected"] == 2

        s.net.nodes[1].clear_faults()  # rejoins, gets the blocks; the indexer catches up
        await wait_until(lambda: s.snapshot.height == indexed + 3, timeout=15)
        await wait_until(lambda: s.router.daemon.stale is None, timeout=5)
        assert await quote_outcome(c, params) == "ok"
