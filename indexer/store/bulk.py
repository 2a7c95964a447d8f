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

The store can also queue the rebuild (`restore_steps`) inside a held batch of blocks, so the
writer builds the indexes while the event loop decodes the last blocks below the tip; the
batch's transaction makes the rebuild, like every write, all or nothing.
"""

from __future__ import annotations

from indexer.store.sql import Sql

_TABLE = "CREATE TABLE IF NOT EXISTS deferred_indexes (name TEXT PRIMARY KEY, sql TEXT NOT NULL)"
_SECONDARY = (
    "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql LIKE 'CREATE INDEX %' "
    "AND name NOT IN (SELECT name FROM deferred_indexes) ORDER BY name"
)


async def deferred(conn: Sql) -> list[str]:
    """Names of the indexes deferred now."""
    return [name for name, _ in await definitions(conn)]


async def definitions(conn: Sql) -> list[tuple[str, str]]:
    """(name, CREATE statement) of every index deferred now."""
    await conn.execute(_TABLE)
    rows = await conn.execute_fetchall("SELECT name, sql FROM deferred_indexes ORDER BY name")
    return [(str(r[0]), str(r[1])) for r in rows]


def restore_steps(defs: list[tuple[str, str]]) -> list[tuple[str, str, tuple[object, ...]]]:
    """The writer steps that build `defs` again and forget them (`indexer.store.db.submit`),
    for a transaction that is open."""
    return [*(("exec", sql, ()) for _, sql in defs), ("exec", "DELETE FROM deferred_indexes", ())]


async def defer(conn: Sql) -> int:
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


async def restore(conn: Sql) -> int:
    """Create every deferred index again, in one transaction; how many."""
    defs = await definitions(conn)
    if defs:
        await _atomically(conn, [(sql, params) for _, sql, params in restore_steps(defs)])
    return len(defs)


async def _atomically(conn: Sql, statements: list[tuple[str, tuple[object, ...]]]) -> None:
    await conn.execute("BEGIN IMMEDIATE")
    try:
        for sql, params in statements:
            await conn.execute(sql, params)
        await conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            await conn.execute("ROLLBACK")
        raise
