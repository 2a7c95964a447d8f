"""Prices: `/dex/price/<token>/current`, `/at/<timestamp>`, `/history`, `/candlesticks`."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from indexer.store import queries as q
from rest import endpoints as e
from rest.cache import RawJson
from rest.candles import CANDLES, HISTORY
from rest.db import IndexVersion, Snapshot
from rest.routes.common import context, require_token, token_id
from rest.tokenlist import price_of


async def current(request: Request, args: e.TokenArgs) -> Response:
    ctx = context(request)
    token = await token_id(ctx, args.token)

    async def compute(snap: Snapshot) -> Any:
        await require_token(ctx, snap, token)
        v = (await q.value_locked(snap.conn, token=token)).get(token)
        price = price_of(v.sats, v.tokens) if v is not None and v.pools else None
        return {"price": price}

    return await ctx.answer(request, ("price_current", token), compute)


async def at(request: Request, args: e.PriceAtArgs) -> Response:
    ctx = context(request)
    token = await token_id(ctx, args.token)
    when = args.timestamp

    async def compute(snap: Snapshot) -> Any:
        await require_token(ctx, snap, token)
        t = await q.price_at(snap.conn, token, when)
        if t is None:
            return {"price": None, "timestamp": None}
        return {"price": t.price, "timestamp": t.time}

    return await ctx.answer(request, ("price_at", token, when), compute, requested_time=when)


async def _series(request: Request, args: e.SeriesArgs, kind: str) -> Response:
    ctx = context(request)
    token = await token_id(ctx, args.token)
    start, end = e.window(args.start, args.end, ctx.now(), e.DEFAULT_SERIES_SPAN)
    step = args.stepsize

    async def compute(snap: Snapshot) -> Any:
        await require_token(ctx, snap, token)
        return await ctx.candles.render(snap.conn, snap.tip, token, start, end, step, kind)

    def from_memory(tip: IndexVersion) -> RawJson | None:
        """The same answer when the token list and the token's series are both at `tip`."""
        if not ctx.tokens.known(tip, token):
            return None  # not at `tip` (None), or unknown: the snapshot path answers 404
        return ctx.candles.render_ready(tip, token, start, end, step, kind)

    key = (kind, token, start, end, step)
    return await ctx.answer(request, key, compute, requested_time=end, from_memory=from_memory)


async def history(request: Request, args: e.SeriesArgs) -> Response:
    return await _series(request, args, HISTORY)


async def candlesticks(request: Request, args: e.SeriesArgs) -> Response:
    return await _series(request, args, CANDLES)


ROUTES = [
    e.PRICE_CURRENT.route(current),
    e.PRICE_AT.route(at),
    e.PRICE_HISTORY.route(history),
    e.CANDLESTICKS.route(candlesticks),
]
