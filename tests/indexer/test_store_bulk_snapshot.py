"""The live snapshot in bulk mode (secondary indexes deferred): the Cauldron decoder lets it lag
during the initial sync and rebuilds it when the indexes come back; it must then equal the
snapshot of a sync without bulk mode, and the scenario ledger's live pools."""

from __future__ import annotations

from pathlib import Path

from indexer.index import open_store
from indexer.snapshot import LivePool, PoolSnapshot, SnapshotChange
from tests.indexer.test_store_scenario import build_chain


def rev(h: bytes) -> bytes:
    return h[::-1]


def pools(snapshot: PoolSnapshot) -> list[LivePool]:
    return sorted(snapshot.all_pools(), key=repr)


def ledger_view(snapshot: PoolSnapshot) -> set[tuple[object, ...]]:
    return {(rev(p.outpoint.txid), p.vout, p.sats, p.tokens) for p in snapshot.all_pools()}


async def normal_sync(path: Path, seed: int, n_blocks: int) -> PoolSnapshot:
    sc = build_chain(seed=seed, n_blocks=n_blocks, actions=8)
    snap = PoolSnapshot()
    store = await open_store(path, snapshot=snap)
    try:
        for b in sc.blocks:
            await store.apply_block(b.height, b.raw, hold=True)
        await store.commit()
    finally:
        await store.close()
    assert ledger_view(snap) == sc.ledger.live_pools()
    return snap


async def test_a_bulk_sync_ends_with_the_snapshot_of_a_normal_sync(tmp_path: Path) -> None:
    want = await normal_sync(tmp_path / "normal.sqlite", seed=51, n_blocks=14)
    sc = build_chain(seed=51, n_blocks=14, actions=8)
    snap = PoolSnapshot()
    changes: list[SnapshotChange] = []
    store = await open_store(tmp_path / "bulk.sqlite", snapshot=snap)
    try:
        await store.defer_indexes()
        snap.subscribe(changes.append)
        for b in sc.blocks:
            await store.apply_block(b.height, b.raw, hold=True)
        await store.commit()
        assert changes == []  # nobody reads it during the sync: no per-block updates
        await store.restore_indexes()
        assert pools(snap) == pools(want)
        assert snap.height == want.height == sc.blocks[-1].height
        # The feed reports the whole rebuild, once.
        assert {c.version for c in changes} == {snap.version}
        added = {p for c in changes for p in c.added}
        assert added == set(snap.all_pools())
        assert not any(c.removed for c in changes)
    finally:
        await store.close()


async def test_a_restart_in_bulk_mode_then_the_tip(tmp_path: Path) -> None:
    """`Store.open` finds the indexes deferred: bulk mode again, and the snapshot is whole at
    the tip; and a store closed while lagging reopens with the right snapshot (from SQLite)."""
    want = await normal_sync(tmp_path / "normal.sqlite", seed=52, n_blocks=12)
    sc = build_chain(seed=52, n_blocks=12, actions=8)
    path = tmp_path / "bulk.sqlite"
    store = await open_store(path, snapshot=PoolSnapshot())
    try:
        await store.defer_indexes()
        for b in sc.blocks[:5]:
            await store.apply_block(b.height, b.raw, hold=True)
    finally:
        await store.close()
    snap = PoolSnapshot()
    store = await open_store(path, snapshot=snap)
    try:
        assert store.indexes_deferred
        mid = pools(snap)  # loaded from the committed rows
        for b in sc.blocks[5:]:
            await store.apply_block(b.height, b.raw, hold=True)
        await store.commit()
        assert pools(snap) == mid  # lagging
    finally:
        await store.close()
    reopened = PoolSnapshot()
    store = await open_store(path, snapshot=reopened)
    try:
        assert pools(reopened) == pools(want)
        await store.restore_indexes()
        assert pools(reopened) == pools(want)
        assert reopened.height == want.height
    finally:
        await store.close()


async def test_an_undo_in_bulk_mode(tmp_path: Path) -> None:
    """A reorg during the sync reloads the decoder: the snapshot then equals a normal sync of
    the surviving blocks (the same seed builds the same first blocks)."""
    want = await normal_sync(tmp_path / "normal.sqlite", seed=53, n_blocks=7)
    sc = build_chain(seed=53, n_blocks=12, actions=8)
    snap = PoolSnapshot()
    store = await open_store(tmp_path / "bulk.sqlite", snapshot=snap)
    try:
        await store.defer_indexes()
        for b in sc.blocks:
            await store.apply_block(b.height, b.raw, hold=True)
        assert await store.undo_to(sc.blocks[6].height) == 5
        assert pools(snap) == pools(want)
        for b in sc.blocks[7:]:
            await store.apply_block(b.height, b.raw, hold=True)
        await store.restore_indexes()
        assert ledger_view(snap) == sc.ledger.live_pools()
    finally:
        await store.close()
