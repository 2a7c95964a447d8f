"""The best tips heard of, kept in SQLite for the components in other processes (the REST
workers), which never see the indexer's tip watch.

Two tables of their own (migration `heard` #1), rewritten whole on every change of the watch
(coalesced) and at least every `HEARTBEAT` seconds:

- `heard_tips`: the recent heights heard of, each with its header hash and time and when it was
  first heard (Unix seconds);
- `heard_state` (one row): servers configured and connected, since when none is, and when the
  row was written. A row older than `DEAD_AFTER` means the indexer is not running: readers then
  count no server as connected, from the last write on.

Derived data beside the index, never part of it: written in its own short transaction, so it
never holds up a block's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import aiosqlite

from indexer.freshness import Heard
from indexer.store.db import BUSY_TIMEOUT_MS
from indexer.store.schema import Migration

log = logging.getLogger(__name__)

HEARTBEAT = 5.0  # seconds between two writes of an unchanged state
DEAD_AFTER = 3 * HEARTBEAT
MIN_INTERVAL = 0.1  # seconds between two writes: a burst of notifications is one write

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "heard",
        1,
        "best tips heard",
        """
        CREATE TABLE heard_tips (
            height   INTEGER PRIMARY KEY,
            hash     TEXT NOT NULL,     -- display hex
            time     INTEGER NOT NULL,  -- header time
            heard_at REAL NOT NULL      -- first heard, Unix seconds
        );
        CREATE TABLE heard_state (
            id            INTEGER PRIMARY KEY CHECK (id = 1),
            servers       INTEGER NOT NULL,
            connected     INTEGER NOT NULL,
            offline_since REAL,
            updated_at    REAL NOT NULL
        );
        """,
    ),
)


async def write_heard(conn: aiosqlite.Connection, heard: Heard, now: float) -> None:
    await conn.execute("BEGIN IMMEDIATE")
    try:
        await conn.execute("DELETE FROM heard_tips")
        await conn.executemany(
            "INSERT INTO heard_tips (height, hash, time, heard_at) VALUES (?, ?, ?, ?)",
            [(h, hash_, t, at) for h, (hash_, t, at) in heard.tips.items()],
        )
        await conn.execute(
            "INSERT OR REPLACE INTO heard_state "
            "(id, servers, connected, offline_since, updated_at) VALUES (1, ?, ?, ?, ?)",
            (heard.servers, heard.connected, heard.offline_since, now),
        )
        await conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(Exception):
            await conn.execute("ROLLBACK")
        raise


async def read_heard(conn: aiosqlite.Connection, now: float) -> Heard | None:
    """What the indexer last wrote; None when it never wrote (or the tables do not exist yet)."""
    try:
        state = await (
            await conn.execute(
                "SELECT servers, connected, offline_since, updated_at FROM heard_state"
            )
        ).fetchone()
        if state is None:
            return None
        rows = await conn.execute_fetchall("SELECT height, hash, time, heard_at FROM heard_tips")
    except sqlite3.OperationalError:  # an index not migrated yet
        return None
    servers, connected, offline_since, updated_at = state
    if now - updated_at > DEAD_AFTER:
        connected = 0
        offline_since = updated_at if offline_since is None else offline_since
    tips = {int(h): (str(hash_), int(t), float(at)) for h, hash_, t, at in rows}
    return Heard(tips, int(servers), int(connected), offline_since)


async def persist_heard(
    path: str | Path,
    heard: Callable[[], Heard],
    changed: asyncio.Event,
    clock: Callable[[], float] = time.time,
) -> None:
    """Write `heard()` to the index at `path` on every `changed` and every HEARTBEAT, until
    cancelled. A failed write is logged and retried at the next change or heartbeat."""
    conn = await aiosqlite.connect(str(path), isolation_level=None)
    failing = False
    try:
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(HEARTBEAT):
                    await changed.wait()
            changed.clear()
            try:
                await write_heard(conn, heard(), clock())
            except sqlite3.Error as exc:
                if not failing:
                    log.warning("writing the tips heard to %s failed: %s", path, exc)
                failing = True
            else:
                failing = False
            await asyncio.sleep(MIN_INTERVAL)
    finally:
        await conn.close()
