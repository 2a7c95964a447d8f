"""Lending reads (for `/lending/v11/...` and the earlier `/lending/...`).

Hashes are hex (borrower/owner NFT hashes, txids display order). Every row carries `txid`,
`height` and `time`; bar/pool rows and actions also `mtp`. Parameter limits follow the issue
(history: default 50, max 200; bar/pool history: default 100, max 1000; active loans, like the
pool lists: default 1,000, max 10,000); out-of-range values raise ValueError, which the REST
layer turns into a 400.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from indexer.store.listing import Listing, Seek
from indexer.store.sql import Sql
from protocols.lending import v1, v11

HISTORY_DEFAULT, HISTORY_MAX = 50, 200
STATE_DEFAULT, STATE_MAX = 100, 1000
LOANS_DEFAULT, LOANS_MAX = 1_000, 10_000
APR_WINDOW_DEFAULT = 604_800
NFTHS_MAX = 100  # hashes one history request may filter on
RATIO_BUCKETS = ("<120", "120-150", "150-200", "200-300", ">=300")  # collateral ratio, percent
_BOUNDS = (120, 150, 200, 300)


def _check_limit(limit: int, most: int) -> None:
    if not 1 <= limit <= most:
        raise ValueError(f"limit must be between 1 and {most}")


def _hex(b: Any) -> str | None:
    return None if b is None else bytes(b).hex()


def _hash(text: str) -> bytes:
    """A 64-hex NFT hash → its 32 bytes (ValueError otherwise)."""
    if len(text) != 64:
        raise ValueError(f"an NFT hash is 64 hex characters: {text!r}")
    return bytes.fromhex(text)


@dataclass(frozen=True, slots=True)
class LoanRow:
    txid: str
    vout: int
    version: str
    borrower_hash: str
    delegate_hash: str | None
    principal: int  # cents
    rate_bp: int
    loan_ts: int
    collateral: int  # sats
    height: int
    time: int

    def as_v11(self) -> v11.LoanV11:
        delegate = bytes.fromhex(self.delegate_hash) if self.delegate_hash else v11.NO_DELEGATE
        return v11.LoanV11(
            bytes.fromhex(self.borrower_hash), delegate, self.principal, self.rate_bp, self.loan_ts
        )


_LOAN = (
    "SELECT txid, vout, version, borrower_hash, delegate_hash, principal, rate_bp, loan_ts, "
    "collateral, height, time FROM lending_loans "
)


def _loan(r: Any) -> LoanRow:
    return LoanRow(
        bytes(r[0]).hex(), int(r[1]), str(r[2]), bytes(r[3]).hex(), _hex(r[4]),
        *(int(x) for x in r[5:11]),
    )  # fmt: skip


async def active_loans(
    conn: Sql, version: str, offset: int = 0, limit: int | None = None
) -> list[LoanRow]:
    """The version's live loans in chain order (height, position, vout: stable for paging);
    `limit` None: all of them (what the totals need)."""
    if limit is not None:
        _check_limit(limit, LOANS_MAX)
    if offset < 0:
        raise ValueError("offset cannot be negative")
    order = "ORDER BY height, position, vout"
    # The page's keys from the covering `lending_loans_live` alone, then their columns.
    rows = await conn.execute_fetchall(
        f"{_LOAN}JOIN (SELECT txid, vout FROM lending_loans WHERE version = ? AND spent_height "
        f"IS NULL {order} LIMIT ? OFFSET ?) AS page USING (txid, vout) {order}",
        (version, -1 if limit is None else limit, offset),
    )
    return [_loan(r) for r in rows]


@dataclass(frozen=True, slots=True)
class ActionOut:
    txid: str
    height: int
    time: int
    mtp: int
    kind: str
    version: str
    borrower_hash: str
    delegate_hash: str | None
    collateral_before: int | None
    collateral_after: int | None
    principal_before: int | None
    principal_after: int | None
    rate_before: int | None
    rate_after: int | None
    loan_ts_before: int | None
    loan_ts_after: int | None
    interest: int | None


_ACTION = (
    "SELECT txid, height, time, mtp, kind, version, borrower_hash, delegate_hash, "
    "collateral_before, collateral_after, principal_before, principal_after, rate_before, "
    "rate_after, loan_ts_before, loan_ts_after, interest FROM lending_actions "
)


def _opt(x: Any) -> int | None:
    return None if x is None else int(x)


def _action(r: Any) -> ActionOut:
    return ActionOut(
        bytes(r[0]).hex(), int(r[1]), int(r[2]), int(r[3]), str(r[4]), str(r[5]),
        bytes(r[6]).hex(), _hex(r[7]), *(_opt(x) for x in r[8:17]),
    )  # fmt: skip


def history_listing(version: str) -> Listing:
    """A version's loan actions, newest first: by height, position in the block, then the
    action's number in its transaction (all descending)."""
    return Listing(
        "lending_actions", ("height", "position", "seq"), (True, True, True), "version = ?",
        (version,),
    )  # fmt: skip


