"""The REST reads, on a read-only connection, against values computed from the ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from indexer.index import open_store
from indexer.store import open_reader
from indexer.store import queries as q
from tests.indexer.test_store_scenario import CATEGORIES, OWNERS, apply_all, build_chain, rev

# cauldron_pools columns in the ledger's rows
TXID, VOUT, LTX, LVOUT, OWNER, CAT, SATS, TOKENS, H, T, POS = range(11)
SPENT_H = 13


def pool_row(r: list[Any]) -> q.PoolRow:
    return q.PoolRow(
        r[TXID].hex(),
        r[VOUT],
        f"{r[LTX].hex()}:{r[LVOUT]}",
        r[OWNER].hex(),
        r[CAT].hex(),
        r[SATS],
        r[TOKENS],
        r[H],
        r[T],
    )


def chain_order(r: list[Any]) -> tuple[int, int, int]:
    return (r[H], r[POS], r[VOUT])


async def test_queries_match_the_ledger(tmp_path: Path) -> None:
    sc = build_chain(seed=51, n_blocks=35)
    db = tmp_path / "q.sqlite"
    store = await open_store(db)
    await apply_all(store, sc.blocks)
    await store.close()
    conn = await open_reader(db)
    led = sc.ledger
    pools = list(led.pools.values())
    live = [r for r in pools if r[SPENT_H] is None]
    trades: list[Any] = led.rows["cauldron_trades"]
    blocks = {r[0]: r for r in led.rows["blocks"]}
    try:
        assert await q.index_height(conn) == 35
        mid = blocks[20][3]
        # As of `mid`: the last block of the longest prefix whose header times are all ≤ mid.
        prefix = 0
        while prefix + 1 in blocks and blocks[prefix + 1][3] <= mid:
            prefix += 1
        assert await q.height_at(conn, mid) == prefix
        assert await q.height_at(conn, 1 << 40) == 35
        assert await q.height_at(conn, 0) is None
        for cat in CATEGORIES:
            token = rev(cat).hex()
            mine = sorted((r for r in live if r[CAT] == rev(cat)), key=chain_order)
            assert await q.active_pools(conn, token=token) == [pool_row(r) for r in mine]
            ended = sum(
                1 for e in led.rows["cauldron_events"] if e[5] == "withdraw" and e[9] == rev(cat)
            )
            assert await q.contract_counts(conn, token) == (len(mine), ended)
        for owner in OWNERS:
            mine = sorted((r for r in live if r[OWNER] == owner.pkh), key=chain_order)
            assert await q.active_pools(conn, pkh=owner.pkh.hex()) == [pool_row(r) for r in mine]
        with pytest.raises(ValueError):
            await q.active_pools(conn)
        n_withdraws = sum(1 for e in led.rows["cauldron_events"] if e[5] == "withdraw")
        assert await q.contract_counts(conn) == (len(live), n_withdraws)
        # History of every lineage: its states in chain order.
        lineages = {(r[LTX], r[LVOUT]) for r in pools}
        for ltx, lvout in lineages:
            states = sorted(
                (r for r in pools if (r[LTX], r[LVOUT]) == (ltx, lvout)), key=chain_order
            )
            pool_id = f"{ltx.hex()}:{lvout}"
            assert await q.pool_history(conn, pool_id) == [pool_row(r) for r in states]
            later = [r for r in states if r[T] >= mid]
            assert await q.pool_history(conn, pool_id, start=mid) == [pool_row(r) for r in later]
        assert await q.pool_history(conn, "00" * 32 + ":0") == []
        # Tokens and first pools.
        want_tokens = sorted(led.tokens.values(), key=lambda r: (r[1], r[3], r[4]))
        assert await q.tokens(conn) == [
            q.TokenRow(r[0].hex(), r[1], r[2], f"{r[5].hex()}:{r[6]}") for r in want_tokens
        ]
        for r in want_tokens:
            first = await q.first_pool(conn, r[0].hex())
            assert first is not None and first.pool_id == f"{r[5].hex()}:{r[6]}"
            assert (first.token_id, first.height) == (r[0].hex(), r[1])
        assert await q.first_pool(conn, "ee" * 32) is None
        # Value locked as of every height, from the pools alive at that height.
        for height in range(0, 36, 5):
            want: dict[str, q.ValueLocked] = {}
            for cat in CATEGORIES:
                alive = [
                    r
                    for r in pools
                    if r[CAT] == rev(cat)
                    and r[H] <= height
                    and (r[SPENT_H] is None or r[SPENT_H] > height)
                ]
                touched = any(r[CAT] == rev(cat) and r[H] <= height for r in pools)
                if touched:
                    want[rev(cat).hex()] = q.ValueLocked(
                        sum(r[SATS] for r in alive), sum(r[TOKENS] for r in alive), len(alive)
                    )
            assert await q.value_locked(conn, height=height) == want, height
        # Volume, latest trades, price at a time.
        lo, hi = blocks[10][3], blocks[30][3]
        window = [r for r in trades if lo <= r[3] <= hi]
        assert await q.volume(conn, lo, hi) == (
            sum(r[8] for r in window),
            sum(r[9] for r in window),
            len(window),
        )
        by_token = await q.volume_by_token(conn, lo, hi)
        for token, (vs, vt, n) in by_token.items():
            mine = [r for r in window if r[1].hex() == token]
            assert (vs, vt, n) == (sum(r[8] for r in mine), sum(r[9] for r in mine), len(mine))
            assert await q.volume(conn, lo, hi, token) == (vs, vt, n)
        newest = sorted(trades, key=lambda r: (-r[2], -r[4], r[1]))  # one tx: by token id
        got = await q.latest_trades(conn, limit=7, offset=2)
        assert [(t.txid, t.token_id) for t in got] == [
            (r[0].hex(), r[1].hex()) for r in newest[2:9]
        ]
        assert all(t.block_hash == blocks[t.height][1].hex() for t in got)
        token = newest[0][1].hex()
        tok_trades = sorted(
            (r for r in trades if r[1].hex() == token), key=lambda r: (r[3], r[2], r[4])
        )
        at = tok_trades[len(tok_trades) // 2][3]
        last = [r for r in tok_trades if r[3] <= at][-1]
        hit = await q.price_at(conn, token, at)
        assert hit is not None and hit.txid == last[0].hex()
        assert hit.price == last[8] / last[9]
        assert await q.price_at(conn, token, 0) is None
        between = await q.trades_between(conn, token, lo, hi)
        assert [t.txid for t in between] == [r[0].hex() for r in tok_trades if lo <= r[3] <= hi]
        # Unique trader addresses per month.
        months: dict[str, int] = {}
        for m, _pkh in led.traders:
            months[m] = months.get(m, 0) + 1
        assert await q.unique_addresses(conn) == sorted(months.items())
    finally:
        await conn.close()


async def test_every_query_is_served_by_an_index(tmp_path: Path) -> None:
    """EXPLAIN every statement the query functions run: no full table scan of a table that
    grows with history (tokens and trader-months are the whole answer of their queries)."""
    sc = build_chain(seed=52, n_blocks=12)
    db = tmp_path / "q.sqlite"
    store = await open_store(db)
    await apply_all(store, sc.blocks)
    await store.close()
    conn = await open_reader(db)
    statements: list[str] = []
    tracing = True

    def trace(sql: str) -> None:
        if tracing:
            statements.append(sql)

    await conn.set_trace_callback(trace)
    try:
        token = rev(CATEGORIES[0]).hex()
        pool_id = next(iter(await q.all_active_pools(conn))).pool_id
        await q.index_height(conn)
        await q.height_at(conn, 1_700_100_000)
        await q.active_pools(conn, token=token)
        await q.active_pools(conn, pkh=OWNERS[0].pkh.hex())
        await q.all_active_pools(conn)
        await q.pool_history(conn, pool_id, start=5)
        await q.contract_counts(conn)
        await q.contract_counts(conn, token)
        await q.tokens(conn)
        await q.first_pool(conn, token)
        await q.value_locked(conn, height=5)
        await q.value_locked(conn, token=token)
        await q.latest_trades(conn, 10)
        await q.latest_trades(conn, 10, token=token)
        await q.trades_between(conn, token, 0, 1 << 40)
        await q.price_at(conn, token, 1 << 40)
        await q.volume(conn, 0, 1 << 40)
        await q.volume(conn, 0, 1 << 40, token)
        await q.volume_by_token(conn, 0, 1 << 40)
        await q.unique_addresses(conn)
        tracing = False
        assert len(statements) >= 20 and all("?" not in s for s in statements)
        # Full scans allowed: tables that are the whole answer, partial indexes of live pools
        # and withdraws (small), and the newest-first trade index under a LIMIT.
        whole_answer = {"cauldron_tokens", "cauldron_trader_months"}
        whole_answer.add("page")  # a page's keys, selected under a LIMIT, then joined
        small_or_limited = {
            "cauldron_pools_live_category",
            "cauldron_pools_live_owner",
            "cauldron_events_withdrawn",
            "cauldron_tokens_height",
            "cauldron_trades_height",
        }
        for sql in statements:
            plan = await conn.execute_fetchall(f"EXPLAIN QUERY PLAN {sql}")
            for row in plan:
                words = str(row[3]).replace("COVERING ", "").split()
                if words[0] != "SCAN" or words[1] in whole_answer:
                    continue
                index = words[4] if words[2:4] == ["USING", "INDEX"] else None
                assert index in small_or_limited, f"{sql!r}: {row[3]}"
                if index == "cauldron_trades_height":
                    assert "LIMIT" in sql
    finally:
        await conn.close()
