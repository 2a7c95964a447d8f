"""Lending: `/lending/v11/*` (the current protocol, this project's model) and `/lending/*` (the
public v1 protocol). Semantics, units and limits: docs/api-lending.md.

Everything is read from the index (`indexer.store.queries_lending`). The oracle price comes from
the data API's BCH/USD feed (`RestConfig.usd_feed`: the lending protocol's Delphi oracle on
mainnet and the scenario's feed on the devnet); the interest-rate oracle's value is the index's
`rate`-layout feed at `now` (the indexer's feed table names it), which `crankable` lets a
caller override with `rate_bp`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import orjson
from starlette.requests import Request
from starlette.responses import Response

from indexer.store import queries_lending as ql
from protocols.lending import v1
from rest import endpoints as e
from rest.cache import RawJson, json_array
from rest.context import ApiContext
from rest.db import IndexVersion, Snapshot
from rest.declare import Args, NoArgs
from rest.held import Held
from rest.routes.common import context


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


async def _active(request: Request, args: e.LendingPageArgs, version: str) -> Response:
    ctx = context(request)
    offset, limit = args.offset, args.limit
    name = ("lending_active", version)  # every live loan, held per tip

    async def compute(snap: Snapshot) -> Any:
        held = ctx.held.get(name, snap.tip)
        if held is None:
            rows = await ql.active_loans(snap.conn, version)
            held = ctx.held.put(name, Held(snap.tip, rows, lambda x: loan(x, version)))
        return RawJson(json_array(held.page(offset, limit)))

    def from_memory(tip: IndexVersion) -> RawJson | None:
        held = ctx.held.get(name, tip)
        return None if held is None else RawJson(json_array(held.page(offset, limit)))

    key = ("lending_active", version, offset, limit)
    return await ctx.answer(request, key, compute, from_memory=from_memory)


async def _history(request: Request, args: e.LendingHistoryArgs, version: str) -> Response:
    ctx = context(request)
    offset, limit = args.offset, args.limit
    nfths = e.hex_list(args.nfth)
    key = ("lending_history", version, offset, limit, nfths)
    if nfths:  # a borrower's actions are few: their index finds them

        async def borrowers(snap: Snapshot) -> Any:
            rows = await ql.history(snap.conn, version, offset, limit, nfths)
            return [action(a, version) for a in rows]

        return await ctx.answer(request, key, borrowers)
    listing = ql.history_listing(version)

    async def compute(snap: Snapshot) -> Any:
        start = await ctx.anchors.seek(snap.conn, snap.tip, listing, offset)
        rows = await ql.history(snap.conn, version, offset, limit, None, start)
        page = [orjson.dumps(action(a, version)) for a in rows]
        ctx.anchors.keep(snap.tip, listing, offset, page)
        return RawJson(json_array(page))

    def from_memory(tip: IndexVersion) -> RawJson | None:
        page = ctx.anchors.ready(tip, listing, offset, limit)
        return None if page is None else RawJson(json_array(page))

    return await ctx.answer(request, key, compute, from_memory=from_memory)


async def _loan_history(request: Request, args: e.BorrowerArgs, version: str) -> Response:
    ctx = context(request)
    borrower = args.borrower_hash.lower()

    async def compute(snap: Snapshot) -> Any:
        rows = await ql.loan_history(snap.conn, borrower, version)
        return [action(a, version) for a in rows]

    return await ctx.answer(request, ("lending_loan", version, borrower), compute)


async def _stats(request: Request, args: NoArgs, version: str) -> Response:
    ctx = context(request)
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


A = TypeVar("A", bound=Args)


def for_version(
    handler: Callable[[Request, A, str], Awaitable[Response]], version: str
) -> Callable[[Request, A], Awaitable[Response]]:
    """One handler per protocol version: the v1 and v11 paths share their handlers."""

    async def endpoint(request: Request, args: A) -> Response:
        return await handler(request, args, version)

    endpoint.__name__ = f"{handler.__name__.lstrip('_')}_{version}"
    return endpoint


# --- v11 only -------------------------------------------------------------------------------


async def allowances(request: Request, args: e.OwnerArgs) -> Response:
    ctx = context(request)
    owner = args.owner_hash.lower()

    async def compute(snap: Snapshot) -> Any:
        return [allowance(a) for a in await ql.allowances(snap.conn, owner)]

    return await ctx.answer(request, ("lending_allowances", owner), compute)


async def _states(request: Request, args: e.StatesArgs, kind: Literal["bar", "pool"]) -> Response:
    ctx = context(request)
    since, limit = args.since, args.limit

    async def compute(snap: Snapshot) -> Any:
        return [state(s) for s in await ql.state_history(snap.conn, kind, since, limit)]

    return await ctx.answer(request, ("lending_states", kind, since, limit), compute)


async def bar_history(request: Request, args: e.StatesArgs) -> Response:
    return await _states(request, args, "bar")


async def pool_history(request: Request, args: e.StatesArgs) -> Response:
    return await _states(request, args, "pool")


async def staking_apr(request: Request, args: e.AprArgs) -> Response:
    ctx = context(request)
    window = args.window
    now = ctx.now()

    async def compute(snap: Snapshot) -> Any:
        apr = await ql.staking_apr(snap.conn, now, window)
        return {"now": now, **apr}

    return await ctx.answer(request, ("lending_apr", now, window), compute)


async def crankable(request: Request, args: e.CrankableArgs) -> Response:
    ctx = context(request)
    given_now = args.now
    now = ctx.now() if given_now is None else given_now
    given_price, given_rate = args.price, args.rate_bp
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
    e.LENDING_ALLOWANCES.route(allowances),
    e.LENDING_BAR_HISTORY.route(bar_history),
    e.LENDING_CRANKABLE.route(crankable),
    e.LENDING_HISTORY.route(for_version(_history, "v11")),
    e.LENDING_LOAN.route(for_version(_loan_history, "v11")),
    e.LENDING_ACTIVE.route(for_version(_active, "v11")),
    e.LENDING_POOL_HISTORY.route(pool_history),
    e.LENDING_APR.route(staking_apr),
    e.LENDING_STATS.route(for_version(_stats, "v11")),
    e.LENDING_V1_HISTORY.route(for_version(_history, "v1")),
    e.LENDING_V1_LOAN.route(for_version(_loan_history, "v1")),
    e.LENDING_V1_ACTIVE.route(for_version(_active, "v1")),
    e.LENDING_V1_STATS.route(for_version(_stats, "v1")),
]
