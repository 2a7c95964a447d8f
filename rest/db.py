"""Read-only access to the index: a small pool of reader connections, consistent snapshots,
and a watcher that keeps the index tip (the version every cached answer is keyed on) in memory.

Every answer that reads the database reads it inside one read transaction (`snapshot`), which
also reads the tip: so an answer and its `X-Index-Height` always describe the same blocks, even
while the indexer commits new ones (WAL readers never block the writer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from indexer.store.db import open_reader
from rest.apy import fee_income
from rest.errors import database_unavailable, not_synced

log = logging.getLogger("rest")


@dataclass(frozen=True, slots=True)
class IndexVersion:
    """The index tip: answers computed at one version are valid until the tip changes."""

    height: int
    hash: str  # display hex
    time: int  # header time of the tip
    max_time: int  # running maximum of header times up to the tip

    @property
    def tag(self) -> str:
        return f"{self.height}.{self.hash[:12]}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    conn: aiosqlite.Connection
    tip: IndexVersion


_TIP = "SELECT height, hash, time, max_time FROM blocks ORDER BY height DESC LIMIT 1"


async def read_tip(conn: aiosqlite.Connection) -> IndexVersion | None:
    rows = list(await conn.execute_fetchall(_TIP))
    if not rows:
        return None
    h, hash_, t, mt = rows[0]
    return IndexVersion(int(h), bytes(hash_).hex(), int(t), int(mt))


class ReaderPool:
    """Up to `size` read-only connections, opened on first use (the indexer may create the
    database after the API starts) and reopened after a failure."""

    def __init__(self, path: Path | str, size: int) -> None:
        self.path = Path(path)
        self._size = size
        self._idle: list[aiosqlite.Connection] = []
        self._all: set[aiosqlite.Connection] = set()
        self._slots = asyncio.Semaphore(size)
        self._closed = False

    async def _open(self) -> aiosqlite.Connection:
        if not self.path.exists():
            raise database_unavailable(f"the index database {self.path} does not exist yet")
        try:
            conn = await open_reader(self.path)
        except (sqlite3.Error, OSError) as exc:
            raise database_unavailable(f"cannot open the index database: {exc}") from exc
        # Aggregates computed next to the data (in SQLite's thread, not the event loop).
        await conn.create_function("ladle_fee_income", 4, fee_income, deterministic=True)
        self._all.add(conn)
        return conn

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[aiosqlite.Connection]:
        if self._closed:
            raise database_unavailable("the API is shutting down")
        async with self._slots:
            conn = self._idle.pop() if self._idle else await self._open()
            healthy = True
            try:
                yield conn
            except (sqlite3.Error, ValueError) as exc:
                # ValueError: aiosqlite on a closed connection
                healthy = False
                if isinstance(exc, sqlite3.Error):
                    raise database_unavailable(f"the index database failed: {exc}") from exc
                raise
            except BaseException:
                healthy = not conn.in_transaction
                raise
            finally:
                if healthy and not self._closed:
                    self._idle.append(conn)
                else:
                    self._all.discard(conn)
                    with contextlib.suppress(Exception):
                        await conn.close()

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Snapshot]:
        """One read transaction; 503 `not_synced` while the index holds no block."""
        async with self.connection() as conn:
            await conn.execute("BEGIN")
            try:
                tip = await read_tip(conn)
                if tip is None:
                    raise not_synced("the index is empty: the indexer has not stored a block yet")
                yield Snapshot(conn, tip)
            finally:
                if conn.in_transaction:
                    await conn.execute("COMMIT")

    async def close(self) -> None:
        self._closed = True
        for conn in list(self._all):
            with contextlib.suppress(Exception):
                await conn.close()
        self._all.clear()
        self._idle.clear()


class IndexWatcher:
    """Polls the tip every `interval` seconds; `version` is the last one seen (None until the
    first successful read), `error` the last failure (None when the database answered)."""

    def __init__(self, pool: ReaderPool, interval: float) -> None:
        self.pool = pool
        self.interval = interval
        self.version: IndexVersion | None = None
        self.error: str | None = None
        self.checked_at: float | None = None  # loop time of the last check
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def current(self) -> IndexVersion | None:
        """The last tip seen; read again first when no poller keeps it fresh (an app driven
        without its lifespan, e.g. through an in-process transport)."""
        now = asyncio.get_running_loop().time()
        if not self.running and (self.checked_at is None or now - self.checked_at >= self.interval):
            return await self.refresh()
        return self.version

    async def refresh(self) -> IndexVersion | None:
        try:
            async with self.pool.connection() as conn:
                tip = await read_tip(conn)
        except Exception as exc:  # reported by /health; requests answer 503
            self.error = getattr(exc, "message", None) or str(exc)
            self.version = None
            self.checked_at = asyncio.get_running_loop().time()
            return None
        self.error = None
        self.version = tip
        self.checked_at = asyncio.get_running_loop().time()
        return tip

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="rest-index-watcher")

    async def _run(self) -> None:
        while not self._stopping.is_set():
            await self.refresh()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._stopping.wait()

    async def stop(self) -> None:
        """Let the current read finish (cancelling it would leave SQLite's worker thread
        answering a loop that may be gone), then end."""
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None
