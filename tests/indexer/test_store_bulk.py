"""Secondary indexes deferred during a long initial sync (`indexer.store.bulk`): they come back
exactly as the migrations wrote them, across a restart and an upgrade, and the rows are the
scenario ledger's. Expected rows come from the ledger; expected indexes from a fresh store."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from indexer.decoders import create_decoders
from indexer.decoders.cauldron.schema import MIGRATIONS
from indexer.index import open_store
from indexer.snapshot import PoolSnapshot
from indexer.store import CORE_MIGRATIONS, Store, bulk, migrate
from indexer.store.db import BULK_WAL_AUTOCHECKPOINT, WAL_AUTOCHECKPOINT, open_writer
from indexer.store.sql import Sql
from runtime.logs import record_fields
from tests.indexer.test_follower_ledger import check_against_ledger
from tests.indexer.test_follower_support import SMALL, following, generate, urls
from tests.indexer.test_store_batch import FailAt
from tests.indexer.test_store_scenario import build_chain, dump


async def indexes(conn: Sql) -> list[tuple[str, str]]:
    rows = await conn.execute_fetchall(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name"
    )
    return [(str(r[0]), str(r[1])) for r in rows]


async def fresh_indexes(path: Path) -> list[tuple[str, str]]:
    store = await open_store(path, snapshot=PoolSnapshot())
    try:
        return await indexes(store.conn)
    finally:
        await store.close()


async def test_deferred_indexes_come_back_exactly_after_a_restart(tmp_path: Path) -> None:
    want = await fresh_indexes(tmp_path / "fresh.sqlite")
    sc = build_chain(seed=43, n_blocks=12, actions=8)
    store = await open_store(tmp_path / "bulk.sqlite", snapshot=PoolSnapshot())
    try:
        dropped = await store.defer_indexes()
        left = await indexes(store.conn)
        assert dropped == len(want) - len(left) >= 20
        assert all(sql.upper().startswith("CREATE UNIQUE") for _, sql in left)
        assert sorted(await bulk.deferred(store.conn)) == sorted(
            name for name, _ in want if (name, _) not in left
        )
        for b in sc.blocks[:6]:
            await store.apply_block(b.height, b.raw, hold=True)
    finally:
        await store.close()
    store = await open_store(tmp_path / "bulk.sqlite", snapshot=PoolSnapshot())
    try:
        assert store.indexes_deferred  # nothing to migrate: the sync goes on without them
        for b in sc.blocks[6:]:
            await store.apply_block(b.height, b.raw, hold=True)
        assert await store.restore_indexes() == dropped
        assert not store.indexes_deferred
        assert await indexes(store.conn) == want
        assert await store.restore_indexes() == 0
        got = await dump(store.conn)
        for table, rows in sc.ledger.expected().items():
            assert got[table] == rows, table
    finally:
        await store.close()


async def test_an_upgrade_builds_deferred_indexes_before_migrating(tmp_path: Path) -> None:
    """Cauldron #3 drops an index: run on a schema whose indexes are deferred, it would fail."""
    want = await fresh_indexes(tmp_path / "fresh.sqlite")
    db = tmp_path / "old.sqlite"
    conn = await open_writer(db)
    try:
        await migrate(conn, [*CORE_MIGRATIONS, MIGRATIONS[0]])
        assert await bulk.defer(conn) > 0
    finally:
        await conn.close()
    store = await open_store(db, snapshot=PoolSnapshot())
    try:
        assert not store.indexes_deferred
        assert await bulk.deferred(store.conn) == []
        assert await indexes(store.conn) == want
    finally:
        await store.close()