async def history(
    conn: Sql,
    version: str,
    offset: int = 0,
    limit: int = HISTORY_DEFAULT,
    nfths: Sequence[str] | None = None,
    start: Seek | None = None,
) -> list[ActionOut]:
    """The page of `history_listing(version)` at `offset` (or where `start` puts it; not
    with `nfths`); `nfths`: only these borrower hashes (64-hex each)."""
    _check_limit(limit, HISTORY_MAX)
    if offset < 0:
        raise ValueError("offset cannot be negative")
    start = start or Seek("", [], offset)
    if start.empty:
        return []
    listing = history_listing(version)
    params: list[object] = [*listing.params, *start.params]
    where = listing.filtered(start.where)
    if nfths:
        if len(nfths) > NFTHS_MAX:
            raise ValueError(f"at most {NFTHS_MAX} NFT hashes")
        where += f" AND borrower_hash IN ({','.join('?' * len(nfths))})"
        params += [_hash(h) for h in nfths]
    order = f"ORDER BY {listing.order()}"
    # The page's keys first, from the (version, height, position, seq) index alone, then the
    # columns of just those rows: a deep OFFSET skips index entries, not whole table rows.
    sql = (
        f"{_ACTION}JOIN (SELECT txid, seq FROM lending_actions {where} {order} LIMIT ? OFFSET ?)"
        f" AS page USING (txid, seq) {order}"
    )
    rows = await conn.execute_fetchall(sql, [*params, limit, start.offset])
    return [_action(r) for r in rows]


async def loan_history(
    conn: Sql, borrower_hash: str, version: str | None = None
) -> list[ActionOut]:
    """One borrower's actions in ascending time (block order)."""
    sql = _ACTION + "WHERE borrower_hash = ?"
    params: list[object] = [_hash(borrower_hash)]
    if version is not None:
        sql += " AND version = ?"
        params.append(version)
    rows = await conn.execute_fetchall(sql + " ORDER BY height, position, seq", params)
    return [_action(r) for r in rows]


@dataclass(frozen=True, slots=True)
class AllowanceRow:
    txid: str
    vout: int
    owner_hash: str
    sats: int
    category: str | None
    token_amount: int
    height: int
    time: int


async def allowances(conn: Sql, owner_hash: str) -> list[AllowanceRow]:
    """Unspent outputs payable to the owner NFT hash."""
    rows = await conn.execute_fetchall(
        "SELECT txid, vout, owner_hash, sats, category, token_amount, height, time "
        "FROM lending_allowances WHERE owner_hash = ? AND spent_height IS NULL "
        "ORDER BY height, position, vout",
        (_hash(owner_hash),),
    )
    return [
        AllowanceRow(
            bytes(r[0]).hex(),
            int(r[1]),
            bytes(r[2]).hex(),
            int(r[3]),
            _hex(r[4]),
            *(int(x) for x in r[5:8]),
        )
        for r in rows
    ]


@dataclass(frozen=True, slots=True)
class StateRow:
    txid: str
    vout: int
    kind: str
    height: int
    time: int
    mtp: int
    staked: int
    shares: int
    bch_pot: int

    @property
    def share_price(self) -> float | None:
        return v11.share_price(self.staked, self.shares)


_STATE = "SELECT txid, vout, kind, height, time, mtp, staked, shares, bch_pot FROM lending_states "


def _state(r: Any) -> StateRow:
    return StateRow(bytes(r[0]).hex(), int(r[1]), str(r[2]), *(int(x) for x in r[3:9]))


async def state_history(
    conn: Sql,
    kind: Literal["bar", "pool"],
    since: int = 0,
    limit: int = STATE_DEFAULT,
) -> list[StateRow]:
    """Bar or pool states newest first with `mtp > since`."""
    _check_limit(limit, STATE_MAX)
    rows = await conn.execute_fetchall(
        _STATE + "WHERE kind = ? AND mtp > ? ORDER BY mtp DESC, height DESC, position DESC LIMIT ?",
        (kind, since, limit),
    )
    return [_state(r) for r in rows]


async def _state_at(conn: Sql, kind: str, mtp: int) -> StateRow | None:
    rows = await conn.execute_fetchall(
        _STATE + "WHERE kind = ? AND mtp <= ? ORDER BY mtp DESC, height DESC, position DESC "
        "LIMIT 1",
        (kind, mtp),
    )
    return next((_state(r) for r in rows), None)


async def staking_apr(conn: Sql, now: int, window: int = APR_WINDOW_DEFAULT) -> dict[str, Any]:
    """Annualised growth of the bar's and the pool's share price over [now − window, now]
    (by mtp), gross of exit fees; the pool's excludes its BCH pot. A figure is None without
    coverage: no state at or before the window's start."""
    if window <= 0:
        raise ValueError("window must be positive")
    out: dict[str, Any] = {"window": window, "excludes_bch_pot": True}
    for kind in ("bar", "pool"):
        first = await _state_at(conn, kind, now - window)
        last = await _state_at(conn, kind, now)
        p0 = None if first is None else first.share_price
        p1 = None if last is None else last.share_price
        out[kind] = None if p0 is None or p1 is None else v11.annualised_growth(p0, p1, window)
    return out


