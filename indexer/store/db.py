"""SQLite connections: one writer (the indexer) and any number of read-only readers (REST).

Durability choice: WAL with `synchronous=NORMAL`. In WAL mode a transaction is atomic and, once
COMMIT returns, survives the *process* being killed at any instant (kill -9): the commit is in
the WAL file, which the next open replays. What NORMAL gives up is only the fsync per commit,
so an OS crash or power cut may lose the last few committed blocks — the database is still
consistent, just at an earlier tip, and the follower re-applies from that tip. The index is
derived data that can always be re-fetched from the chain, so a few re-applied blocks are far
cheaper than an fsync per block during initial sync. (`FULL` is a one-word change in
`WRITER_PRAGMAS` if the store ever holds data that cannot be re-derived.)

Checkpoints: `wal_autocheckpoint` is raised from SQLite's 1,000 pages to 10,000 (40 MB with 4 KiB
pages), so the initial sync copies the WAL back into the database every few hundred blocks
rather than every few; `journal_size_limit` truncates the WAL file after a checkpoint. While a
long initial sync runs with its indexes deferred, the store raises it to 100,000 pages (400 MB)
until the walk ends (`BULK_WAL_AUTOCHECKPOINT`): the rebuilt indexes then reach the database
file at the first checkpoint after the sync, not in the COMMIT that the walk waits for at the
tip, and pages rewritten by several batches are copied once.

Foreign keys are on: every height column references `blocks(height)`, so a decoder that forgets
to undo its rows makes a reorg fail loudly instead of leaving orphans behind.
"""

from __future__ import annotations

from pathlib import Path

import aiosqlite

from indexer.store.writer import Writer

BUSY_TIMEOUT_MS = 5_000
WAL_AUTOCHECKPOINT = 10_000  # pages
BULK_WAL_AUTOCHECKPOINT = 100_000  # pages, while a bulk run of the initial sync lasts

WRITER_PRAGMAS: tuple[str, ...] = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA temp_store = MEMORY",
    "PRAGMA cache_size = -65536",  # 64 MiB
    f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}",
    f"PRAGMA journal_size_limit = {64 * 1024 * 1024}",
)

READER_PRAGMAS: tuple[str, ...] = (
    "PRAGMA query_only = ON",
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA temp_store = MEMORY",
    "PRAGMA cache_size = -16384",  # 16 MiB per reader
)


async def open_writer(path: str | Path) -> Writer:
    """The indexer's connection, in autocommit mode: the store issues BEGIN/COMMIT itself so
    that a block's rows and the tip are always one explicit transaction. It runs in a child
    process (`indexer.store.writer`), so SQLite writes in parallel with the event loop."""
    conn = await Writer(path)
    try:
        for pragma in WRITER_PRAGMAS:
            await conn.execute(pragma)
    except BaseException:
        await conn.close()
        raise
    return conn


async def open_reader(path: str | Path) -> aiosqlite.Connection:
    """A read-only connection for the REST process (`mode=ro`, `query_only`).

    It sees each committed block atomically (WAL snapshot isolation per read transaction) and
    never blocks the writer. The database must already exist (the indexer creates it).
    """
    uri = f"{Path(path).resolve().as_uri()}?mode=ro"
    conn = await aiosqlite.connect(uri, uri=True, isolation_level=None)
    try:
        for pragma in READER_PRAGMAS:
            await conn.execute(pragma)
    except BaseException:
        await conn.close()
        raise
    return conn
