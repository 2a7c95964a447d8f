"""Connections, migrations, the read-only reader, and the decoder registry (a decoder plugged in
from outside gets its tables migrated, its blocks and its undo without any store change)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from pathlib import Path

import pytest

from bch.tx import OutPoint
from indexer.decoders import BlockContext, BlockTx, Decoder, create_decoders, register_decoder
from indexer.decoders.cauldron import format_pool_id, parse_pool_id
from indexer.index import open_store
from indexer.snapshot import PoolSnapshot
from indexer.store import CORE_MIGRATIONS, Migration, Store, migrate, open_reader, open_writer
from indexer.store.heard import MIGRATIONS as HEARD_MIGRATIONS
from indexer.store.overlay import MIGRATIONS as OVERLAY_MIGRATIONS
from indexer.store.schema import check_migrations
from indexer.store.sql import Sql
from indexer.store.writer import Writer
from protocols.cauldron.detect import SUMMON_HEAD
from tests.indexer.test_store_scenario import apply_all, build_chain, dump


async def pragma(conn: Sql, name: str) -> object:
    rows = await conn.execute_fetchall(f"PRAGMA {name}")
    return next(iter(rows))[0]


async def test_writer_settings_and_idempotent_migrations(tmp_path: Path) -> None:
    db = tmp_path / "i.sqlite"
    store = await open_store(db)
    try:
        assert await pragma(store.conn, "journal_mode") == "wal"
        assert await pragma(store.conn, "synchronous") == 1  # NORMAL
        assert await pragma(store.conn, "foreign_keys") == 1
        assert await pragma(store.conn, "wal_autocheckpoint") == 10_000
        rows = await store.conn.execute_fetchall(
            "SELECT component, version FROM schema_migrations ORDER BY 1, 2"
        )
        # Every component's migrations, 1 … n each, all applied (the decoders add versions).
        declared = [
            *CORE_MIGRATIONS,
            *OVERLAY_MIGRATIONS,
            *HEARD_MIGRATIONS,
            *(m for d in store.decoders for m in d.migrations),
        ]
        got = list(rows)
        components = {"core", "mempool", "heard", "cauldron", "lending", "oracle", "registry"}
        assert {c for c, _ in got} == components
        assert got == sorted((m.component, m.version) for m in declared)
        for component in {c for c, _ in got}:
            versions = [v for c, v in got if c == component]
            assert versions == list(range(1, len(versions) + 1))
    finally:
        await store.close()
    conn = await open_writer(db)
    try:
        decoders = create_decoders()
        assert await migrate(conn, [m for d in decoders for m in d.migrations]) == []
    finally:
        await conn.close()


async def test_failed_migration_leaves_no_trace() -> None:
    conn = await open_writer(":memory:")
    try:
        good = Migration("x", 1, "ok", "CREATE TABLE x_a (v INTEGER);")
        bad = Migration(
            "x", 2, "bad", "CREATE TABLE x_b (v INTEGER);\nINSERT INTO nope VALUES (1);"
        )
        with pytest.raises(sqlite3.OperationalError):
            await migrate(conn, [good, bad])
        names = await conn.execute_fetchall("SELECT name FROM sqlite_master WHERE type='table'")
        assert {r[0] for r in names} == {"schema_migrations", "x_a"}
        versions = await conn.execute_fetchall("SELECT version FROM schema_migrations")
        assert list(versions) == [(1,)]
        assert not conn.in_transaction
    finally:
        await conn.close()
    with pytest.raises(ValueError, match="expected #2"):
        check_migrations([good, Migration("x", 3, "gap", "SELECT 1;")])


async def test_reader_is_read_only_and_sees_whole_blocks(tmp_path: Path) -> None:
    db = tmp_path / "i.sqlite"
    sc = build_chain(seed=41, n_blocks=5)
    store = await open_store(db)
    reader = await open_reader(db)
    try:
        await apply_all(store, sc.blocks[:3])
        assert list(await reader.execute_fetchall("SELECT max(height) FROM blocks")) == [(3,)]
        with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only"):
            await reader.execute("DELETE FROM blocks")
        # A read transaction keeps its snapshot while the writer commits more blocks.
        await reader.execute("BEGIN")
        before = await dump(reader)
        await apply_all(store, sc.blocks[3:])
        assert await dump(reader) == before
        await reader.execute("COMMIT")
        assert list(await reader.execute_fetchall("SELECT max(height) FROM blocks")) == [(5,)]
        assert await dump(reader) == await dump(store.conn)
    finally:
        await reader.close()
        await store.close()


class OpReturnCounter(Decoder[None, int]):
    """A decoder written outside the store: counts OP_RETURN outputs per block."""

    name = "opreturns"
    migrations: Sequence[Migration] = (
        Migration(
            "opreturns",
            1,
            "counts",
            "CREATE TABLE opreturns (height INTEGER PRIMARY KEY REFERENCES blocks(height), "
            "n INTEGER NOT NULL);",
        ),
    )
    patterns: Sequence[bytes] = (b"\x6a",)

    def __init__(self, undo: bool = True) -> None:
        self.undo = undo
        self.committed_heights: list[int] = []

    async def load(self, conn: Sql) -> None:
        rows = await conn.execute_fetchall("SELECT height FROM opreturns ORDER BY height")
        self.committed_heights = [r[0] for r in rows]

    async def prepare(
        self, conn: Sql, block: BlockContext, txs: Sequence[BlockTx]
    ) -> tuple[Sequence[BlockTx], None]:
        return txs, None

    def decode(self, tx: BlockTx, context: None) -> Sequence[int]:
        return [1 for o in tx.tx.outputs if o.locking[:1] == b"\x6a"]

    async def write(self, conn: Sql, block: BlockContext, rows: Sequence[int]) -> None:
        await conn.execute("INSERT INTO opreturns VALUES (?, ?)", (block.height, sum(rows)))

    async def undo_to(self, conn: Sql, height: int) -> None:
        if self.undo:
            await conn.execute("DELETE FROM opreturns WHERE height > ?", (height,))

    def committed(
        self, block: BlockContext, rows: Sequence[int], evicted: Collection[bytes]
    ) -> None:
        self.committed_heights.append(block.height)

    async def mempool_add(self, conn: Sql, block: BlockContext, tx: BlockTx) -> bool:
        return False

    def mempool_evict(self, txids: Collection[bytes]) -> None:
        pass

    def mempool_txids(self) -> Collection[bytes]:
        return ()


async def test_a_plugged_in_decoder_gets_blocks_and_undo() -> None:
    sc = build_chain(seed=42, n_blocks=8)
    extra = OpReturnCounter()
    snap = PoolSnapshot()
    store = await Store.open(
        ":memory:", snapshot=snap, decoders=[*create_decoders(snapshot=snap), extra]
    )
    try:
        await apply_all(store, sc.blocks)
        rows = await store.conn.execute_fetchall("SELECT height, n FROM opreturns ORDER BY height")
        want = [
            (b.height, sum(1 for r in b.records for o in r.tx.outputs if o.locking[:1] == b"\x6a"))
            for b in sc.blocks
        ]
        assert list(rows) == want
        assert extra.committed_heights == [b.height for b in sc.blocks]
        await store.undo_to(5)
        assert extra.committed_heights == [1, 2, 3, 4, 5]
        # The Cauldron tables do not notice the extra decoder.
        plain = await open_store(":memory:")
        try:
            await apply_all(plain, sc.blocks[:5])
            mine = await dump(store.conn)
            del mine["opreturns"]
            mine["schema_migrations"] = [
                r for r in mine["schema_migrations"] if r[0] != "opreturns"
            ]
            assert mine == await dump(plain.conn)
        finally:
            await plain.close()
    finally:
        await store.close()


class DeclaredOpReturns(Decoder[None, int]):
    """The same count, declared with nothing but what the base class cannot know: its table,
    selection rule, decoding and `undo_tables` (no `load`, `undo_to` or mempool methods)."""

    name = "declared"
    migrations: Sequence[Migration] = (
        Migration(
            "declared",
            1,
            "counts",
            "CREATE TABLE declared (height INTEGER PRIMARY KEY REFERENCES blocks(height), "
            "n INTEGER NOT NULL);",
        ),
    )
    patterns: Sequence[bytes] = (b"\x6a",)
    undo_tables = ("declared",)

    async def prepare(
        self, db: Writer, block: BlockContext, txs: Sequence[BlockTx]
    ) -> tuple[Sequence[BlockTx], None]:
        return txs, None

    def decode(self, tx: BlockTx, state: None) -> Sequence[int]:
        return [1 for o in tx.tx.outputs if o.locking[:1] == b"\x6a"]

    async def write(self, db: Writer, block: BlockContext, rows: Sequence[int]) -> None:
        db.submit_many((("INSERT INTO declared VALUES (?, ?)", [(block.height, sum(rows))]),))


async def test_a_declared_decoder_gets_the_base_class_undo_and_mempool() -> None:
    sc = build_chain(seed=42, n_blocks=8)
    declared, counter = DeclaredOpReturns(), OpReturnCounter()
    snap = PoolSnapshot()
    store = await Store.open(
        ":memory:", snapshot=snap, decoders=[*create_decoders(snapshot=snap), declared, counter]
    )
    try:
        await apply_all(store, sc.blocks)
        read = "SELECT height, n FROM {} ORDER BY height"
        assert await store.conn.execute_fetchall(read.format("declared")) == list(
            await store.conn.execute_fetchall(read.format("opreturns"))
        )
        await store.undo_to(5)
        assert [h for h, _ in await store.conn.execute_fetchall(read.format("declared"))] == [
            1,
            2,
            3,
            4,
            5,
        ]
        assert declared.mempool_txids() == ()
    finally:
        await store.close()


class SparseSummonCounter(OpReturnCounter):
    """The counter of OP_RETURN outputs, over the transactions holding a SUMMON marker only,
    declared `sparse`: blocks without such a transaction skip it."""

    patterns: Sequence[bytes] = (SUMMON_HEAD,)
    sparse = True


async def test_a_sparse_decoder_is_skipped_on_blocks_without_candidates() -> None:
    sc = build_chain(seed=42, n_blocks=10, actions=2)
    sparse = SparseSummonCounter()
    snap = PoolSnapshot()
    store = await Store.open(
        ":memory:", snapshot=snap, decoders=[*create_decoders(snapshot=snap), sparse]
    )
    try:
        calls: list[tuple[str, int]] = []
        prepare, write = sparse.prepare, sparse.write

        async def counted_prepare(
            conn: Sql, block: BlockContext, txs: Sequence[BlockTx]
        ) -> tuple[Sequence[BlockTx], None]:
            calls.append(("prepare", block.height))
            return await prepare(conn, block, txs)

        async def counted_write(conn: Sql, block: BlockContext, rows: Sequence[int]) -> None:
            calls.append(("write", block.height))
            await write(conn, block, rows)

        sparse.prepare = counted_prepare  # type: ignore[method-assign]
        sparse.write = counted_write  # type: ignore[method-assign]
        results = [await store.apply_block(b.height, b.raw) for b in sc.blocks]
        holding = [
            b.height for b in sc.blocks if any(SUMMON_HEAD in r.tx.to_bytes() for r in b.records)
        ]
        assert 0 < len(holding) < len(sc.blocks)  # blocks with and without candidates
        assert [r.candidates["opreturns"] > 0 for r in results] == [
            b.height in holding for b in sc.blocks
        ]
        assert sparse.committed_heights == holding
        assert calls == [(step, h) for h in holding for step in ("prepare", "write")]
        rows = await store.conn.execute_fetchall("SELECT height FROM opreturns ORDER BY height")
        assert [r[0] for r in rows] == holding
    finally:
        await store.close()


async def test_a_decoder_that_forgets_to_undo_fails_loudly() -> None:
    sc = build_chain(seed=43, n_blocks=4)
    snap = PoolSnapshot()
    lazy = OpReturnCounter(undo=False)
    store = await Store.open(
        ":memory:", snapshot=snap, decoders=[*create_decoders(snapshot=snap), lazy]
    )
    try:
        await apply_all(store, sc.blocks)
        before = await dump(store.conn)
        with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
            await store.undo_to(2)
        assert await dump(store.conn) == before  # rolled back as a whole
        tip = await store.tip()
        assert tip is not None and tip.height == 4
    finally:
        await store.close()


def test_registry_rejects_duplicates_and_unknown_names() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_decoder("cauldron", lambda deps: create_decoders(["cauldron"])[0])
    with pytest.raises(ValueError, match="unknown decoders"):
        create_decoders(["cauldron", "nope"])
    assert [d.name for d in create_decoders()] == ["cauldron", "oracle", "registry", "lending"]


def test_pool_id_round_trip_and_rejects() -> None:
    op = OutPoint(bytes(range(32)), 7)
    text = format_pool_id(op)
    assert text == bytes(range(32))[::-1].hex() + ":7"
    assert parse_pool_id(text) == op
    for bad in (
        text.upper(),
        text[1:],
        text.replace(":7", ":-1"),
        text.replace(":7", ":07"),
        text.replace(":7", ":4294967296"),
        text.replace(":7", ""),
    ):
        with pytest.raises(ValueError):
            parse_pool_id(bad)
    assert parse_pool_id(text.replace(":7", ":4294967295")).index == 0xFFFFFFFF
