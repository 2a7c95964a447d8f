"""Lending: `/lending/v11/*` (the current protocol, this project's model) and `/lending/*` (the
public v1 protocol). Semantics, units and limits: docs/api-lending.md.

Everything is read from the index (`indexer.store.queries_lending`). The oracle price comes from
the data API's BCH/USD feed (`RestConfig.usd_feed`: the lending protocol's Delphi oracle on
mainnet and the scenario's feed on the devnet); the interest-rate oracle's value is the index's
`rate`-layout feed at `now` (the indexer's feed table names it), which `crankable` lets a
caller override with `rate_bp`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from indexer.store import queries_lending as ql
from protocols.lending import v1
from rest.context import ApiContext
from rest.db import Snapshot
from rest.errors import ApiError
from rest.params import Limit, Query
from rest.routes.common import context

HISTORY_LIMIT = Limit(ql.HISTORY_DEFAULT, ql.HISTORY_MAX)
STATE_LIMIT = Limit(ql.STATE_DEFAULT, ql.STATE_MAX)
LOANS_LIMIT = Limit(ql.LOANS_DEFAULT, ql.LOANS_MAX)
MAX_NFTHS = ql.NFTHS_MAX
MAX_PRICE = 0xFFFF_FFFF  # Delphi prices are u32 cents per BCH
MAX_RATE_BP = 0xFFFF  # the rate oracle's bp value is a u16
V1_KINDS = ("borrow", "repay", "redeem", "refinance", "add_collateral", "liquidation")
V11_KINDS = (*V1_KINDS, "delegate", "accrue")

_HASH = re.compile(r"^[0-9a-fA-F]{64}$")


def parse_hash(name: str, text: str) -> str:
    """A 64-hex NFT hash (either case) → lower case, else a 400 naming `name`."""
    if not _HASH.match(text):
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise ApiError.bad(name, f"must be a 64-character hex NFT hash, got {shown!r}")
    return text.lower()


def parse_nfths(text: str | None) -> tuple[str, ...]:
    """`nfth`: comma-separated 64-hex hashes, at most MAX_NFTHS; duplicates are folded."""
    if text is None:
        return ()
    parts = text.split(",")
    if len(parts) > MAX_NFTHS:
        raise ApiError.bad("nfth", f"at most {MAX_NFTHS} hashes, got {len(parts)}")
    return tuple(dict.fromkeys(parse_hash("nfth", p) for p in parts))


def _time(query: Query, name: str, default: int) -> int:
    value = query.integer(name, default=default)
    assert value is not None
    return value


def price_feed(ctx: ApiContext) -> str | None:
    """The lending price oracle's category (display hex): the API's BCH/USD feed."""
    return ctx.config.usd_feed


# --- shapes ---------------------------------------------------------------------------------


def loan(x: ql.LoanRow, version: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "txid": x.txid,
        "vout": x.vout,
        "height": x.height,
        "time": x.time,
        "borrower_hash": x.borrower_hash,
    }
    if version == "v11":
        out["delegate_hash"] = x.delegate_hash
    out |= {
        "principal": x.principal,
        "rate_bp": x.rate_bp,
        "loan_ts": x.loan_ts,
        "collateral": x.collateral,
    }
    return out


def action(a: ql.ActionOut, version: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "txid": a.txid,
        "height": a.height,
        "time": a.time,
        "mtp": a.mtp,
        "kind": a.kind,
        "borrower_hash": a.borrower_hash,
    }
    if version == "v11":
        out["delegate_hash"] = a.delegate_hash
    out |= {
        "collateral_before": a.collateral_before,
        "collateral_after": a.collateral_after,
        "principal_before": a.principal_before,
        "principal_after": a.principal_after,
        "rate_bp_before": a.rate_before,
        "rate_bp_after": a.rate_after,
        "loan_ts_before": a.loan_ts_before,
        "loan_ts_after": a.loan_ts_after,
        "interest": a.interest,
    }
    return out


def state(s: ql.StateRow) -> dict[str, Any]:
    out: dict[str, Any] = {
        "txid": s.txid,
        "vout": s.vout,
        "height": s.height,
        "time": s.time,
        "mtp": s.mtp,
        "staked": s.staked,
        "shares": s.shares,
        "share_price": s.share_price,
    }
    if s.kind == "pool":
        out["bch_pot"] = s.bch_pot
    return out


def allowance(a: ql.AllowanceRow) -> dict[str, Any]:
    return {
        "txid": a.txid,
        "vout": a.vout,
        "height": a.height,
        "time": a.time,
        "owner_hash": a.owner_hash,
        "sats": a.sats,
        "category": a.category,
        "token_amount": a.token_amount,
    }


# --- endpoints shared by both versions ------------------------------------------------------


async def _active(request: Request, version: str) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("offset", "limit"))
    offset, limit = query.offset(), query.limit(LOANS_LIMIT)

    async def compute(snap: Snapshot) -> Any:
        rows = await ql.active_loans(snap.conn, version, offset, limit)
        return [loan(x, version) for x in rows]

    return await ctx.answer(request, ("lending_active", version, offset, limit), compute)


async def _history(request: Request, version: str) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("offset", "limit", "nfth"))
    offset, limit = query.offset(), query.limit(HISTORY_LIMIT)
    nfths = parse_nfths(query.get("nfth"))

    async def compute(snap: Snapshot) -> Any:
        rows = await ql.history(snap.conn, version, offset, limit, nfths)
        return [action(a, version) for a in rows]

    return await ctx.answer(request, ("lending_history", version, offset, limit, nfths), compute)


async def _loan_history(request: Request, version: str) -> Response:
    ctx = context(request)
    Query(request.query_params, ())
    borrower = parse_hash("borrower_hash", request.path_params["borrower_hash"])

    async def compute(snap: Snapshot) -> Any:
        rows = await ql.loan_history(snap.conn, borrower, version)
        return [action(a, version) for a in rows]

    return await ctx.answer(request, ("lending_loan", version, borrower), compute)


async def _stats(request: Request, version: str) -> Response:
    ctx = context(request)
    Query(request.query_params, ())
    now, feed = ctx.now(), price_feed(ctx)

    async def compute(snap: Snapshot) -> Any:
        oracle = None if feed is None else await ql.oracle_price(snap.conn, feed, now)
        price = None if oracle is None else oracle.price
        rate = await ql.oracle_rate(snap.conn, now)
        bp = None if rate is None else rate.bp
        totals = await ql.stats(snap.conn, version, price, now, bp)
        return {
            "now": now,
            **totals,
            "oracle_time": None if oracle is None else oracle.time,
            "rate_bp": bp,
            "rate_time": None if rate is None else rate.time,
        }

    return await ctx.answer(request, ("lending_stats", version, now, feed), compute)


Endpoint = Callable[[Request], Awaitable[Response]]
Handler = Callable[[Request, str], Awaitable[Response]]


def for_version(handler: Handler, version: str) -> Endpoint:
    """One endpoint per protocol version: the v1 and v11 paths share their handlers."""

    async def endpoint(request: Request) -> Response:
        return await handler(request, version)

    endpoint.__name__ = f"{handler.__name__.lstrip('_')}_{version}"
    return endpoint


# --- v11 only -------------------------------------------------------------------------------


async def allowances(request: Request) -> Response:
    ctx = context(request)
    Query(request.query_params, ())
    owner = parse_hash("owner_hash", request.path_params["owner_hash"])

    async def compute(snap: Snapshot) -> Any:
        return [allowance(a) for a in await ql.allowances(snap.conn, owner)]

    return await ctx.answer(request, ("lending_allowances", owner), compute)


async def _states(request: Request, kind: Literal["bar", "pool"]) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("since", "limit"))
    since, limit = _time(query, "since", 0), query.limit(STATE_LIMIT)

    async def compute(snap: Snapshot) -> Any:
        return [state(s) for s in await ql.state_history(snap.conn, kind, since, limit)]

    return await ctx.answer(request, ("lending_states", kind, since, limit), compute)


async def bar_history(request: Request) -> Response:
    return await _states(request, "bar")


async def pool_history(request: Request) -> Response:
    return await _states(request, "pool")


async def staking_apr(request: Request) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("window",))
    window = query.integer("window", default=ql.APR_WINDOW_DEFAULT, minimum=1)
    assert window is not None
    now = ctx.now()

    async def compute(snap: Snapshot) -> Any:
        apr = await ql.staking_apr(snap.conn, now, window)
        return {"now": now, **apr}

    return await ctx.answer(request, ("lending_apr", now, window), compute)


async def crankable(request: Request) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("now", "price", "rate_bp"))
    given_now = query.integer("now")
    now = ctx.now() if given_now is None else given_now
    given_price = query.integer("price", minimum=1, maximum=MAX_PRICE)
    given_rate = query.integer("rate_bp", maximum=MAX_RATE_BP)
    feed = price_feed(ctx)

    async def compute(snap: Snapshot) -> Any:
        price = given_price
        if price is None and feed is not None:
            oracle = await ql.oracle_price(snap.conn, feed, now)
            price = None if oracle is None else oracle.price
        rate_bp = given_rate
        if rate_bp is None:
            rate = await ql.oracle_rate(snap.conn, now)
            rate_bp = None if rate is None else rate.bp
        rows = []
        for c in await ql.crankable(snap.conn, now, price, rate_bp):
            x = c.loan
            interest = v1.interest(x.principal, x.rate_bp, now, x.loan_ts)
            row = loan(x, "v11") | {"reason": c.reason, "interest": interest}
            rows.append(row | {"debt": x.principal + interest})
        return {"now": now, "price": price, "rate_bp": rate_bp, "loans": rows}

    key = ("lending_crankable", now, given_price, given_rate, feed)
    return await ctx.answer(request, key, compute, requested_time=given_now)


ROUTES = [
    Route("/lending/v11/allowances/{owner_hash}", allowances),
    Route("/lending/v11/bar/history", bar_history),
    Route("/lending/v11/crankable", crankable),
    Route("/lending/v11/history", for_version(_history, "v11")),
    Route("/lending/v11/loan/{borrower_hash}/history", for_version(_loan_history, "v11")),
    Route("/lending/v11/loans/active", for_version(_active, "v11")),
    Route("/lending/v11/pool/history", pool_history),
    Route("/lending/v11/staking/apr", staking_apr),
    Route("/lending/v11/stats", for_version(_stats, "v11")),
    Route("/lending/history", for_version(_history, "v1")),
    Route("/lending/loan/{borrower_hash}/history", for_version(_loan_history, "v1")),
    Route("/lending/loans/active", for_version(_active, "v1")),
    Route("/lending/stats", for_version(_stats, "v1")),
]
