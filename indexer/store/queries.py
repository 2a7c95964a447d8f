"""The reads the REST API needs, one indexed query each, on a reader (or the writer) connection.

Inputs and outputs use the API's forms: token ids and txids as display-order hex, pkhs as hex,
`pool_id` as `<txid>:<vout>`. Validation of user input (hex length, ranges) is the caller's;
these functions assume well-formed values. "As of time t" means as of the highest block whose
header time is ≤ t (`height_at`); header times are not monotonic, which is why the tables key
history by height and only translate times at the edge (`blocks.max_time`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from indexer.store.listing import Listing, Seek
from indexer.store.pool_id import parse_pool_id
from indexer.store.sql import Sql


@dataclass(frozen=True, slots=True)
class PoolRow:
    """A pool UTXO (live or historical state)."""

    txid: str
    vout: int
    pool_id: str
    owner_pkh: str
    token_id: str
    sats: int
    tokens: int
    height: int
    time: int


@dataclass(frozen=True, slots=True)
class TradeRow:
    """One transaction's trades of one token (see `cauldron_trades`)."""

    txid: str
    token_id: str
    height: int
    time: int
    block_hash: str
    direction: str  # "buy": the user bought tokens
    sats: int  # net sats into the pools (negative on a sell)
    tokens: int  # net tokens into the pools (negative on a buy)
    volume_sats: int
    volume_tokens: int
    lp_fee: int
    pools: int
    pools_touched: int

    @property
    def price(self) -> float:
        """Execution price, sats per token base unit."""
        return self.volume_sats / self.volume_tokens


@dataclass(frozen=True, slots=True)
class TokenRow:
    token_id: str
    height: int
    time: int
    first_pool_id: str


@dataclass(frozen=True, slots=True)
class ValueLocked:
    sats: int
    tokens: int
    pools: int


def _hex_id(b: bytes) -> str:
    return bytes(b).hex()


def _blob(display_hex: str) -> bytes:
    return bytes.fromhex(display_hex)


def _pool(r: Any) -> PoolRow:
    return PoolRow(
        _hex_id(r[0]),
        r[1],
        f"{_hex_id(r[2])}:{r[3]}",
        _hex_id(r[4]),
        _hex_id(r[5]),
        r[6],
        r[7],
        r[8],
        r[9],
    )


_POOL = "txid, vout, lineage_txid, lineage_vout, owner_pkh, category, sats, tokens, height, time"
_POOL_P = ", ".join(f"p.{c.strip()}" for c in _POOL.split(","))


async def _one(conn: Sql, sql: str, params: Iterable[object] = ()) -> Any:
    rows = list(await conn.execute_fetchall(sql, tuple(params)))
    return rows[0] if rows else None


async def index_height(conn: Sql) -> int | None:
    row = await _one(conn, "SELECT max(height) FROM blocks")
    return None if row is None else row[0]


async def height_at(conn: Sql, time: int) -> int | None:
    """The state "as of time t": the highest block such that it and every block below it have
    a header time ≤ t (header times are not monotonic; their running maximum is). None if the
    index has no such block."""
    row = await _one(
        conn,
        "SELECT height FROM blocks WHERE max_time <= ? ORDER BY max_time DESC, height DESC LIMIT 1",
        (time,),
    )
    return None if row is None else row[0]


async def active_pools(
    conn: Sql, *, token: str | None = None, pkh: str | None = None
) -> list[PoolRow]:
    """Live pools of a token and/or an owner (at least one filter; both = intersection)."""
    if token is None and pkh is None:
        raise ValueError("active_pools needs a token or a pkh")
    where, params = ["spent_height IS NULL"], list[object]()
    if token is not None:
        where.append("category = ?")
        params.append(_blob(token))
    if pkh is not None:
        where.append("owner_pkh = ?")
        params.append(_blob(pkh))
    rows = await conn.execute_fetchall(
        f"SELECT {_POOL} FROM cauldron_pools WHERE {' AND '.join(where)} "
        "ORDER BY height, position, vout",
        params,
    )
    return [_pool(r) for r in rows]


