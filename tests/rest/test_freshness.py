"""/health and /metrics of the data API report the lag behind the best tip the indexer heard of,
which the indexer writes into the index (`indexer.store.heard`) for the API's processes."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import aiosqlite

from indexer.freshness import Heard
from indexer.store.heard import write_heard
from tests.metrics_text import sample
from tests.rest.conftest import World, api_client, validate_health

AHEAD = 3


async def test_health_and_metrics_report_the_lag_behind_the_best_tip_heard(
    world: World, tmp_path: Path
) -> None:
    db = tmp_path / "index.sqlite"
    with sqlite3.connect(world.db) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    tip = max(world.oracle.blocks)
    async with api_client(world.config(db_path=db)) as c:
        body = (await c.get("/health")).json()
        validate_health(body)
        assert body["freshness"] is None  # no indexer ever wrote what it heard
        now = time.time()
        tips = {tip + i: ("ab" * 32, world.now + i, now - 10 + i) for i in range(1, AHEAD + 1)}
        async with aiosqlite.connect(db, isolation_level=None) as conn:
            await write_heard(conn, Heard(tips, 2, 1, None), now)
        body = (await c.get("/health")).json()
        validate_health(body)
        freshness = body["freshness"]
        assert (freshness["index_height"], freshness["best_height"]) == (tip, tip + AHEAD)
        assert freshness["lag_blocks"] == AHEAD and freshness["lag_seconds"] >= 9
        assert (freshness["servers"], freshness["connected"]) == (2, 1)
        assert body["chain_height"] == tip + AHEAD and body["lag_blocks"] == AHEAD
        text = (await c.get("/metrics")).text
        assert sample(text, "ladle_rest_best_height") == tip + AHEAD
        assert sample(text, "ladle_rest_lag_blocks") == AHEAD
        assert sample(text, "ladle_rest_servers_connected") == 1
