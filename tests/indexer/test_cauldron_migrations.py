"""Cauldron migrations #4 (the `kind`/`via` checks as OR chains) and #5 (pool UTXOs and events
keyed in chain order): an index written under #3 or #4 comes through with every row and the same
schema as a fresh index; the checks still reject what the old ones rejected, and the new keys
refuse a second row for the same place in the chain. Expected rows come from a fresh index of
the same scenario chain."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from indexer.decoders import create_decoders
from indexer.decoders.cauldron.schema import MIGRATIONS
from indexer.snapshot import PoolSnapshot
from indexer.store import CORE_MIGRATIONS, Store, migrate
from indexer.store.db import open_writer
from indexer.store.sql import Sql
from tests.indexer.test_store_scenario import apply_all, build_chain, dump

VIA = ("summon", "known_owner", "withdraw_recreate", "continuation", "discovered")
KINDS = (
    "create", "buy", "sell", "deposit", "unchanged", "drain", "withdraw", "discover", "invalidated"
)  # fmt: skip


async def schema(conn: Sql) -> list[tuple[str, str, str]]:
    rows = await conn.execute_fetchall(
        "SELECT type, name, sql FROM sqlite_master "
        "WHERE (name = 'blocks' OR name LIKE 'cauldron%') AND sql IS NOT NULL ORDER BY name"
    )
    return [(str(r[0]), str(r[1]), " ".join(str(r[2]).split())) for r in rows]


async def open_cauldron(path: Path) -> Store:
    snapshot = PoolSnapshot()
    return await Store.open(
        path, snapshot=snapshot, decoders=create_decoders(["cauldron"], snapshot=snapshot)
    )


# What an index written under each earlier migration looks like (checked before it opens).
OLD_SHAPES = {
    3: ("cauldron_pools", "via IN"),
    4: ("cauldron_events", "PRIMARY KEY (txid, seq)"),
}


@pytest.mark.parametrize("version", sorted(OLD_SHAPES))
async def test_an_older_index_keeps_every_row_and_gets_the_fresh_schema(
    tmp_path: Path, version: int
) -> None:
    sc = build_chain(seed=7, n_blocks=14, actions=10)
    fresh = await open_cauldron(tmp_path / "fresh.sqlite")
    try:
        await apply_all(fresh, sc.blocks)
        want = await dump(fresh.conn)
        want_schema = await schema(fresh.conn)
    finally:
        await fresh.close()
    tables = [t for t in want if t == "blocks" or t.startswith("cauldron")]
    assert want["cauldron_events"] and want["cauldron_pools"]
    assert {r[5] for r in want["cauldron_events"]} >= {"create", "buy", "sell"}

    old = tmp_path / "old.sqlite"
    conn = await open_writer(old)
    try:
        await migrate(conn, [*CORE_MIGRATIONS, *MIGRATIONS[:version]])
        await conn.execute("BEGIN IMMEDIATE")
        for table in tables:
            rows = want[table]
            if rows:
                marks = ",".join("?" * len(rows[0]))
                await conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        await conn.execute("COMMIT")
        table, shape = OLD_SHAPES[version]
        assert shape in " ".join(str(r[0]) for r in await conn.execute_fetchall(
            "SELECT sql FROM sqlite_master WHERE name = ?", (table,)
        ))  # fmt: skip
    finally:
        await conn.close()

    store = await open_cauldron(old)
    try:
        got = await dump(store.conn, tables)
        for table in tables:
            assert got[table] == want[table], table
        assert await schema(store.conn) == want_schema
        versions = await store.conn.execute_fetchall(
            "SELECT max(version) FROM schema_migrations WHERE component = 'cauldron'"
        )
        assert next(iter(versions))[0] == len(MIGRATIONS) >= 5
    finally:
        await store.close()


async def test_the_checks_accept_exactly_the_listed_values(tmp_path: Path) -> None:
    store = await open_cauldron(tmp_path / "i.sqlite")
    await store.close()
    db = sqlite3.connect(tmp_path / "i.sqlite", isolation_level=None)
    try:
        db.execute("BEGIN")
        db.execute("INSERT INTO blocks VALUES (1, ?, ?, 0, 0, 1, ?)", (b"h", b"p", bytes(80)))
        # (txid, position): every row at a place of its own in block 1
        pool = "INSERT INTO cauldron_pools VALUES (?,0,?,0,?,?,1,1,1,0,?,?,NULL,NULL,NULL,NULL)"
        event = (
            "INSERT INTO cauldron_events VALUES "
            "(?,0,1,0,?,?,?,0,?,?,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,1)"
        )
        for i, via in enumerate(VIA):
            db.execute(pool, (bytes([i]), b"l", b"o", b"c", i, via))
        for i, kind in enumerate(KINDS):
            db.execute(event, (bytes([i]), i, kind, b"l", b"o", b"c"))
        for j, bad in enumerate(("", "Summon", "summon ", "trade", "buy")):
            with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
                db.execute(pool, (b"x" + bad.encode(), b"l", b"o", b"c", 100 + j, bad))
        for j, bad in enumerate(("", "Buy", "trade", "summon", "created")):
            with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
                db.execute(event, (b"x" + bad.encode(), 100 + j, bad, b"l", b"o", b"c"))
        # The keys: one row per place in the chain, whatever its txid says.
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            db.execute(pool, (b"another txid", b"l", b"o", b"c", 0, "summon"))
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
            db.execute(event, (b"another txid", 0, "buy", b"l", b"o", b"c"))
        db.execute("ROLLBACK")
    finally:
        db.close()
