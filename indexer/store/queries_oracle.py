"""Oracle reads (for `/oracle/...`): feed history, the update closest to a time, the latest price.

Ids are display hex; validation of user input is the caller's. Each feed update row is one
re-creation of the oracle UTXO; `time` is the oracle's own timestamp (the commitment's, or the
block time for layouts without one), prices are integer US cents per BCH. Metadata (price NULL)
is never returned as a price.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from indexer.store.sql import Sql

_SELECT = (
    "SELECT u.oracle_time, u.price, u.txid, b.hash, u.sequence FROM oracle_updates AS u "
    "JOIN blocks AS b ON b.height = u.height "
)


@dataclass(frozen=True, slots=True)
class FeedPoint:
    time: int
    price: int  # US cents per BCH
    txid: str
    blockhash: str
    sequence: int


def _point(r: Any) -> FeedPoint:
    return FeedPoint(int(r[0]), int(r[1]), bytes(r[2]).hex(), bytes(r[3]).hex(), int(r[4]))


async def feed_history(
    conn: Sql,
    category: str,
    start: int,
    end: int | None = None,
    stepsize: int | None = None,
) -> list[FeedPoint]:
    """Updates with start ≤ time ≤ end, oldest first (by time, sequence, then txid and vout:
    a total order). With `stepsize`, one entry per interval [start + k·step, start + (k+1)·step):
    the LAST update in it in that order (the price that stood at the interval's end);
    intervals without an update are left out. The bucketing is SQL's (one row per interval
    leaves the database), through the (category, oracle_time) index."""
    where = "WHERE u.category = ? AND u.price IS NOT NULL AND u.oracle_time >= ?"
    params: list[object] = [bytes.fromhex(category), start]
    if end is not None:
        where += " AND u.oracle_time <= ?"
        params.append(end)
    if not stepsize:
        sql = _SELECT + where + " ORDER BY u.oracle_time, u.sequence, u.txid, u.vout"
        return [_point(r) for r in await conn.execute_fetchall(sql, params)]
    sql = (
        "SELECT oracle_time, price, txid, hash, sequence FROM ("
        "SELECT u.oracle_time, u.price, u.txid, b.hash, u.sequence, "
        "(u.oracle_time - ?) / ? AS k, row_number() OVER (PARTITION BY (u.oracle_time - ?) / ? "
        "ORDER BY u.oracle_time DESC, u.sequence DESC, u.txid DESC, u.vout DESC) AS n "
        "FROM oracle_updates AS u JOIN blocks AS b ON b.height = u.height "
        f"{where}) WHERE n = 1 ORDER BY k"
    )
    rows = await conn.execute_fetchall(sql, [start, stepsize, start, stepsize, *params])
    return [_point(r) for r in rows]


async def feed_closest(conn: Sql, category: str, timestamp: int) -> FeedPoint | None:
    """The update whose time is closest to `timestamp` (a tie goes to the earlier one); None
    when the feed has no data. Two index seeks."""
    cat = bytes.fromhex(category)
    before = await conn.execute_fetchall(
        _SELECT + "WHERE u.category = ? AND u.price IS NOT NULL AND u.oracle_time <= ? "
        "ORDER BY u.oracle_time DESC, u.sequence DESC LIMIT 1",
        (cat, timestamp),
    )
    after = await conn.execute_fetchall(
        _SELECT + "WHERE u.category = ? AND u.price IS NOT NULL AND u.oracle_time > ? "
        "ORDER BY u.oracle_time, u.sequence LIMIT 1",
        (cat, timestamp),
    )
    found = [_point(r) for r in (*before, *after)]
    if not found:
        return None
    return min(found, key=lambda p: (abs(p.time - timestamp), p.time))


async def latest_price(conn: Sql, category: str) -> FeedPoint | None:
    """The current price: the update with the highest sequence (parallel UTXOs may exist)."""
    rows = await conn.execute_fetchall(
        _SELECT + "WHERE u.category = ? AND u.price IS NOT NULL ORDER BY u.sequence DESC LIMIT 1",
        (bytes.fromhex(category),),
    )
    return next((_point(r) for r in rows), None)


@dataclass(frozen=True, slots=True)
class MessageRow:
    txid: str
    vout: int
    height: int
    time: int
    pubkey: str
    status: str  # valid, invalid_signature, unknown_key
    msg_time: int
    message_sequence: int
    data_sequence: int
    price: int | None  # only for valid price messages


async def messages(conn: Sql, pubkey: str, start: int, end: int) -> list[MessageRow]:
    """Published GP messages of one key with start ≤ message time ≤ end, in time order."""
    rows = await conn.execute_fetchall(
        "SELECT txid, vout, height, time, pubkey, status, msg_time, message_sequence, "
        "data_sequence, price FROM oracle_messages WHERE pubkey = ? AND msg_time BETWEEN ? AND ? "
        "ORDER BY msg_time, message_sequence",
        (bytes.fromhex(pubkey), start, end),
    )
    return [
        MessageRow(
            txid=bytes(r[0]).hex(),
            vout=int(r[1]),
            height=int(r[2]),
            time=int(r[3]),
            pubkey=bytes(r[4]).hex(),
            status=str(r[5]),
            msg_time=int(r[6]),
            message_sequence=int(r[7]),
            data_sequence=int(r[8]),
            price=None if r[9] is None else int(r[9]),
        )
        for r in rows
    ]