async def test_a_long_sync_defers_the_indexes_and_builds_them_at_the_tip(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    want = await fresh_indexes(tmp_path / "fresh.sqlite")
    net, result = await generate(SMALL.replace(seed=4))
    try:
        with caplog.at_level(logging.INFO, "indexer.follow"):
            async with following(urls(net), bulk_distance=0) as run:
                assert not run.store.indexes_deferred
                assert await indexes(run.store.conn) == want
                await check_against_ledger(run.store.conn, result.ledger)
        events = [record_fields(r).get("event") for r in caplog.records]
        assert events.count("indexes_deferred") == 1
        assert events.count("indexes_built") == 1
        assert events.index("indexes_deferred") < events.index("indexes_built")
    finally:
        await net.stop()


async def test_indexes_queued_with_a_block_are_built_by_its_batch(tmp_path: Path) -> None:
    """`restore_indexes_soon`: the next block's batch builds the indexes (the event loop does
    not wait for it); after its COMMIT the schema and the rows are a fresh store's."""
    want = await fresh_indexes(tmp_path / "fresh.sqlite")
    sc = build_chain(seed=44, n_blocks=12, actions=8)
    store = await open_store(tmp_path / "i.sqlite", snapshot=PoolSnapshot())
    try:
        assert not store.restore_indexes_soon()  # nothing deferred: nothing due
        await store.defer_indexes()
        for b in sc.blocks[:5]:
            await store.apply_block(b.height, b.raw, hold=True)
        assert store.restore_indexes_soon()
        assert store.indexes_deferred  # until a block carries the rebuild
        for b in sc.blocks[5:]:
            await store.apply_block(b.height, b.raw, hold=True)
            assert not store.indexes_deferred
        assert store.held_blocks == len(sc.blocks)  # one bulk batch: nothing waited for
        await store.commit()
        assert await indexes(store.conn) == want
        assert await bulk.deferred(store.conn) == []
        got = await dump(store.conn)
        for table, rows in sc.ledger.expected().items():
            assert got[table] == rows, table
    finally:
        await store.close()


async def test_a_failed_batch_undoes_the_queued_rebuild_too(tmp_path: Path) -> None:
    sc = build_chain(seed=45, n_blocks=12, actions=8)
    snapshot = PoolSnapshot()
    fail = FailAt(sc.blocks[7].height)
    decoders = [*create_decoders(snapshot=snapshot), fail]
    store = await Store.open(tmp_path / "i.sqlite", snapshot=snapshot, decoders=decoders)
    try:
        dropped = await store.defer_indexes()
        for b in sc.blocks[:5]:
            await store.apply_block(b.height, b.raw, hold=True)
        await store.commit()
        assert store.restore_indexes_soon()
        with pytest.raises(OSError, match="disk full"):
            for b in sc.blocks[5:]:
                await store.apply_block(b.height, b.raw, hold=True)
        assert fail.failed
        tip = await store.tip()  # reloads after the failure: the batch is gone, rebuild too
        assert tip is not None and tip.height == sc.blocks[4].height
        assert store.indexes_deferred
        assert len(await bulk.deferred(store.conn)) == dropped
        for b in sc.blocks[5:]:
            await store.apply_block(b.height, b.raw, hold=True)
        assert await store.restore_indexes() == dropped
        assert await indexes(store.conn) == await fresh_indexes(tmp_path / "fresh.sqlite")
        got = await dump(store.conn)
        for table, rows in sc.ledger.expected().items():
            assert got[table] == rows, table
    finally:
        await store.close()


async def test_bulk_batches_last_until_the_run_of_held_blocks_ends(tmp_path: Path) -> None:
    """After an early rebuild the rest of the run keeps bulk-length batches (the loop is not
    held back every `batch_blocks`); `commit` ends the run, and normal batches come back."""
    sc = build_chain(seed=46, n_blocks=14, actions=8)
    store = await open_store(
        tmp_path / "i.sqlite",
        snapshot=PoolSnapshot(),
        batch_blocks=1,
        bulk_batch_blocks=3,
        bulk_batch_seconds=3600.0,
    )
    try:
        await store.defer_indexes()
        await store.apply_block(sc.blocks[0].height, sc.blocks[0].raw, hold=True)
        assert store.restore_indexes_soon()
        held = []
        for b in sc.blocks[1:-1]:
            await store.apply_block(b.height, b.raw, hold=True)
            held.append(store.held_blocks)
        assert not store.indexes_deferred
        assert held[:6] == [2, 0, 1, 2, 0, 1]  # batches of 3 blocks, rebuild or not
        await store.commit()
        last = sc.blocks[-1]
        await store.apply_block(last.height, last.raw, hold=True)
        assert store.held_blocks == 0  # a new run, indexes in place: batches of 1
        got = await dump(store.conn)
        for table, rows in sc.ledger.expected().items():
            assert got[table] == rows, table
    finally:
        await store.close()


async def _autocheckpoint(store: Store) -> int:
    rows = await store.conn.execute_fetchall("PRAGMA wal_autocheckpoint")
    return int(next(iter(rows))[0])


async def test_a_bulk_run_spaces_checkpoints_until_it_ends(tmp_path: Path) -> None:
    """While a run of held blocks begun with the indexes deferred lasts, the writer checkpoints
    the WAL every `BULK_WAL_AUTOCHECKPOINT` pages (the rebuilt indexes are not copied into the
    file in the COMMIT the walk waits for at the tip); `commit` ends the run and brings the
    usual spacing back, and so does a failed batch."""
    sc = build_chain(seed=46, n_blocks=10, actions=6)
    snap = PoolSnapshot()
    store = await Store.open(
        tmp_path / "i.sqlite",
        snapshot=snap,
        decoders=[*create_decoders(["cauldron"], snapshot=snap), FailAt(sc.blocks[8].height)],
        bulk_batch_blocks=3,
        bulk_batch_seconds=3600.0,
    )
    try:
        assert await _autocheckpoint(store) == WAL_AUTOCHECKPOINT
        await store.defer_indexes()
        for b in sc.blocks[:4]:
            await store.apply_block(b.height, b.raw, hold=True)
        assert await _autocheckpoint(store) == BULK_WAL_AUTOCHECKPOINT
        assert store.restore_indexes_soon()
        await store.apply_block(sc.blocks[4].height, sc.blocks[4].raw, hold=True)
        assert not store.indexes_deferred
        assert await _autocheckpoint(store) == BULK_WAL_AUTOCHECKPOINT  # until the run ends
        await store.commit()
        assert await _autocheckpoint(store) == WAL_AUTOCHECKPOINT

        await store.defer_indexes()  # a second bulk run, ended by a failed block
        for b in sc.blocks[5:8]:
            await store.apply_block(b.height, b.raw, hold=True)
        assert await _autocheckpoint(store) == BULK_WAL_AUTOCHECKPOINT
        with pytest.raises(OSError, match="disk full"):
            await store.apply_block(sc.blocks[8].height, sc.blocks[8].raw, hold=True)
        assert await _autocheckpoint(store) == WAL_AUTOCHECKPOINT
    finally:
        await store.close()
