"""Prices: `/dex/price/<token>/current`, `/at/<timestamp>`, `/history`, `/candlesticks`."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from indexer.store import queries as q
from rest.cache import RawJson
from rest.candles import CANDLES, HISTORY
from rest.db import IndexVersion, Snapshot
from rest.params import DEFAULT_SERIES_SPAN, Query, parse_int, stepsize
from rest.routes.common import context, require_token, token_id
from rest.tokenlist import price_of


async def current(request: Request) -> Response:
    ctx = context(request)
    Query(request.query_params, ())
    token = await token_id(ctx, request.path_params["token"])

    async def compute(snap: Snapshot) -> Any:
        await require_token(ctx, snap, token)
        v = (await q.value_locked(snap.conn, token=token)).get(token)
        price = price_of(v.sats, v.tokens) if v is not None and v.pools else None
        return {"price": price}

    return await ctx.answer(request, ("price_current", token), compute)


async def at(request: Request) -> Response:
    ctx = context(request)
    Query(request.query_params, ())
    token = await token_id(ctx, request.path_params["token"])
    when = parse_int("timestamp", request.path_params["timestamp"])

    async def compute(snap: Snapshot) -> Any:
        await require_token(ctx, snap, token)
        t = await q.price_at(snap.conn, token, when)
        if t is None:
            return {"price": None, "timestamp": None}
        return {"price": t.price, "timestamp": t.time}

    return await ctx.answer(request, ("price_at", token, when), compute, requested_time=when)


async def _series(request: Request, kind: str) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("start", "end", "stepsize"))
    token = await token_id(ctx, request.path_params["token"])
    start, end = query.window(ctx.now(), DEFAULT_SERIES_SPAN)
    step = stepsize(query, start, end)

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


async def history(request: Request) -> Response:
    return await _series(request, HISTORY)


async def candlesticks(request: Request) -> Response:
    return await _series(request, CANDLES)


ROUTES = [
    Route("/dex/price/{token}/current", current),
    Route("/dex/price/{token}/at/{timestamp}", at),
    Route("/dex/price/{token}/history", history),
    Route("/dex/price/{token}/candlesticks", candlesticks),
]
