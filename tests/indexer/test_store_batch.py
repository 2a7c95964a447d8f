"""Batched commits (`apply_block(hold=True)`, the initial sync): where the batches end, what
other connections see meanwhile, and that a failure inside a batch rolls the whole batch back
and leaves the store able to continue to exactly a clean run's index."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import pytest

from indexer import index
from indexer.decoders import create_decoders
from indexer.snapshot import PoolSnapshot
from indexer.store import Store, open_reader
from indexer.store.decoder import BlockContext, BlockTx, Decoder
from indexer.store.schema import Migration
from indexer.store.sql import Sql
from tests.indexer.test_store_scenario import apply_all, build_chain, dump, open_store


async def reader_height(path: Path) -> int | None:
    conn = await open_reader(path)
    try:
        rows = list(await conn.execute_fetchall("SELECT max(height) FROM blocks"))
        return None if rows[0][0] is None else int(rows[0][0])
    finally:
        await conn.close()


async def test_held_blocks_commit_every_batch_and_at_commit(tmp_path: Path) -> None:
    chain = build_chain(seed=31, n_blocks=12, actions=6)
    first = chain.blocks[0].height
    db = tmp_path / "index.sqlite"
    store = await index.open_store(
        db, snapshot=PoolSnapshot(), batch_blocks=4, batch_seconds=3600.0
    )
    seen: list[tuple[int, int | None, int]] = []
    try:
        for b in chain.blocks[:10]:
            await store.apply_block(b.height, b.raw, hold=True)
            assert (await store.tip()) is not None
            # A batch's COMMIT is queued on the writer process: an awaited request returns
            # only after everything sent before it ran, so a reader then sees the batch.
            await store.conn.execute("SELECT 1")
            seen.append((b.height, await reader_height(db), store.held_blocks))
        # Blocks 1–4 and 5–8 were committed as batches; 9 and 10 are held (the writer sees
        # them, a reader does not).
        want = []
        for i in range(10):
            done = (i + 1) // 4 * 4
            want.append((first + i, None if done == 0 else first + done - 1, (i + 1) % 4))
        assert seen == want
        tip = await store.tip()
        assert tip is not None and tip.height == first + 9
        await store.commit()
        assert store.held_blocks == 0
        assert await reader_height(db) == first + 9
        # A block applied without `hold` commits at once, and so does what was held before it.
        await store.apply_block(chain.blocks[10].height, chain.blocks[10].raw, hold=True)
        assert await reader_height(db) == first + 9
        await store.apply_block(chain.blocks[11].height, chain.blocks[11].raw)
        assert await reader_height(db) == first + 11 and store.held_blocks == 0
        got = await dump(store.conn)
    finally:
        await store.close()
    clean = await open_store()
    try:
        await apply_all(clean, chain.blocks)
        assert got == await dump(clean.conn)
    finally:
        await clean.close()


async def test_close_commits_held_blocks(tmp_path: Path) -> None:
    chain = build_chain(seed=32, n_blocks=5)
    db = tmp_path / "index.sqlite"
    store = await index.open_store(
        db, snapshot=PoolSnapshot(), batch_blocks=100, batch_seconds=3600.0
    )
    for b in chain.blocks:
        await store.apply_block(b.height, b.raw, hold=True)
    assert await reader_height(db) is None
    await store.close()
    assert await reader_height(db) == chain.blocks[-1].height


async def test_undo_inside_a_batch_commits_first_then_rolls_back(tmp_path: Path) -> None:
    chain = build_chain(seed=33, n_blocks=8, actions=5)
    db = tmp_path / "index.sqlite"
    store = await index.open_store(
        db, snapshot=PoolSnapshot(), batch_blocks=100, batch_seconds=3600.0
    )
    try:
        for b in chain.blocks:
            await store.apply_block(b.height, b.raw, hold=True)
        keep = chain.blocks[3].height
        assert await store.undo_to(keep) == len(chain.blocks) - 4
        assert await reader_height(db) == keep
        got = await dump(store.conn)
        pools = {p.outpoint for p in store.snapshot.all_pools()}
    finally:
        await store.close()
    clean = await open_store()
    try:
        await apply_all(clean, chain.blocks[:4])
        assert got == await dump(clean.conn)
        assert pools == {p.outpoint for p in clean.snapshot.all_pools()}
    finally:
        await clean.close()


class FailAt(Decoder[None, object]):
    """A decoder whose `write` fails once at one height (e.g. a full disk)."""

    name = "fail_at"
    migrations: Sequence[Migration] = ()
    patterns: Sequence[bytes] = (b"",)

    def __init__(self, height: int) -> None:
        self.height = height
        self.failed = False

    async def load(self, conn: Sql) -> None:
        return None

    async def prepare(
        self, conn: Sql, block: BlockContext, txs: Sequence[BlockTx]
    ) -> tuple[Sequence[BlockTx], None]:
        return (), None

    def decode(self, tx: BlockTx, context: None) -> Sequence[object]:
        return ()

    async def write(self, conn: Sql, block: BlockContext, rows: Sequence[object]) -> None:
        if block.height == self.height and not self.failed:
            self.failed = True
            raise OSError("disk full")

    async def undo_to(self, conn: Sql, height: int) -> None:
        return None

    def committed(
        self, block: BlockContext, rows: Sequence[object], evicted: Collection[bytes]
    ) -> None:
        return None


async def test_a_failure_mid_batch_rolls_back_the_batch_and_memory(tmp_path: Path) -> None:
    chain = build_chain(seed=34, n_blocks=12, actions=8)
    first = chain.blocks[0].height
    fail = FailAt(first + 6)
    snap = PoolSnapshot()
    store = await Store.open(
        tmp_path / "index.sqlite",
        snapshot=snap,
        decoders=[*create_decoders(["cauldron"], snapshot=snap), fail],
        batch_blocks=4,
        batch_seconds=3600.0,
    )
    clean = await open_store()
    try:
        await apply_all(clean, chain.blocks[:4])
        at_batch = await dump(clean.conn, ["blocks", "cauldron_pools", "cauldron_events"])
        live_at_batch = {p.outpoint for p in clean.snapshot.all_pools()}
        for b in chain.blocks[:6]:
            await store.apply_block(b.height, b.raw, hold=True)
        with pytest.raises(OSError, match="disk full"):
            await store.apply_block(chain.blocks[6].height, chain.blocks[6].raw, hold=True)
        # Back to the last committed batch (blocks 1–4), in the database and in memory.
        tip = await store.tip()
        assert tip is not None and tip.height == first + 3
        assert await dump(store.conn, list(at_batch)) == at_batch
        assert {p.outpoint for p in snap.all_pools()} == live_at_batch
        # And the sync continues from there to the clean index.
        for b in chain.blocks[4:]:
            await store.apply_block(b.height, b.raw, hold=True)
        await store.commit()
        await apply_all(clean, chain.blocks[4:])
        tables = [t for t in await dump(clean.conn) if t.startswith(("blocks", "cauldron"))]
        assert await dump(store.conn, tables) == await dump(clean.conn, tables)
        assert {p.outpoint for p in snap.all_pools()} == {
            p.outpoint for p in clean.snapshot.all_pools()
        }
    finally:
        await store.close()
        await clean.close()
