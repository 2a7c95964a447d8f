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
rather than every few; `journal_size_limit` truncates the WAL file after a checkpoint.

Foreign keys are on: every height column references `blocks(height)`, so a decoder that forgets
to undo its rows makes a reorg fail loudly instead of leaving orphans behind.
"""

from __future__ import annotations

import asyncio
import sqlite3
import weakref
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

import aiosqlite

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5_000

WRITER_PRAGMAS: tuple[str, ...] = (
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
    f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
    "PRAGMA temp_store = MEMORY",
    "PRAGMA cache_size = -65536",  # 64 MiB
    "PRAGMA wal_autocheckpoint = 10000",
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
    that a block's rows and the tip are always one explicit transaction."""
    conn = await aiosqlite.connect(str(path), isolation_level=None)
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


async def run_sync(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run `fn(raw)` on the connection's own SQLite thread with its plain `sqlite3` connection.

    One thread hop for any number of statements: aiosqlite hops once per `execute`, and a block
    costs a dozen of them, each a wake-up of both threads. `fn` runs inside whatever
    transaction is open on `conn` and must not commit or roll back itself.
    """
    # aiosqlite has no public hook for this: `_execute` queues a call for its thread.
    raw: sqlite3.Connection = conn._conn
    execute = cast(Callable[..., Awaitable[T]], conn._execute)
    return await execute(fn, raw)


# Writes queued with `submit` and not yet collected, per connection.
_queued: weakref.WeakKeyDictionary[aiosqlite.Connection, list[asyncio.Future[Any]]] = (
    weakref.WeakKeyDictionary()
)


def submit(conn: aiosqlite.Connection, fn: Callable[[sqlite3.Connection], None]) -> None:
    """Queue `fn(raw)` on the connection's SQLite thread and return at once, without waiting.

    aiosqlite's thread runs its queue in order, so anything queued later on `conn` (awaited or
    not) runs after `fn`: the event loop can decode the next block while SQLite writes this
    one. Errors surface in `collect`, which the store calls before COMMIT (a failed write
    therefore never commits: the store rolls the transaction back). Relies on aiosqlite's
    private queue (`_tx`, items `(future, function)`), as `run_sync` relies on `_execute`.
    """
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    conn._tx.put_nowait((future, partial(fn, conn._conn)))
    _queued.setdefault(conn, []).append(future)


def submit_many(
    conn: aiosqlite.Connection, statements: Sequence[tuple[str, Sequence[Sequence[object]]]]
) -> None:
    """`submit` one `executemany` per (sql, rows) with rows, all in one queued call; nothing is
    queued if every statement's rows are empty (a block without rows costs no thread hop).
    Refuses to run outside a transaction (SQLite may have ended it on an earlier error)."""
    todo = [(sql, rows) for sql, rows in statements if rows]
    if not todo:
        return

    def run(raw: sqlite3.Connection) -> None:
        if not raw.in_transaction:
            raise sqlite3.OperationalError("no open transaction for the submitted writes")
        for sql, rows in todo:
            raw.executemany(sql, rows)

    submit(conn, run)


async def collect(conn: aiosqlite.Connection) -> None:
    """Wait for every write `submit`ted on `conn`; raise the first one's error, if any."""
    futures = _queued.pop(conn, [])
    error: BaseException | None = None
    for future in futures:
        try:
            await future
        except Exception as exc:  # every future is awaited, so none is left unretrieved
            error = error or exc
    if error is not None:
        raise error


def pending_writes(conn: aiosqlite.Connection) -> int:
    """How many submitted writes are not yet collected (0 after `collect`)."""
    return len(_queued.get(conn, ()))
