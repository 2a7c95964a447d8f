"""The pool listings at their latest state: a real trade in the devnet's mempool, seen by a
running follower, moves `/tokenpool/pool/active`, `/dex/pool/active`, `/tokenpool/pools` and
`/tokenpool/tokens` (and their ETags) before it is mined, the same way it moves the router's
live snapshot; its block, or its eviction, leave them agreeing with the snapshot again."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bch.tx import Transaction
from devnet.scenario import ScenarioGenerator
from devnet.service import Devnet
from indexer.index import open_store
from indexer.snapshot import PoolSnapshot
from rest.config import RestConfig
from rest.tokens import StaticRegistry
from tests.indexer.test_follower_mempool import new_trade, pool_inputs, rival_of
from tests.indexer.test_follower_support import SMALL, devnet_config, following, urls, wait_until
from tests.indexer.test_store_scenario import CATEGORIES, Scenario, SimPool, apply_all, rev
from tests.rest.conftest import api_client

Pools = set[tuple[str, int, int, int, str]]


@pytest.fixture
async def scenario() -> AsyncIterator[tuple[Devnet, ScenarioGenerator]]:
    net = Devnet(devnet_config(rostrum=True))
    await net.start()
    generator = ScenarioGenerator(net, SMALL.replace(seed=21, days=1, mempool_txs=0))
    await generator.run()
    yield net, generator
    await net.stop()


def live(snapshot: PoolSnapshot, token: str | None = None) -> Pools:
    """The router's view: the live snapshot (confirmed pools with the mempool applied)."""
    return {
        (p.txid, p.vout, p.sats, p.tokens, p.pool_id)
        for p in snapshot.all_pools()
        if token is None or p.token_id == token
    }


def listed(pools: list[dict[str, Any]]) -> Pools:
    return {(p["txid"], p["tx_pos"], p["sats"], p["tokens"], p["pool_id"]) for p in pools}


async def get(client: httpx.AsyncClient, url: str) -> Any:
    r = await client.get(url)
    assert r.status_code == 200, (url, r.text)
    return r.json()