@dataclass(frozen=True, slots=True)
class Crankable:
    loan: LoanRow
    reason: str  # liquidate, redeem, accrue


async def crankable(conn: Sql, now: int, price: int | None, rate_bp: int | None) -> list[Crankable]:
    """Active v11 loans a keeper may legally process at `now` (at this oracle price and rate)
    and whose collateral can fund the keeper's fee, with the reason for each."""
    out = []
    for loan in await active_loans(conn, "v11"):
        reason = v11.crank_reason(loan.as_v11(), loan.collateral, now, price, rate_bp)
        if reason is not None and v11.can_fund_fee(loan.collateral):
            out.append(Crankable(loan, reason))
    return out


def ratio_bucket(collateral: int, price: int, owed: int) -> str:
    """The collateral ratio's bucket: `collateral × price / 1e8` cents against `owed` cents,
    compared exactly (no rounding), each bucket including its lower bound."""
    value = 100 * collateral * price  # × 1e8 × percent
    for bound, key in zip(_BOUNDS, RATIO_BUCKETS, strict=False):
        if value < bound * v1.SATS_PER_BCH * owed:
            return key
    return RATIO_BUCKETS[-1]


async def stats(
    conn: Sql,
    version: str,
    price: int | None,
    now: int,
    rate_bp: int | None = None,
) -> dict[str, Any]:
    """Totals of the active loans: count, collateral (sats), principal and debt (principal plus
    the interest owed at `now`, cents), the principal-weighted average rate (bp), how many
    loans fall in each collateral-ratio bucket at the oracle `price` (None without a price) and
    how many the interest-rate oracle's `rate_bp` makes redeemable (None without a rate)."""
    loans = await active_loans(conn, version)
    owed = [x.principal + v1.interest(x.principal, x.rate_bp, now, x.loan_ts) for x in loans]
    principal = sum(x.principal for x in loans)
    weighted = sum(x.principal * x.rate_bp for x in loans)
    buckets: dict[str, int] | None = None
    if price:
        buckets = dict.fromkeys(RATIO_BUCKETS, 0)
        for x, debt in zip(loans, owed, strict=True):
            buckets[ratio_bucket(x.collateral, price, debt)] += 1
    return {
        "loans": len(loans),
        "collateral": sum(x.collateral for x in loans),
        "principal": principal,
        "debt": sum(owed),
        "average_rate": None if not principal else weighted / principal,
        "oracle_price": price,
        "collateral_ratio": buckets,
        "redeemable": None if rate_bp is None else sum(x.rate_bp <= rate_bp for x in loans),
    }


@dataclass(frozen=True, slots=True)
class OraclePrice:
    price: int  # US cents per BCH
    time: int  # the oracle's own timestamp
    sequence: int


async def oracle_price(conn: Sql, category: str, now: int) -> OraclePrice | None:
    """The price a feed (display-hex category) stood at `now`: of its price updates
    timestamped at or before `now`, the one with the highest sequence (parallel oracle UTXOs
    may exist; the highest sequence is the current one). None without such an update."""
    rows = await conn.execute_fetchall(
        "SELECT price, oracle_time, sequence FROM oracle_updates WHERE category = ? "
        "AND price IS NOT NULL AND oracle_time <= ? ORDER BY sequence DESC, oracle_time DESC "
        "LIMIT 1",
        (bytes.fromhex(category), now),
    )
    return next((OraclePrice(int(r[0]), int(r[1]), int(r[2])) for r in rows), None)


@dataclass(frozen=True, slots=True)
class OracleRate:
    bp: int  # the interest-rate oracle's bp value
    time: int  # the update's own timestamp
    category: str  # the rate feed (display hex)


async def oracle_rate(conn: Sql, now: int, category: str | None = None) -> OracleRate | None:
    """The interest-rate oracle's value at `now`: the latest update timestamped at or before
    `now` of the feed `category`, or (None) of any feed the indexer was configured to decode
    with the `rate` layout — a deployment has one rate oracle, and the indexer's feed table
    says which it is. Ties (one timestamp, two updates) go to the later block position. None
    without such an update."""
    sql = "SELECT price, oracle_time, category FROM oracle_updates WHERE layout = 'rate' "
    params: list[object] = []
    if category is not None:
        sql += "AND category = ? "
        params.append(bytes.fromhex(category))
    sql += (
        "AND price IS NOT NULL AND oracle_time <= ? "
        "ORDER BY oracle_time DESC, height DESC, position DESC, vout DESC LIMIT 1"
    )
    rows = await conn.execute_fetchall(sql, [*params, now])
    return next((OracleRate(int(r[0]), int(r[1]), bytes(r[2]).hex()) for r in rows), None)
