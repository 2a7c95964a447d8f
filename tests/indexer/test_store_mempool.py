"""Unconfirmed transactions: they move the live snapshot, never the tables; a block confirms
them or evicts the losers of a double-spend (and everything built on a loser)."""

from __future__ import annotations

from bch.script import p2pkh_locking
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from indexer.snapshot import SnapshotChange
from indexer.store import Store
from tests.indexer.test_store_reorg import live_pools_in_db, snapshot_pools
from tests.indexer.test_store_scenario import (
    CATEGORIES,
    TRADERS,
    Scenario,
    SimPool,
    TxRecord,
    apply_all,
    build_chain,
    dump,
    open_store,
    rev,
)


def visible_pools(sc: Scenario) -> list[SimPool]:
    """Pools the index knows (some scenario pools are invisible until spent)."""
    return [p for p in sc.pools.values() if p.outpoint in sc.ledger.lineage]


def fresh_pools(sc: Scenario) -> list[SimPool]:
    """The pools the last block created, in creation order."""
    txids = sc.blocks[-1].block.txids
    return sorted(
        (p for p in visible_pools(sc) if p.outpoint.txid in txids),
        key=lambda p: [r.tx.txid for r in sc.blocks[-1].records].index(p.outpoint.txid),
    )


def live_view(store: Store) -> set[tuple[bytes, int, int, int]]:
    return {(rev(p.outpoint.txid), p.vout, p.sats, p.tokens) for p in store.snapshot.all_pools()}


async def indexed(seed: int, n_blocks: int) -> tuple[Scenario, Store]:
    """A chain whose last two blocks create pools: the last one three, the first two of one
    token."""
    sc = build_chain(seed, n_blocks)
    cat = CATEGORIES[0]
    sc.next_block(records=[sc.create(True, cat), sc.create(True, cat)])
    sc.next_block(records=[sc.create(True, cat), sc.create(True, cat), sc.create(True)])
    assert len(fresh_pools(sc)) == 3
    store = await open_store()
    await apply_all(store, sc.blocks)
    return sc, store


async def test_mempool_moves_live_state_and_the_block_confirms_it() -> None:
    sc, store = await indexed(seed=31, n_blocks=12)
    try:
        nxt = sc.fork(5)
        pools = fresh_pools(nxt)
        recs = [nxt.trade(pools[:2]), nxt.deposit(pools[2]), nxt.create(summon=True)]
        created = recs[-1].ops[0].new
        assert created is not None
        recs.append(nxt.trade([created]))  # spends an unconfirmed pool
        older = next(p for p in visible_pools(nxt) if p.outpoint not in {q.outpoint for q in pools})
        recs.append(nxt.withdraw(older, recreate=False))
        tables_before = await dump(store.conn)
        changes: list[SnapshotChange] = []
        store.snapshot.subscribe(changes.append)
        for rec in recs:
            assert await store.apply_mempool_tx(rec.tx)
        assert await store.apply_mempool_tx(recs[0].tx.to_bytes())  # already applied: still True
        assert store.mempool_txids() == {r.tx.txid for r in recs}
        # Live = the ledger's pools after these transactions are mined; tables untouched.
        built = nxt.next_block(records=recs)
        assert live_view(store) == nxt.ledger.live_pools()
        assert await dump(store.conn) == tables_before
        unconfirmed = {p.outpoint for p in store.snapshot.all_pools() if p.height is None}
        made = {op.new.outpoint for r in recs for op in r.ops if op.new is not None}
        assert unconfirmed == made - {created.outpoint}  # the new pool was traded on at once
        # The overlay in SQLite (for the data API) says the same: confirmed pools spent,
        # unconfirmed pools live, on the stored tip.
        tip = await store.tip()
        assert tip is not None
        spent, live = await overlay_in_db(store)
        confirmed_before = {p.outpoint for p in visible_pools(sc)}
        assert spent == {o.pool.outpoint for r in recs for o in r.ops if o.pool} & confirmed_before
        assert spent and live == {
            (p.outpoint, p.sats, p.tokens) for p in store.snapshot.all_pools() if p.height is None
        }
        state = await store.conn.execute_fetchall("SELECT height, hash FROM mempool_state")
        assert [tuple(r) for r in state] == [(tip.height, tip.hash[::-1])]
        # The first change is the two-pool trade: one token, both pools replaced.
        first = changes[0]
        assert first.token == rev(pools[0].category).hex()
        assert {p.outpoint for p in first.removed} == {pools[0].outpoint, pools[1].outpoint}
        assert [c.version for c in changes] == sorted(c.version for c in changes)
        # The block arrives: pending is empty, live = the indexed pools, all confirmed.
        await store.apply_block(built.height, built.raw)
        assert store.mempool_txids() == set()
        assert store.snapshot.pending() == []
        assert snapshot_pools(store) == await live_pools_in_db(store)
        assert all(p.height is not None for p in store.snapshot.all_pools())
        assert await overlay_in_db(store) == (set(), set())
    finally:
        await store.close()


