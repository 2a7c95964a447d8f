"""An index built from a devnet scenario (once per session), its ledger-derived oracle, and an
in-process client of the API over it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from devnet.scenario import PRESETS, Ledger, ScenarioGenerator
from devnet.service import Devnet, DevnetConfig
from indexer.index import open_store
from rest.app import create_app
from rest.config import RestConfig
from rest.tokens import StaticRegistry, TokenMetadata
from tests.rest.oracle import Block, Oracle
from tests.rest.schemas import validate, validator

# The small preset with more trading and withdrawals, so every kind of event shows up.
PARAMS = PRESETS["small"].replace(seed=5, trades_per_day=60, withdrawals_per_day=3.0)


@dataclass(frozen=True)
class World:
    db: Path
    ledger: Ledger
    oracle: Oracle
    now: int  # the API's clock: just after the tip

    def registry(self) -> StaticRegistry:
        return StaticRegistry(
            TokenMetadata(t.category, t.symbol, t.name, t.decimals) for t in self.ledger.tokens
        )

    def config(self, **overrides: Any) -> RestConfig:
        base: dict[str, Any] = {
            "db_path": self.db,
            "clock": lambda: self.now,
            "rate_limit": 0,
            "registry": self.registry(),
        }
        base.update(overrides)
        return RestConfig(**base)


async def _build(db: Path) -> World:
    async with Devnet(DevnetConfig(tcp_base=0, ws_base=None, verify=False)) as net:
        result = await ScenarioGenerator(net, PARAMS).run()
        chain = net.nodes[0].chain
        store = await open_store(db)
        blocks: dict[int, Block] = {}
        running = 0
        try:
            for h in range(chain.height + 1):
                rec = chain.block_at(h)
                assert rec is not None
                await store.apply_block(h, rec.raw)
                running = max(running, rec.header.time)
                positions = {tx.txid_hex: i for i, tx in enumerate(rec.txs)}
                blocks[h] = Block(h, rec.hash_hex, rec.header.time, running, positions)
        finally:
            await store.close()
    oracle = Oracle(result.ledger, blocks)
    return World(db, result.ledger, oracle, running + 60)


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return asyncio.run(_build(tmp_path_factory.mktemp("rest") / "index.sqlite"))


async def check_response(response: httpx.Response) -> None:
    """Every answer any test receives: never a 500, JSON answers valid against the OpenAPI
    document (errors against its Error schema)."""
    await response.aread()
    assert response.status_code != 500, response.text
    path = response.request.url.path
    if response.request.method == "HEAD" or response.status_code in (204, 304):
        return
    if (
        path in ("/metrics", "/docs", "/docs/endpoints", "/openapi.json")
        and response.status_code == 200
    ):
        return
    if path == "/health" and response.status_code in (200, 503):
        validate_health(response.json())
        return
    validate(path, response.status_code, response.json())


def validate_health(body: Any) -> None:
    validator({"$ref": "#/components/schemas/Health"}).validate(body)


@asynccontextmanager
async def app_and_client(config: RestConfig) -> AsyncIterator[tuple[Starlette, httpx.AsyncClient]]:
    """The app over `config`, with its lifespan, behind an in-process httpx client whose
    every answer is checked by `check_response`."""
    app = create_app(config)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://rest.test",
            event_hooks={"response": [check_response]},
        ) as c:
            yield app, c


@asynccontextmanager
async def api_client(config: RestConfig) -> AsyncIterator[httpx.AsyncClient]:
    """`app_and_client`'s client."""
    async with app_and_client(config) as (_, c):
        yield c


@pytest.fixture
async def client(world: World) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(world.config()) as c:
        yield c
