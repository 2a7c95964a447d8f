"""The API over an index that changes under it: new blocks move the index height, ETags and
the hourly candle series forward; a reorg replaces what the abandoned blocks said."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from indexer.index import open_store
from rest.config import RestConfig
from tests.indexer.test_store_scenario import CATEGORIES, Scenario, apply_all, rev
from tests.metrics_text import sample
from tests.rest.conftest import api_client

# cauldron_trades rows of the test ledger: (txid, category, height, time, position, direction,
# sats, tokens, volume_sats, volume_tokens, lp_fee, pools, pools_touched), display-order bytes
Row = tuple[Any, ...]


def candles(rows: list[Row], category: bytes, start: int, end: int, step: int) -> list[Any]:
    mine = sorted(
        (r for r in rows if r[1] == rev(category) and start <= r[3] <= end),
        key=lambda r: (r[3], r[2], r[4]),
    )
    out: dict[int, list[Row]] = {}
    for r in mine:
        out.setdefault(r[3] // step * step, []).append(r)
    result = []
    for at, g in sorted(out.items()):
        prices = [r[8] / r[9] for r in g]
        result.append(
            {
                "time": at,
                "open": prices[0],
                "high": max(prices),
                "low": min(prices),
                "close": prices[-1],
                "volume_sats": sum(r[8] for r in g),
                "volume_tokens": sum(r[9] for r in g),
                "transaction_count": len(g),
            }
        )
    return result


async def wait_for_height(client: httpx.AsyncClient, height: int) -> None:
    for _ in range(200):
        if (await client.get("/health")).json()["index_height"] == height:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the API never saw height {height}")


async def test_new_blocks_and_a_reorg(tmp_path: Path) -> None:
    main = Scenario(seed=31)
    for _ in range(20):
        main.next_block(actions=6)
    branch = main.fork(seed=77)
    for _ in range(6):
        main.next_block(actions=6)
    for _ in range(8):
        branch.next_block(actions=6)

    db = tmp_path / "live.sqlite"
    store = await open_store(db)
    await apply_all(store, main.blocks[:14])
    clock = {"now": main.blocks[13].time + 60}
    config = RestConfig(
        db_path=db,
        clock=lambda: clock["now"],
        rate_limit=0,
        poll_interval=0.01,
        stale_after=0,
        warm=False,  # every series update below is the requests' own
    )
    try:
        async with api_client(config) as client:
            cat = max(
                CATEGORIES,
                key=lambda c: sum(r[1] == rev(c) for r in main.ledger.rows["cauldron_trades"]),
            )
            token = rev(cat).hex()
            start, end = main.blocks[0].time - 3600, branch.blocks[-1].time + 3600
            url = f"/dex/price/{token}/candlesticks?start={start}&end={end}&stepsize=86400"

            def upto(scenario: Scenario, height: int) -> list[Row]:
                return [r for r in scenario.ledger.rows["cauldron_trades"] if r[2] <= height]

            r1 = await client.get(url)
            assert r1.headers["x-index-height"] == "14"
            assert r1.json()["candlesticks"] == candles(upto(main, 14), cat, start, end, 86400)
            latest1 = (await client.get("/dex/tx/latest?limit=1")).json()

            await apply_all(store, main.blocks[14:])
            await wait_for_height(client, 26)
            r2 = await client.get(url, headers={"If-None-Match": r1.headers["etag"]})
            assert r2.status_code == 200  # the old ETag no longer matches
            assert r2.headers["x-index-height"] == "26" and r2.headers["etag"] != r1.headers["etag"]
            assert r2.json()["candlesticks"] == candles(upto(main, 26), cat, start, end, 86400)
            assert (await client.get("/dex/tx/latest?limit=1")).json() != latest1

            # Reorg: back to block 20, then the competing branch (longer).
            await store.undo_to(20)
            await apply_all(store, branch.blocks[20:])
            await wait_for_height(client, 28)
            r3 = await client.get(url)
            assert r3.json()["candlesticks"] == candles(upto(branch, 28), cat, start, end, 86400)
            assert r3.json() != r2.json()
            newest = (await client.get("/dex/tx/latest?limit=1")).json()[0]
            tip_trades = branch.ledger.rows["cauldron_trades"]
            best = max(tip_trades, key=lambda r: (r[2], r[4], [-b for b in r[1]]))
            assert newest["txid"] == best[0].hex()
            metrics = (await client.get("/metrics")).text
            # first use, then the reorg
            assert sample(metrics, "ladle_rest_candle_rebuilds_total") == 2
    finally:
        await store.close()


async def test_the_warmer_prepares_series_and_token_list(tmp_path: Path) -> None:
    sc = Scenario(seed=5)
    for _ in range(12):
        sc.next_block(actions=6)
    db = tmp_path / "warm.sqlite"
    store = await open_store(db)
    await apply_all(store, sc.blocks)
    await store.close()
    traded = {r[1] for r in sc.ledger.rows["cauldron_trades"]}
    config = RestConfig(db_path=db, rate_limit=0, poll_interval=0.01, stale_after=0)
    async with api_client(config) as client:
        for _ in range(300):
            metrics = (await client.get("/metrics")).text
            if sample(metrics, "ladle_rest_candle_rebuilds_total") == len(traded):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the warmer did not build every traded token's series")
        token = next(iter(traded)).hex()
        r = await client.get(f"/dex/price/{token}/candlesticks?start=0&stepsize=86400")
        assert r.status_code == 200 and r.json()["candlesticks"]
        metrics = (await client.get("/metrics")).text
        assert sample(metrics, "ladle_rest_candle_rebuilds_total") == len(traded)  # none rebuilt
