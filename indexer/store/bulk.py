"""Secondary indexes deferred during a long initial sync.

Every row a decoder writes also goes into each secondary index of its table (the event table has
five), at random places for most of them, and each COMMIT rewrites every page it touched. Far
below the server's tip nobody reads the index yet, so the follower drops the secondary indexes
(`defer`) and builds them again, each in one sorted pass, when it reaches the tip (`restore`):
the writer's work during the sync drops by a fifth to a quarter, and building an index at
the end costs less than keeping it on the way.

Only plain `CREATE INDEX` indexes go: primary keys and UNIQUE constraints, which keep rows from
being counted twice, stay. Their definitions are kept in `deferred_indexes` in the same
transaction as the DROPs, so a crash at any moment leaves either all of them in place or all of
them recorded, and `restore` (at the tip, or when the store opens with migrations to apply)
recreates them exactly as the migrations wrote them. While indexes are deferred the index is
complete and correct; only queries that would use them (the data API's, a reorg's undo) are
slower.
"""

from __future__ import annotations

import aiosqlite

_TABLE = "CREATE TABLE IF NOT EXISTS deferred_indexes (name TEXT PRIMARY KEY, sql TEXT NOT NULL)"
_SECONDARY = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql LIKE 'CREATE INDEX %' "
    "AND name NOT IN (SELECT name FROM deferred_indexes) ORDER BY name"
)


async def deferred(conn: aiosqlite.Connection) -> list[str]:
    """Names of the indexes deferred now."""
    await conn.execute(_TABLE)
    return [str(r[0]) for r in await conn.execute_fetchall("SELECT name FROM deferred_indexes")]


async def defer(conn: aiosqlite.Connection) -> int:
    """Drop every secondary index, keeping its definition; how many. No transaction may be
    open (the store commits its held blocks first)."""
    await conn.execute(_TABLE)
    rows = list(await conn.execute_fetchall(_SECONDARY))
    statements: list[tuple[str, tuple[object, ...]]] = []
    for name, sql in rows:
        statements.append(("INSERT INTO deferred_indexes VALUES (?, ?)", (name, sql)))
        statements.append((f'DROP INDEX "{name}"', ()))
    await _atomically(conn, statements)
    return len(rows)


async def restore(conn: aiosqlite.Connection) -> int:
    """Create every deferred index again, in one transaction; how many."""
    await conn.execute(_TABLE)
    rows = list(await conn.execute_fetchall("SELECT name, sql FROM deferred_indexes"))
    if rows:
        statements = [(str(sql), ()) for _, sql in rows]
        await _atomically(conn, [*statements, ("DELETE FROM deferred_indexes", ())])
    return len(rows)


async def _atomically(
    conn: aiosqlite.Connection, statements: list[tuple[str, tuple[object, ...]]]
) -> None:
    await conn.execute("BEGIN IMMEDIATE")
    try:
        for sql, params in statements:
            await conn.execute(sql, params)
        await conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            await conn.execute("ROLLBACK")
        raise