async def all_active_pools(conn: Sql) -> list[PoolRow]:
    rows = await conn.execute_fetchall(
        f"SELECT {_POOL} FROM cauldron_pools WHERE spent_height IS NULL "
        "ORDER BY category, height, position, vout"
    )
    return [_pool(r) for r in rows]


async def pool_history(conn: Sql, pool_id: str, start: int | None = None) -> list[PoolRow]:
    """Every state of a lineage in chain order (from time `start` if given); [] if unknown."""
    lineage = parse_pool_id(pool_id)
    rows = await conn.execute_fetchall(
        f"SELECT {_POOL} FROM cauldron_pools WHERE lineage_txid = ? AND lineage_vout = ? "
        "AND time >= ? ORDER BY height, position, vout",
        (lineage.txid[::-1], lineage.index, start if start is not None else -(1 << 62)),
    )
    return [_pool(r) for r in rows]


async def contract_counts(conn: Sql, token: str | None = None) -> tuple[int, int]:
    """(active pools, ended lineages = withdraws), overall or for one token."""
    if token is None:
        active = await _one(conn, "SELECT count(*) FROM cauldron_pools WHERE spent_height IS NULL")
        ended = await _one(conn, "SELECT count(*) FROM cauldron_events WHERE kind = 'withdraw'")
    else:
        cat = _blob(token)
        active = await _one(
            conn,
            "SELECT count(*) FROM cauldron_pools WHERE spent_height IS NULL AND category = ?",
            (cat,),
        )
        ended = await _one(
            conn,
            "SELECT count(*) FROM cauldron_events WHERE kind = 'withdraw' AND category = ?",
            (cat,),
        )
    return int(active[0]), int(ended[0])


async def tokens(conn: Sql) -> list[TokenRow]:
    rows = await conn.execute_fetchall(
        "SELECT category, height, time, first_pool_txid, first_pool_vout FROM cauldron_tokens "
        "ORDER BY height, position, out_index"
    )
    return [TokenRow(_hex_id(r[0]), r[1], r[2], f"{_hex_id(r[3])}:{r[4]}") for r in rows]


async def first_pool(conn: Sql, token: str) -> PoolRow | None:
    """The first UTXO of the token's first pool lineage."""
    row = await _one(
        conn,
        f"SELECT {_POOL_P} FROM cauldron_tokens t "
        "JOIN cauldron_pools p ON p.lineage_txid = t.first_pool_txid "
        "AND p.lineage_vout = t.first_pool_vout WHERE t.category = ? "
        "ORDER BY p.height, p.position, p.vout LIMIT 1",
        (_blob(token),),
    )
    return None if row is None else _pool(row)


async def value_locked(
    conn: Sql, *, token: str | None = None, height: int | None = None
) -> dict[str, ValueLocked]:
    """Per token: sats, tokens and pool count locked as of `height` (default: the tip)."""
    at = (1 << 62) if height is None else height
    where, params = "", list[object]([at])
    if token is not None:
        where = "WHERE k.category = ?"
        params.append(_blob(token))
    rows = await conn.execute_fetchall(
        "SELECT k.category, v.sats, v.tokens, v.pools FROM cauldron_tokens k "
        "CROSS JOIN cauldron_tvl v ON v.category = k.category AND v.height = ("
        "SELECT max(height) FROM cauldron_tvl WHERE category = k.category AND height <= ?) "
        f"{where}",
        params,
    )
    return {_hex_id(r[0]): ValueLocked(r[1], r[2], r[3]) for r in rows}


_TRADE = (
    "t.txid, t.category, t.height, t.time, b.hash, t.direction, t.sats, t.tokens, "
    "t.volume_sats, t.volume_tokens, t.lp_fee, t.pools, t.pools_touched"
)


def _trade(r: Any) -> TradeRow:
    return TradeRow(_hex_id(r[0]), _hex_id(r[1]), r[2], r[3], _hex_id(r[4]), *r[5:])


