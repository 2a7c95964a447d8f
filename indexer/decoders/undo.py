"""Undo for decoders whose rows are plain chain data: every row carries the height of the block
that wrote it, so removing the blocks above a height is one DELETE per table (no state to
restore). In-memory state is rebuilt by the store's `load` afterwards."""

from __future__ import annotations

from collections.abc import Sequence

import aiosqlite


async def delete_above(conn: aiosqlite.Connection, height: int, tables: Sequence[str]) -> None:
    """Delete the rows of blocks above `height` from `tables` (in the order given: children
    before the rows they reference)."""
    for table in tables:
        await conn.execute(f"DELETE FROM {table} WHERE height > ?", (height,))
