"""The mempool overlay: the live pool snapshot's unconfirmed part, kept in SQLite for readers in
other processes (the data API), which never see the indexer's memory.

Two tables of their own (migration `mempool` #1), rewritten whole by the store after every
change of the mempool's effect on the pools (a mempool transaction applied or evicted, a block
applied, a reorg, a restart):

- `mempool_pools`: one row per outpoint — `kind = 'spent'` for a confirmed live pool an
  unconfirmed transaction spends (`spent_by` that transaction), `kind = 'created'` for a pool
  an unconfirmed transaction created or continued that is still live (not spent by a later one),
  with its fields; `seq` is the arrival order.
- `mempool_state` (one row): `revision`, +1 at every rewrite (readers key caches and ETags on
  it), and the confirmed tip (`height`, `hash`) the overlay was computed against.

The overlay is derived, best-effort data beside the index, never part of it: it is written in
its own transaction after a block's COMMIT (never inside one), so a crash or a reorg can leave it
stale but never touches a confirmed row. A reader applies it only while its base tip is the
index tip it reads (between a block's COMMIT and the rewrite that follows, it reads the
confirmed pools alone), and the store rewrites it when it opens (a stale overlay of a previous
run is replaced by an empty one, as the mempool is re-read from the node).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from indexer.snapshot import LivePool, PoolSnapshot
from indexer.store.schema import Migration
from indexer.store.sql import Sql

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "mempool",
        1,
        "mempool overlay",
        """
        CREATE TABLE mempool_state (
            id        INTEGER PRIMARY KEY CHECK (id = 1),
            revision  INTEGER NOT NULL,        -- +1 at every rewrite of the overlay
            height    INTEGER,                 -- the confirmed tip it applies to (NULL: none)
            hash      BLOB                     -- that tip's block hash, display order
        );
        INSERT INTO mempool_state (id, revision, height, hash) VALUES (1, 0, NULL, NULL);
        -- No reference to blocks: the overlay is not part of the index, and a reorg must be
        -- able to remove blocks under a stale overlay.
        CREATE TABLE mempool_pools (
            txid          BLOB NOT NULL,       -- the outpoint, display order
            vout          INTEGER NOT NULL,
            kind          TEXT NOT NULL CHECK (kind IN ('spent', 'created')),
            seq           INTEGER NOT NULL,    -- arrival order of the transaction
            spent_by      BLOB,                -- spent: the unconfirmed spender, display order
            lineage_txid  BLOB,                -- created: the pool's fields (as cauldron_pools)
            lineage_vout  INTEGER,
            owner_pkh     BLOB,
            category      BLOB,
            sats          INTEGER,
            tokens        INTEGER,
            PRIMARY KEY (txid, vout)
        ) WITHOUT ROWID;
        """,
    ),
)

TABLES = ("mempool_pools", "mempool_state")

_INSERT = (
    "INSERT INTO mempool_pools (txid, vout, kind, seq, spent_by, lineage_txid, lineage_vout, "
    "owner_pkh, category, sats, tokens) VALUES (?,?,?,?,?,?,?,?,?,?,?)"
)


def overlay_rows(snapshot: PoolSnapshot) -> list[tuple[object, ...]]:
    """The snapshot's unconfirmed part as `mempool_pools` rows: confirmed pools the pending
    transactions spend, and the pools they created that are still live."""
    rows: list[tuple[object, ...]] = []
    for seq, ptx in enumerate(snapshot.pending()):
        spender = ptx.txid[::-1]
        for op in ptx.spent:
            if snapshot.is_confirmed_pool(op):
                rows.append((op.txid[::-1], op.index, "spent", seq, spender, *(None,) * 6))
        for p in ptx.created:
            if snapshot.pool(p.outpoint) == p:
                rows.append(_created(p, seq))
    return rows


def _created(p: LivePool, seq: int) -> tuple[object, ...]:
    return (
        *(p.outpoint.txid[::-1], p.outpoint.index, "created", seq, None),
        *(p.lineage.txid[::-1], p.lineage.index, p.owner_pkh),
        *(bytes.fromhex(p.token_id), p.sats, p.tokens),
    )


async def write_overlay(
    conn: Sql,
    rows: Sequence[tuple[object, ...]],
    height: int | None,
    block_hash: bytes | None,
) -> None:
    """Replace the overlay with `rows`, computed against the tip (`height`, wire-order
    `block_hash`), in one transaction of its own (the connection must have none open)."""
    await conn.execute("BEGIN IMMEDIATE")
    try:
        await conn.execute("DELETE FROM mempool_pools")
        if rows:
            await conn.executemany(_INSERT, rows)
        await conn.execute(
            "UPDATE mempool_state SET revision = revision + 1, height = ?, hash = ? WHERE id = 1",
            (height, None if block_hash is None else block_hash[::-1]),
        )
        await conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            await conn.execute("ROLLBACK")
        raise


@dataclass(frozen=True, slots=True)
class OverlayState:
    revision: int
    height: int | None
    hash: str | None  # display hex


async def overlay_state(conn: Sql) -> OverlayState | None:
    """The overlay's revision and base tip; None when the database has no overlay (an index
    written before migration `mempool` #1)."""
    try:
        rows = list(await conn.execute_fetchall("SELECT revision, height, hash FROM mempool_state"))
    except sqlite3.OperationalError:  # no such table
        return None
    if not rows:
        return None
    rev, height, hash_ = rows[0]
    return OverlayState(
        int(rev), None if height is None else int(height), None if hash_ is None else hash_.hex()
    )
