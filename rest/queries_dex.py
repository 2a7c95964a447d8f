"""Reads the data API needs beyond `indexer.store.queries`: each one indexed (see
docs/index-schema.md's table of indexes), taking and returning the API's forms (display-order
hex ids, integers)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

from indexer.store.queries import PoolRow, TokenRow

_POOL = "txid, vout, lineage_txid, lineage_vout, owner_pkh, category, sats, tokens, height, time"


def _pool(r: Any) -> PoolRow:
    return PoolRow(
        bytes(r[0]).hex(),
        r[1],
        f"{bytes(r[2]).hex()}:{r[3]}",
        bytes(r[4]).hex(),
        bytes(r[5]).hex(),
        r[6],
        r[7],
        r[8],
        r[9],
    )


async def _one(conn: aiosqlite.Connection, sql: str, params: Sequence[object] = ()) -> Any:
    rows = list(await conn.execute_fetchall(sql, tuple(params)))
    return rows[0] if rows else None


async def token(conn: aiosqlite.Connection, token_id: str) -> TokenRow | None:
    """The token's row in `cauldron_tokens` (None: the index never saw a pool of it)."""
    r = await _one(
        conn,
        "SELECT category, height, time, first_pool_txid, first_pool_vout FROM cauldron_tokens "
        "WHERE category = ?",
        (bytes.fromhex(token_id),),
    )
    if r is None:
        return None
    return TokenRow(bytes(r[0]).hex(), r[1], r[2], f"{bytes(r[3]).hex()}:{r[4]}")


async def lineage_known(conn: aiosqlite.Connection, pool_id: str) -> bool:
    txid, vout = pool_id.split(":")
    r = await _one(
        conn,
        "SELECT 1 FROM cauldron_pools WHERE lineage_txid = ? AND lineage_vout = ? LIMIT 1",
        (bytes.fromhex(txid), int(vout)),
    )
    return r is not None


async def trade_count(conn: aiosqlite.Connection, token_id: str | None = None) -> int:
    """Rows of `cauldron_trades` (a transaction's buys or sells of one token)."""
    if token_id is None:
        r = await _one(conn, "SELECT count(*) FROM cauldron_trades")
    else:
        r = await _one(
            conn,
            "SELECT count(*) FROM cauldron_trades WHERE category = ?",
            (bytes.fromhex(token_id),),
        )
    return int(r[0])


# --- trades as price points ----------------------------------------------------------------------

# (time, height, position, volume_sats, volume_tokens): enough for OHLC, volume and counts.
TradePoint = tuple[int, int, int, int, int]


async def trade_points_between(
    conn: aiosqlite.Connection, token_id: str, start: int, end: int
) -> list[TradePoint]:
    rows = await conn.execute_fetchall(
        "SELECT time, height, position, volume_sats, volume_tokens FROM cauldron_trades "
        "WHERE category = ? AND time BETWEEN ? AND ?",
        (bytes.fromhex(token_id), start, end),
    )
    return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]


async def trade_points_in_ranges(
    conn: aiosqlite.Connection, token_id: str, ranges: Sequence[tuple[int, int]]
) -> list[TradePoint]:
    """Trades with a <= time <= b for any (a, b) of `ranges`, in one round trip."""
    if not ranges:
        return []
    one = (
        "SELECT time, height, position, volume_sats, volume_tokens FROM cauldron_trades "
        "WHERE category = ? AND time BETWEEN ? AND ?"
    )
    cat = bytes.fromhex(token_id)
    params: list[object] = []
    for a, b in ranges:
        params += [cat, a, b]
    rows = await conn.execute_fetchall(" UNION ALL ".join([one] * len(ranges)), params)
    return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]


async def trade_points_page(
    conn: aiosqlite.Connection,
    token_id: str,
    after: tuple[int, int],
    upto: int,
    limit: int,
) -> list[TradePoint]:
    """Up to `limit` trades after (height, position) `after` and at or below height `upto`, in
    chain order (`cauldron_trades_category_height`): a series is read page by page."""
    rows = await conn.execute_fetchall(
        "SELECT time, height, position, volume_sats, volume_tokens FROM cauldron_trades "
        "WHERE category = ? AND (height, position) > (?, ?) AND height <= ? "
        "ORDER BY height, position LIMIT ?",
        (bytes.fromhex(token_id), after[0], after[1], upto, limit),
    )
    return [(r[0], r[1], r[2], r[3], r[4]) for r in rows]


async def block_hash(conn: aiosqlite.Connection, height: int) -> str | None:
    r = await _one(conn, "SELECT hash FROM blocks WHERE height = ?", (height,))
    return None if r is None else bytes(r[0]).hex()