def trades_listing(token: str | None = None) -> Listing:
    """The trade feed (a token's, or every token's), newest first: by height, then position in
    the block, then token (a transaction trading two tokens has a row for each)."""
    columns, descending = ("height", "position", "category"), (True, True, False)
    if token is None:
        return Listing("cauldron_trades", columns, descending)
    return Listing("cauldron_trades", columns, descending, "category = ?", (_blob(token),))


async def latest_trades(
    conn: Sql,
    limit: int,
    offset: int = 0,
    token: str | None = None,
    start: Seek | None = None,
) -> list[TradeRow]:
    """The page of `trades_listing(token)` at `offset` (or where `start` puts it). The page's
    keys come from an index alone (`cauldron_trades_height`, or the token's), then the columns
    of just those rows."""
    start = start or Seek("", [], offset)
    if start.empty:
        return []
    listing = trades_listing(token)
    rows = await conn.execute_fetchall(
        f"SELECT {_TRADE} FROM (SELECT txid, category FROM cauldron_trades "
        f"{listing.filtered(start.where)} ORDER BY {listing.order()} LIMIT ? OFFSET ?) AS page "
        "JOIN cauldron_trades t USING (txid, category) JOIN blocks b ON b.height = t.height "
        "ORDER BY t.height DESC, t.position DESC, t.category",
        [*listing.params, *start.params, limit, start.offset],
    )
    return [_trade(r) for r in rows]


async def trades_between(conn: Sql, token: str, start: int, end: int) -> list[TradeRow]:
    """A token's trades with start ≤ time ≤ end, in time order (ties in chain order): the
    input of price history and candlesticks."""
    rows = await conn.execute_fetchall(
        f"SELECT {_TRADE} FROM cauldron_trades t JOIN blocks b ON b.height = t.height "
        "WHERE t.category = ? AND t.time BETWEEN ? AND ? ORDER BY t.time, t.height, t.position",
        (_blob(token), start, end),
    )
    return [_trade(r) for r in rows]


async def price_at(conn: Sql, token: str, time: int) -> TradeRow | None:
    """The token's last trade at or before `time` (its `price` is the execution price)."""
    row = await _one(
        conn,
        f"SELECT {_TRADE} FROM cauldron_trades t JOIN blocks b ON b.height = t.height "
        "WHERE t.category = ? AND t.time <= ? ORDER BY t.time DESC, t.height DESC, "
        "t.position DESC LIMIT 1",
        (_blob(token), time),
    )
    return None if row is None else _trade(row)


async def volume(conn: Sql, start: int, end: int, token: str | None = None) -> tuple[int, int, int]:
    """(volume in sats, volume in tokens, trade count) for start ≤ time ≤ end. The token
    volume is only meaningful per token."""
    if token is None:
        row = await _one(
            conn,
            "SELECT coalesce(sum(volume_sats), 0), coalesce(sum(volume_tokens), 0), count(*) "
            "FROM cauldron_trades WHERE time BETWEEN ? AND ?",
            (start, end),
        )
    else:
        row = await _one(
            conn,
            "SELECT coalesce(sum(volume_sats), 0), coalesce(sum(volume_tokens), 0), count(*) "
            "FROM cauldron_trades WHERE category = ? AND time BETWEEN ? AND ?",
            (_blob(token), start, end),
        )
    return int(row[0]), int(row[1]), int(row[2])


async def volume_by_token(conn: Sql, start: int, end: int) -> dict[str, tuple[int, int, int]]:
    rows = await conn.execute_fetchall(
        "SELECT category, sum(volume_sats), sum(volume_tokens), count(*) FROM cauldron_trades "
        "WHERE time BETWEEN ? AND ? GROUP BY category",
        (start, end),
    )
    return {_hex_id(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in rows}


async def unique_addresses(conn: Sql) -> list[tuple[str, int]]:
    """[(month "YYYY-MM", distinct trader pkhs that month)], oldest first."""
    rows = await conn.execute_fetchall(
        "SELECT month, count(*) FROM cauldron_trader_months GROUP BY month ORDER BY month"
    )
    return [(str(r[0]), int(r[1])) for r in rows]
