"""Numbered schema migrations, per component (the core store and each decoder).

Each component owns an ordered list of migrations; `migrate` applies the ones a database has not
seen yet, each in its own transaction together with its `schema_migrations` row, so a crash in
the middle of an upgrade leaves the database at the previous version, never half-migrated.
Migrations are append-only: never edit one that has shipped, add the next number instead.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from indexer.store.sql import Sql


@dataclass(frozen=True, slots=True)
class Migration:
    component: str  # "core", or a decoder's name
    version: int  # 1, 2, 3 … within the component
    name: str
    sql: str  # one or more statements; no BEGIN/COMMIT (migrate wraps them)


_BOOKKEEPING = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    component TEXT NOT NULL,
    version   INTEGER NOT NULL,
    name      TEXT NOT NULL,
    PRIMARY KEY (component, version)
) WITHOUT ROWID;
"""

# The chain of applied blocks. The highest row is the stored tip; it is written in the same
# transaction as every row the block produced, which is what makes apply/undo crash-safe.
CORE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "core",
        1,
        "blocks",
        """
        CREATE TABLE blocks (
            height    INTEGER PRIMARY KEY,
            hash      BLOB NOT NULL UNIQUE,      -- display order
            prev_hash BLOB NOT NULL,             -- display order
            time      INTEGER NOT NULL,          -- header time, Unix seconds
            max_time  INTEGER NOT NULL,          -- max(time) of this block and all below it
            tx_count  INTEGER NOT NULL,
            header    BLOB NOT NULL              -- the 80 header bytes
        );
        -- Header times are not monotonic; their running maximum is, so "as of time t" is a
        -- binary search: the highest block whose max_time <= t.
        CREATE INDEX blocks_max_time ON blocks(max_time, height);
        """,
    ),
)


def check_migrations(migrations: Iterable[Migration]) -> None:
    """Versions of each component must be 1, 2, 3 … in order (a typo must not skip one)."""
    expected: dict[str, int] = {}
    for m in migrations:
        want = expected.get(m.component, 0) + 1
        if m.version != want:
            raise ValueError(f"migration {m.component} #{m.version} ({m.name}): expected #{want}")
        expected[m.component] = want


async def applied_versions(conn: Sql) -> dict[str, int]:
    """Highest applied version per component."""
    await conn.executescript(_BOOKKEEPING)
    rows = await conn.execute_fetchall(
        "SELECT component, max(version) FROM schema_migrations GROUP BY component"
    )
    return {str(r[0]): int(r[1]) for r in rows}


async def migrate(conn: Sql, migrations: Iterable[Migration]) -> list[Migration]:
    """Apply every migration not yet recorded, in order; return the ones applied.

    The connection must be in autocommit mode (isolation_level=None): each migration runs in
    its own explicit transaction.
    """
    todo = list(migrations)
    check_migrations(todo)
    done = await applied_versions(conn)
    applied: list[Migration] = []
    for m in todo:
        if m.version <= done.get(m.component, 0):
            continue
        await conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _split(m.sql):
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_migrations(component, version, name) VALUES (?, ?, ?)",
                (m.component, m.version, m.name),
            )
        except BaseException:
            await conn.execute("ROLLBACK")
            raise
        await conn.execute("COMMIT")
        applied.append(m)
    return applied


def _split(sql: str) -> list[str]:
    """Split a migration into complete statements (sqlite3's own parser decides where one ends,
    so semicolons inside literals or trigger bodies are safe)."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            out.append(buf.strip())
            buf = ""
    leftover = [ln for ln in buf.splitlines() if ln.strip() and not ln.strip().startswith("--")]
    if leftover:
        raise ValueError(f"incomplete SQL statement in migration: {buf.strip()[:60]!r}")
    return out
