"""Pages answered from kept rows (`rest.pages`) and held listings (`rest.held`) are the bytes of
the plain query's answer: the trade feeds and lending action logs (rows kept by rank) and the
live loans (held per tip), asked through the app at many offsets and sizes, each page twice
(computed, then from memory), on an index that grows by blocks and goes through a reorg. The
reference is the `LIMIT ? OFFSET ?` query of `test_pages`, shaped and serialised here."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite
import httpx
import orjson

from indexer.index import open_store
from rest.config import RestConfig
from rest.pages import Anchors
from rest.routes.lending import action, loan
from rest.shapes import trade
from tests.rest.conftest import app_and_client
from tests.rest.test_pages import (
    CATEGORIES,
    add_blocks,
    count,
    old_history,
    old_loans,
    old_trades,
    tip_of,
)
from tests.rest.test_pages import offsets as around_anchors

STRIDE = 4  # small anchors, so pages start from anchors and cross them


async def reference(conn: aiosqlite.Connection, path: str, offset: int, limit: int) -> bytes:
    """The answer of `path` computed the plain way."""
    if path.startswith("/dex/tx/latest"):
        token = path.partition("token=")[2] or None
        return orjson.dumps([trade(t) for t in await old_trades(conn, limit, offset, token)])
    version = "v11" if "/v11/" in path else "v1"
    if path.endswith("/history"):
        rows = await old_history(conn, version, limit, offset)
        return orjson.dumps([action(a, version) for a in rows])
    loans = await old_loans(conn, version, limit, offset)
    return orjson.dumps([loan(x, version) for x in loans])


async def sizes(conn: aiosqlite.Connection, path: str) -> int:
    if path.startswith("/dex/tx/latest"):
        token = path.partition("token=")[2]
        if token:
            return await count(
                conn, "SELECT count(*) FROM cauldron_trades WHERE category = ?",
                bytes.fromhex(token),
            )  # fmt: skip
        return await count(conn, "SELECT count(*) FROM cauldron_trades")
    version = "v11" if "/v11/" in path else "v1"
    if path.endswith("/history"):
        return await count(conn, "SELECT count(*) FROM lending_actions WHERE version = ?", version)
    return await count(
        conn,
        "SELECT count(*) FROM lending_loans WHERE version = ? AND spent_height IS NULL",
        version,
    )


PATHS = [
    "/dex/tx/latest",
    f"/dex/tx/latest?token={CATEGORIES[1].hex()}",
    "/lending/v11/history",
    "/lending/history",
    "/lending/v11/loans/active",
    "/lending/loans/active",
]


@asynccontextmanager
async def app_client(db: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The app over `db` with small anchors, keeping every row it shows."""
    config = RestConfig(db_path=db, rate_limit=0, poll_interval=0.01, stale_after=0)
    async with app_and_client(config) as (app, client):
        app.state.ctx.anchors = Anchors(stride=STRIDE, rows=1_000_000)
        yield client


async def at_tip(client: httpx.AsyncClient, height: int) -> None:
    """Wait until the app's watcher sees the tip at `height`."""
    for _ in range(500):
        r = await client.get("/lending/history?limit=1")
        if r.headers.get("x-index-height") == str(height):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the app never reached height {height}")


async def check_pages(client: httpx.AsyncClient, conn: aiosqlite.Connection) -> int:
    """Every listing's pages, each asked twice, against the reference; pages compared."""
    tip = await tip_of(conn)
    await at_tip(client, tip.height)
    compared = 0
    rng = random.Random(tip.height)
    for path in PATHS:
        n = await sizes(conn, path)
        picks = around_anchors(n, STRIDE)
        for offset in rng.sample(picks, min(len(picks), 25)):
            for limit in (1, 3, 50):
                sep = "&" if "?" in path else "?"
                url = f"{path}{sep}offset={offset}&limit={limit}"
                want = await reference(conn, path, offset, limit)
                for _ in range(2):  # computed (and kept), then from memory
                    r = await client.get(url)
                    assert r.status_code == 200, (url, r.text)
                    assert r.headers["x-index-height"] == str(tip.height)
                    assert r.content == want, url
                compared += 1
    return compared


@asynccontextmanager
async def committed(conn: aiosqlite.Connection) -> AsyncIterator[None]:
    """One transaction, as the indexer writes: a reader (the app's warmer, say) never sees a
    block without its rows."""
    await conn.execute("BEGIN")
    yield
    await conn.execute("COMMIT")


async def undo_above(conn: aiosqlite.Connection, height: int) -> None:
    for table in ("cauldron_trades", "lending_actions", "lending_loans", "blocks"):
        await conn.execute(f"DELETE FROM {table} WHERE height > ?", (height,))


async def test_pages_from_memory_are_the_plain_answers(tmp_path: Path) -> None:
    db = tmp_path / "index.sqlite"
    await (await open_store(db)).close()
    conn = await aiosqlite.connect(db, isolation_level=None)
    rng = random.Random(7)
    try:
        await add_blocks(conn, 0, 30, "a", rng)
        for cat in CATEGORIES:  # the tokens are known to the index (the feed's filter checks)
            await conn.execute(
                "INSERT INTO cauldron_tokens VALUES (?, 0, 0, 1, 0, ?, 0)", (cat, bytes(32))
            )
        async with app_client(db) as client:
            assert await check_pages(client, conn) > 100
            async with committed(conn):  # kept rows stay, the anchors extend
                await add_blocks(conn, 31, 40, "a", rng)
            assert await check_pages(client, conn) > 100
            async with committed(conn):  # a reorg
                await undo_above(conn, 35)
                await add_blocks(conn, 36, 45, "b", rng)
            assert await check_pages(client, conn) > 100
            async with committed(conn):  # an undo
                await undo_above(conn, 42)
            assert await check_pages(client, conn) > 100
    finally:
        await conn.close()
