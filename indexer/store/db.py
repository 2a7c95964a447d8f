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

import asyncio
from collections.abc import Sequence
from pathlib import Path

import aiosqlite

from indexer.store.writer import ProcessConnection, Step

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


async def open_writer(path: str | Path) -> aiosqlite.Connection:
    """The indexer's connection, in autocommit mode: the store issues BEGIN/COMMIT itself so
    that a block's rows and the tip are always one explicit transaction. It runs in a child
    process (`indexer.store.writer`), so SQLite writes in parallel with the event loop."""
    conn = await ProcessConnection(path)
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


def _writer(conn: aiosqlite.Connection) -> ProcessConnection:
    if not isinstance(conn, ProcessConnection):
        raise TypeError("queued writes need the writer connection (open_writer)")
    return conn


def submit(conn: aiosqlite.Connection, steps: Sequence[Step]) -> None:
    """Queue `steps` (see `indexer.store.writer_child.run_steps`) on the writer and return at
    once, without waiting: the event loop decodes the next block while SQLite writes this one,
    and anything sent later on `conn` (awaited or not) runs after them. Errors surface in
    `collect`, which the store calls before COMMIT (a failed write therefore never commits:
    the store rolls the transaction back)."""
    _writer(conn).post(steps)


def submit_many(
    conn: aiosqlite.Connection, statements: Sequence[tuple[str, Sequence[Sequence[object]]]]
) -> None:
    """`submit` one `executemany` per (sql, rows) with rows, all in one request; nothing is
    queued if every statement's rows are empty (a block without rows costs nothing). Refuses
    to run outside a transaction (SQLite may have ended it on an earlier error)."""
    todo: list[Step] = [("many", sql, rows, None, "") for sql, rows in statements if rows]
    if todo:
        submit(conn, [("need_tx", "no open transaction for the submitted writes"), *todo])


async def collect(conn: aiosqlite.Connection) -> None:
    """Wait for every write `submit`ted on `conn`; raise the first one's error, if any."""
    await _writer(conn).sync()


def commit_writes(conn: aiosqlite.Connection) -> asyncio.Future[BaseException | None]:
    """Queue COMMIT, made only if every submitted write ran (see
    `ProcessConnection.commit_posted`); the future gives the error that prevented it."""
    return _writer(conn).commit_posted()


async def pace(conn: aiosqlite.Connection) -> None:
    """One event-loop turn if submitted writes wait to be handed to the writer (see
    `ProcessConnection.pace`); the store calls it after each held block."""
    await _writer(conn).pace()


def pending_writes(conn: aiosqlite.Connection) -> int:
    """How many submitted writes are not yet collected (0 after `collect`)."""
    return _writer(conn).posted
