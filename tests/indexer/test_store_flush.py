"""Rows kept back within a held batch (`Decoder.flush`): the Cauldron decoder inserts a pool created
and spent in the same batch once, already spent, and a failure while flushing rolls the batch
back like any other failed write. Expected rows come from the scenario's own ledger."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from indexer import index
from indexer.decoders import create_decoders
from indexer.snapshot import PoolSnapshot
from indexer.store import Store
from indexer.store.sql import Sql
from indexer.store.writer import Writer
from tests.indexer.test_store_batch import FailAt
from tests.indexer.test_store_scenario import Scenario, apply_all, build_chain, dump, open_store

_LOG = """
CREATE TEMP TABLE pool_writes (kind TEXT NOT NULL, txid BLOB NOT NULL, vout INTEGER NOT NULL);
CREATE TEMP TRIGGER pool_inserted AFTER INSERT ON main.cauldron_pools
    BEGIN INSERT INTO pool_writes VALUES ('insert', new.txid, new.vout); END;
CREATE TEMP TRIGGER pool_updated AFTER UPDATE ON main.cauldron_pools
    BEGIN INSERT INTO pool_writes VALUES ('update', new.txid, new.vout); END;
"""


async def _writes(conn: Sql) -> list[tuple[str, bytes, int]]:
    rows = await conn.execute_fetchall("SELECT kind, txid, vout FROM pool_writes")
    return sorted((str(r[0]), bytes(r[1]), int(r[2])) for r in rows)


async def _index(
    sc: Scenario, path: Path, batch_blocks: int, *, bulk: bool = False
) -> list[tuple[str, bytes, int]]:
    """Index the chain held in batches of `batch_blocks` (or, with `bulk`, with the indexes
    deferred and bulk batches of 1,000 blocks); the pool writes SQLite saw."""
    store = await index.open_store(
        path,
        snapshot=PoolSnapshot(),
        batch_blocks=batch_blocks,
        batch_seconds=3600.0,
        bulk_batch_blocks=1000,
        bulk_batch_seconds=3600.0,
    )
    try:
        if bulk:
            await store.defer_indexes()
        await store.conn.executescript(_LOG)
        for b in sc.blocks:
            await store.apply_block(b.height, b.raw, hold=True)
        await store.commit()
        got = await dump(store.conn)
        for table, rows in sc.ledger.expected().items():
            assert got[table] == rows, table
        return await _writes(store.conn)
    finally:
        await store.close()


async def test_a_pool_spent_within_its_batch_is_inserted_once_already_spent(
    tmp_path: Path,
) -> None:
    sc = build_chain(seed=41, n_blocks=16, actions=8)
    pools = list(sc.ledger.pools.values())
    spent_later = [r for r in pools if r[13] is not None and r[13] > r[8]]
    assert len(spent_later) >= 10  # the scenario spends pools in later blocks
    inserts = sorted(("insert", r[0], r[1]) for r in pools)

    # One batch for the whole chain: every pool is written once, in its final state.
    assert await _index(sc, tmp_path / "one.sqlite", 1000) == inserts

    # A commit after every block: a pool spent in a later block is inserted, then updated.
    updates = sorted(("update", r[0], r[1]) for r in spent_later)
    assert await _index(sc, tmp_path / "each.sqlite", 1) == sorted(inserts + updates)

    # The same store settings in bulk mode (indexes deferred): the bulk batch holds the chain.
    assert await _index(sc, tmp_path / "bulk.sqlite", 1, bulk=True) == inserts


async def test_kept_back_rows_go_in_before_the_deferred_indexes_are_built(
    tmp_path: Path,
) -> None:
    """A rebuild of the indexes queued within a bulk batch flushes the rows kept back so far
    first: they go into the table without indexes, and the indexes are then built over them
    (not maintained row by row through a batch's worth of pools)."""
    sc = build_chain(seed=41, n_blocks=16, actions=8)
    store = await index.open_store(
        tmp_path / "index.sqlite",
        snapshot=PoolSnapshot(),
        bulk_batch_blocks=1000,
        bulk_batch_seconds=3600.0,
    )
    try:
        await store.defer_indexes()
        # Each pool insert records whether an index of the table existed at that moment.
        await store.conn.executescript(
            "CREATE TEMP TABLE inserted (height INTEGER NOT NULL, indexed INTEGER NOT NULL);"
            "CREATE TEMP TRIGGER pool_inserted AFTER INSERT ON main.cauldron_pools BEGIN "
            "INSERT INTO inserted SELECT new.height, count(*) FROM main.sqlite_master "
            "WHERE type = 'index' AND name = 'cauldron_pools_live_category'; END;"
        )
        middle = len(sc.blocks) // 2
        for i, b in enumerate(sc.blocks):
            if i == middle:
                assert store.restore_indexes_soon()  # built with this block's writes
            await store.apply_block(b.height, b.raw, hold=True)
        await store.commit()
        assert store.held_blocks == 0 and not store.indexes_deferred
        got = await dump(store.conn)
        for table, rows in sc.ledger.expected().items():
            assert got[table] == rows, table
        rows = [
            (int(r[0]), int(r[1]))
            for r in await store.conn.execute_fetchall("SELECT height, indexed FROM inserted")
        ]
        split = sc.blocks[middle].height
        before = [indexed for height, indexed in rows if height < split]
        after = [indexed for height, indexed in rows if height >= split]
        assert before and after  # pools created on both sides of the rebuild
        assert set(before) == {0} and set(after) == {1}
    finally:
        await store.close()


class FlushFails(FailAt):
    """A decoder whose kept-back write fails at its `n`-th flush (the database refuses it, as
    it would on a full disk)."""

    name = "flush_fails"

    def __init__(self, n: int) -> None:
        super().__init__(-1)
        self.n = n
        self.flushes = 0

    def flush(self, conn: Writer) -> None:
        self.flushes += 1
        if self.flushes == self.n:
            conn.submit([("exec", "INSERT INTO disk_full VALUES (1)", ())])


@pytest.mark.parametrize("at_commit", [False, True])
async def test_a_failed_flush_rolls_the_batch_back(tmp_path: Path, at_commit: bool) -> None:
    sc = build_chain(seed=42, n_blocks=12, actions=8)
    first = sc.blocks[0].height
    snap = PoolSnapshot()
    store = await Store.open(
        tmp_path / "index.sqlite",
        snapshot=snap,
        decoders=[*create_decoders(["cauldron"], snapshot=snap), FlushFails(2)],
        batch_blocks=4,
        batch_seconds=3600.0,
    )
    clean = await open_store()
    try:
        await apply_all(clean, sc.blocks[:4])
        tables = ["blocks", "cauldron_pools", "cauldron_events", "cauldron_tvl"]
        at_batch = await dump(clean.conn, tables)
        live_at_batch = {p.outpoint for p in clean.snapshot.all_pools()}
        for b in sc.blocks[:7]:  # blocks 1–4 committed, 5–7 held
            await store.apply_block(b.height, b.raw, hold=True)
        with pytest.raises(sqlite3.OperationalError, match="no such table: disk_full"):
            if at_commit:
                await store.commit()
            else:  # block 8 ends the batch: its COMMIT is queued, and checked at the next
                await store.apply_block(sc.blocks[7].height, sc.blocks[7].raw, hold=True)
                await store.commit()
        tip = await store.tip()
        assert tip is not None and tip.height == first + 3
        assert await dump(store.conn, tables) == at_batch
        assert {p.outpoint for p in snap.all_pools()} == live_at_batch
        # The sync resumes from the last committed batch to the ledger's index.
        for b in sc.blocks[4:]:
            await store.apply_block(b.height, b.raw, hold=True)
        await store.commit()
        got = await dump(store.conn)
        for table, rows in sc.ledger.expected().items():
            assert got[table] == rows, table
    finally:
        await store.close()
        await clean.close()