async def pages_agree(client: httpx.AsyncClient, every: dict[str, Any]) -> None:
    """Pages of `/tokenpool/pools` (sliced from the listing held for the tip and the mempool
    revision; each asked twice, the second from memory) are slices of the whole listing."""
    n = every["total"]
    for offset, limit in ((0, 1), (0, 5), (1, 3), (n // 2, 4), (n - 1, 5), (n, 1), (n + 9, 2)):
        want = {"pools": every["pools"][offset : offset + limit], "total": n}
        for _ in range(2):
            assert await get(client, f"/tokenpool/pools?offset={offset}&limit={limit}") == want


async def agree(client: httpx.AsyncClient, snapshot: PoolSnapshot, token: str, pkh: str) -> None:
    """Every pool listing answers what the live snapshot holds."""
    want = live(snapshot, token)
    assert listed((await get(client, f"/tokenpool/pool/active?token={token}"))["active"]) == want
    assert listed((await get(client, f"/dex/pool/active?token={token}"))["active"]) == want
    owned = {
        (p.txid, p.vout, p.sats, p.tokens, p.pool_id)
        for p in snapshot.all_pools()
        if p.owner_pkh.hex() == pkh
    }
    assert listed((await get(client, f"/dex/pool/active?user={pkh}"))["active"]) == owned
    every = await get(client, "/tokenpool/pools")
    assert every["total"] == len(every["pools"]) == len(snapshot)
    assert listed(every["pools"]) == live(snapshot)
    await pages_agree(client, every)
    tokens = (await get(client, "/tokenpool/tokens"))["tokens"]
    counts = Counter(p.token_id for p in snapshot.all_pools())
    assert {t["token_id"]: t["pools"] for t in tokens} == dict(counts)
    sats = {t["token_id"]: t["tvl_sats"] for t in tokens}
    assert sats[token] == sum(p.sats for p in snapshot.pools(token))


async def test_a_mempool_trade_moves_the_pool_listings(
    scenario: tuple[Devnet, ScenarioGenerator], tmp_path: Path
) -> None:
    net, generator = scenario
    db = tmp_path / "index.sqlite"
    async with following(urls(net), str(db)) as run:
        config = RestConfig(
            db_path=db, rate_limit=0, registry=StaticRegistry(()), poll_interval=0.02
        )
        async with api_client(config) as client:
            before = await client.get("/tokenpool/pools")
            etag = before.headers["etag"]
            assert listed(before.json()["pools"]) == live(run.snapshot)
            assert (
                await client.get("/tokenpool/pools", headers={"If-None-Match": etag})
            ).status_code == 304
            tx = await new_trade(generator)
            spent = pool_inputs(run, tx)
            assert spent, "the trade spends live pools"
            first = run.snapshot.pool(spent[0])
            assert first is not None
            token, owner = first.token_id, first.owner_pkh.hex()
            url = f"/tokenpool/pool/active?token={token}"
            lineages = {p["pool_id"] for p in (await get(client, url))["active"]}
            await wait_until(lambda: run.snapshot.is_pending(tx.txid), what="the pending trade")

            # No new block: the mempool change alone changes the answer and its ETag.
            async def moved() -> bool:
                r = await client.get("/tokenpool/pools", headers={"If-None-Match": etag})
                return r.status_code == 200 and r.headers["etag"] != etag

            await wait_until(moved, what="the API to see the mempool trade")
            assert (await client.get("/health")).json()["index_height"] == net.nodes[0].height
            # The spent outpoints are gone, the trade's continuations are listed: as the
            # router sees them.
            active = (await get(client, url))["active"]
            shown = {(p["txid"], p["tx_pos"]) for p in active}
            assert not shown & {(op.txid_hex, op.index) for op in spent}
            assert any(p["txid"] == tx.txid_hex for p in active)
            # A trade moves pools along their lineages: the same pool ids, each with a
            # history that ends at the pool's current outpoint.
            assert {p["pool_id"] for p in active} == lineages
            await agree(client, run.snapshot, token, owner)

            # Mined: the same pools, now confirmed; the listings still agree.
            net.nodes[0].mine(1)
            await run.caught_up(net)
            height = net.nodes[0].height
            await wait_until(lambda: _at(client, height), what="the API to see the block")
            assert not run.snapshot.has_pending
            await agree(client, run.snapshot, token, owner)
            assert any(p["txid"] == tx.txid_hex for p in (await get(client, url))["active"])


async def test_an_evicted_trade_leaves_the_listings(
    scenario: tuple[Devnet, ScenarioGenerator], tmp_path: Path
) -> None:
    """A rival spending the trade's funding coin is mined: the trade is evicted, and the spent
    pools are listed again at their confirmed outpoints."""
    net, generator = scenario
    db = tmp_path / "index.sqlite"
    async with following(urls(net), str(db)) as run:
        config = RestConfig(
            db_path=db, rate_limit=0, registry=StaticRegistry(()), poll_interval=0.02
        )
        async with api_client(config) as client:
            tx: Transaction = await new_trade(generator)
            spent = pool_inputs(run, tx)
            first = run.snapshot.pool(spent[0])
            assert first is not None
            token = first.token_id
            await wait_until(lambda: run.snapshot.is_pending(tx.txid), what="the pending trade")
            url = f"/dex/pool/active?token={token}"

            async def shows_trade() -> bool:
                active = (await get(client, url))["active"]
                return any(p["txid"] == tx.txid_hex for p in active)

            await wait_until(shows_trade, what="the API to see the mempool trade")
            net.nodes[0].mine(1, txs=[rival_of(net, tx, len(spent))])
            await run.caught_up(net)
            await wait_until(lambda: not run.snapshot.is_pending(tx.txid), what="the eviction")

            async def back() -> bool:
                active = (await get(client, url))["active"]
                return {(p["txid"], p["tx_pos"]) for p in active} >= {
                    (op.txid_hex, op.index) for op in spent
                }

            await wait_until(back, what="the spent pools to be listed again")
            await agree(client, run.snapshot, token, first.owner_pkh.hex())
            assert not await shows_trade()


async def _at(client: httpx.AsyncClient, height: int) -> bool:
    r = await client.get("/health")
    return bool(r.json()["index_height"] == height)


async def test_tokens_lists_only_tokens_with_a_live_pool(tmp_path: Path) -> None:
    """`/tokenpool/tokens` leaves out a token whose pools were all withdrawn — on chain, or by
    a pending withdrawal (its pools gone from every listing too, back when it is evicted) —
    and `/tokenpool/pools` lists every live pool without a default limit."""
    sc = Scenario(seed=41)
    gone, pending = CATEGORIES[0], CATEGORIES[1]
    records = [sc.create(True, gone), sc.create(True, gone), sc.create(True, pending)]
    records += [sc.create(True, CATEGORIES[2]) for _ in range(3)]
    sc.next_block(records=records)
    ended = [p for p in visible(sc) if p.category == gone]
    assert ended
    sc.next_block(records=[sc.withdraw(p, recreate=False) for p in ended])
    db = tmp_path / "index.sqlite"
    store = await open_store(db, snapshot=PoolSnapshot())
    try:
        await apply_all(store, sc.blocks)
        config = RestConfig(
            db_path=db, rate_limit=0, registry=StaticRegistry(()), poll_interval=0.02
        )
        async with api_client(config) as client:
            tokens = (await get(client, "/tokenpool/tokens"))["tokens"]
            listed_ids = {t["token_id"] for t in tokens}
            assert rev(gone).hex() not in listed_ids  # known, but no live pool left
            assert (await get(client, f"/dex/contract/count/{rev(gone).hex()}"))["active"] == 0
            assert listed_ids == {p.token_id for p in store.snapshot.all_pools()}
            every = await get(client, "/tokenpool/pools")
            assert len(every["pools"]) == every["total"] == len(store.snapshot)

            # A pending withdrawal of every pool of `pending`: gone from the listings now.
            nxt = sc.fork(3)
            mine = [p for p in visible(nxt) if p.category == pending]
            assert mine
            withdrawals = [nxt.withdraw(p, recreate=False) for p in mine]
            for rec in withdrawals:
                assert await store.apply_mempool_tx(rec.tx)
            token = rev(pending).hex()

            async def left() -> bool:
                ids = {t["token_id"] for t in (await get(client, "/tokenpool/tokens"))["tokens"]}
                return token not in ids

            await wait_until(left, what="the pending withdrawal to show")
            assert (await get(client, f"/tokenpool/pool/active?token={token}"))["active"] == []
            every = await get(client, "/tokenpool/pools")
            assert listed(every["pools"]) == live(store.snapshot)
            # Evicted (the node dropped it): listed again.
            await store.evict([rec.tx.txid for rec in withdrawals])

            async def back() -> bool:
                active = (await get(client, f"/tokenpool/pool/active?token={token}"))["active"]
                return len(active) == len(mine)

            await wait_until(back, what="the eviction to show")
            assert token in {
                t["token_id"] for t in (await get(client, "/tokenpool/tokens"))["tokens"]
            }
    finally:
        await store.close()


def visible(sc: Scenario) -> list[SimPool]:
    """The scenario's live pools the index can see."""
    return [p for p in sc.pools.values() if p.outpoint in sc.ledger.lineage]