# --- APY inputs ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """A token's value locked changed to `sats` at `time` (the block's running max time)."""

    category: str
    time: int
    sats: int


async def tvl_steps(
    conn: aiosqlite.Connection, above: int, upto: int, token_id: str | None = None
) -> list[Step]:
    """Changes of value locked in blocks above < height <= upto, in height order."""
    if token_id is None:
        rows = await conn.execute_fetchall(
            "SELECT v.category, b.max_time, v.sats FROM cauldron_tvl v "
            "JOIN blocks b ON b.height = v.height WHERE v.height > ? AND v.height <= ? "
            "ORDER BY v.height",
            (above, upto),
        )
    else:
        rows = await conn.execute_fetchall(
            "SELECT v.category, b.max_time, v.sats FROM cauldron_tvl v "
            "JOIN blocks b ON b.height = v.height "
            "WHERE v.category = ? AND v.height > ? AND v.height <= ? ORDER BY v.height",
            (bytes.fromhex(token_id), above, upto),
        )
    return [Step(bytes(r[0]).hex(), r[1], r[2]) for r in rows]


@dataclass(frozen=True, slots=True)
class EventRow:
    category: str
    lineage: str
    kind: str
    max_time: int  # of the event's block
    height: int
    sats_before: int | None
    tokens_before: int | None
    sats_after: int | None
    tokens_after: int | None


_EVENT = (
    "e.category, e.lineage_txid, e.lineage_vout, e.kind, b.max_time, e.height, "
    "e.sats_before, e.tokens_before, e.sats_after, e.tokens_after"
)


def _event(r: Any) -> EventRow:
    return EventRow(bytes(r[0]).hex(), f"{bytes(r[1]).hex()}:{r[2]}", *r[3:])


async def _min_block_time(conn: aiosqlite.Connection, above: int, upto: int) -> int | None:
    r = await _one(
        conn, "SELECT min(time) FROM blocks WHERE height > ? AND height <= ?", (above, upto)
    )
    return None if r is None or r[0] is None else int(r[0])


async def window_activity(
    conn: aiosqlite.Connection, above: int, upto: int, token_id: str | None = None
) -> dict[str, tuple[float, int]]:
    """Per token, over the blocks above < height <= upto: (LP income, lineages born).

    Income is Σ (√(k_after / k_before) − 1) · sats_before over the buys and sells
    (`ladle_fee_income`, registered on reader connections); births count creations and
    discoveries. One pass: the events' states are not in any index, so every row read is a
    table lookup, the cost that dominates on a large index."""
    select = (
        "SELECT e.category, sum(CASE WHEN e.kind IN ('buy', 'sell') THEN ladle_fee_income("
        "e.sats_before, e.tokens_before, e.sats_after, e.tokens_after) END), "
        "sum(e.kind IN ('create', 'discover')) FROM cauldron_events e "
    )
    kinds = "e.kind IN ('buy', 'sell', 'create', 'discover')"
    if token_id is None:
        rows = await conn.execute_fetchall(
            f"{select} WHERE e.height > ? AND e.height <= ? AND {kinds} GROUP BY e.category",
            (above, upto),
        )
    else:
        # Through (category, time): header times are not monotonic, so bound the time range by
        # the earliest header time among those blocks, then keep exactly the heights asked for.
        lowest = await _min_block_time(conn, above, upto)
        if lowest is None:
            return {}
        rows = await conn.execute_fetchall(
            f"{select} WHERE e.category = ? AND e.time >= ? AND e.height > ? AND e.height <= ? "
            f"AND {kinds} GROUP BY e.category",
            (bytes.fromhex(token_id), lowest, above, upto),
        )
    return {bytes(r[0]).hex(): (float(r[1] or 0.0), int(r[2])) for r in rows}


async def owner_events(
    conn: aiosqlite.Connection, pkh: str, upto: int, end: int, token_id: str | None = None
) -> list[EventRow]:
    """Every event of an owner's pools up to height `upto` (whose header times are all <= end,
    as `upto` = height_at(end)), in chain order."""
    where, params = "", [bytes.fromhex(pkh), end, upto]
    if token_id is not None:
        where = " AND e.category = ?"
        params.append(bytes.fromhex(token_id))
    rows = await conn.execute_fetchall(
        f"SELECT {_EVENT} FROM cauldron_events e JOIN blocks b ON b.height = e.height "
        f"WHERE e.owner_pkh = ? AND e.time <= ? AND e.height <= ?{where} "
        "ORDER BY e.height, e.position, e.seq",
        params,
    )
    return [_event(r) for r in rows]