async def overlay_in_db(store: Store) -> tuple[set[OutPoint], set[tuple[OutPoint, int, int]]]:
    """The mempool overlay's rows: (spent outpoints, {(created outpoint, sats, tokens)})."""
    rows = await store.conn.execute_fetchall(
        "SELECT txid, vout, kind, sats, tokens FROM mempool_pools"
    )
    spent, live = set(), set()
    for txid, vout, kind, sats, tokens in rows:
        op = OutPoint(bytes(txid)[::-1], int(vout))
        if kind == "spent":
            spent.add(op)
        else:
            live.add((op, int(sats), int(tokens)))
    return spent, live


async def test_double_spend_loser_and_its_child_are_evicted() -> None:
    sc, store = await indexed(seed=32, n_blocks=6)
    try:
        target = visible_pools(sc)[0]
        a, b = sc.fork(1), sc.fork(2)
        rec_a = a.trade([a.pools[target.outpoint]])
        child_pool = rec_a.ops[0].new
        assert child_pool is not None
        rec_child = a.trade([child_pool])
        rec_b = b.trade([b.pools[target.outpoint]])
        assert await store.apply_mempool_tx(rec_a.tx)
        assert not await store.apply_mempool_tx(rec_b.tx)  # first seen wins in the mempool
        assert await store.apply_mempool_tx(rec_child.tx)
        # ...but b is what gets mined.
        built = b.next_block(records=[rec_b])
        await store.apply_block(built.height, built.raw)
        assert store.mempool_txids() == set()
        assert snapshot_pools(store) == await live_pools_in_db(store)
        assert live_view(store) == b.ledger.live_pools()
    finally:
        await store.close()


async def test_conflict_on_a_funding_input_evicts_the_trade() -> None:
    sc, store = await indexed(seed=33, n_blocks=6)
    try:
        a = sc.fork(1)
        traded = visible_pools(a)[0]
        rec = a.trade([traded])
        funding = rec.tx.inputs[-1]
        assert await store.apply_mempool_tx(rec.tx)
        # A plain payment spending the trade's funding coin is mined instead.
        spend = Transaction.build(
            [TxInput(funding.outpoint, funding.unlocking)],
            [TxOutput(10_000, p2pkh_locking(TRADERS[1].pkh))],
        )
        other = sc.fork(2)
        built = other.next_block(records=[TxRecord(spend, [], [], [])])
        await store.apply_block(built.height, built.raw)
        assert store.mempool_txids() == set()
        assert snapshot_pools(store) == await live_pools_in_db(store)
    finally:
        await store.close()


async def test_evict_stale_irrelevant_and_reorged_away() -> None:
    sc, store = await indexed(seed=34, n_blocks=6)
    try:
        # Irrelevant (no pool) and already-mined transactions are not applied.
        plain = Transaction.build(
            [TxInput(OutPoint(bytes([7]) * 32, 0), b"\x51")],
            [TxOutput(1_000, p2pkh_locking(TRADERS[0].pkh))],
        )
        assert not await store.apply_mempool_tx(plain)
        mined = next(r for b in sc.blocks for r in b.records if r.ops)
        assert not await store.apply_mempool_tx(mined.tx)
        # Explicit eviction takes the descendants along and restores the spent pools.
        before = live_view(store)
        a = sc.fork(1)
        traded = visible_pools(a)[0]
        rec = a.trade([traded])
        new = rec.ops[0].new
        assert new is not None
        rec_child = a.deposit(new)
        assert await store.apply_mempool_tx(rec.tx)
        assert await store.apply_mempool_tx(rec_child.tx)
        spent, live = await overlay_in_db(store)
        assert spent == {traded.outpoint} and len(live) == 1  # the child's pool
        assert await store.evict([rec.tx.txid]) == {rec.tx.txid, rec_child.tx.txid}
        assert live_view(store) == before and store.mempool_txids() == set()
        assert await overlay_in_db(store) == (set(), set())
        # A pending spend of a pool from a block that a reorg removes is dropped with it.
        last = sc.blocks[-1]
        fresh = fresh_pools(sc)
        b = sc.fork(2)
        rec_b = b.trade([b.pools[fresh[0].outpoint]])
        assert await store.apply_mempool_tx(rec_b.tx)
        assert (await overlay_in_db(store))[0] == {fresh[0].outpoint}
        await store.undo_to(last.height - 1)
        assert store.mempool_txids() == set()
        assert snapshot_pools(store) == await live_pools_in_db(store)
        # The overlay follows: empty, on the new tip.
        assert await overlay_in_db(store) == (set(), set())
        state = await store.conn.execute_fetchall("SELECT height FROM mempool_state")
        assert [tuple(r) for r in state] == [(last.height - 1,)]
    finally:
        await store.close()
