"""Pools: `/tokenpool/*`, `/dex/pool/*`, `/dex/contract/count`, `/dex/token/<t>/first_pool`."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from indexer.store import queries as q
from rest import queries_dex as qd
from rest import shapes
from rest.apy_index import combine, owner_apy, token_apys
from rest.db import Snapshot
from rest.errors import ApiError
from rest.params import (
    DEFAULT_SERIES_SPAN,
    MIN_APY_WINDOW,
    POOLS_LIMIT,
    Query,
    parse_pkh,
    parse_pool_id,
)
from rest.routes.common import context, require_token, token_id


async def pool_active(request: Request) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("token", "pkh", "user"))
    token_text, pkh_text, user_text = query.get("token"), query.get("pkh"), query.get("user")
    # The specification's description calls the owner filter `user` too: the same filter.
    if pkh_text is not None and user_text is not None:
        raise ApiError.bad("user", "the same filter as pkh: give one of them")
    owner_name, owner_text = ("user", user_text) if user_text is not None else ("pkh", pkh_text)
    if token_text is None and owner_text is None:
        raise ApiError(
            400, "missing_parameter", "token or pkh (user): give at least one", parameter="token"
        )
    token = None if token_text is None else await token_id(ctx, token_text)
    pkh = None if owner_text is None else parse_pkh(owner_name, owner_text)
    prefix = ctx.config.address_prefix

    async def compute(snap: Snapshot) -> Any:
        if token is not None:
            await require_token(ctx, snap, token)
        rows = await q.active_pools(snap.conn, token=token, pkh=pkh)
        return {"active": [shapes.pool(p, prefix) for p in rows]}

    return await ctx.answer(request, ("pool_active", token, pkh), compute)


async def pools(request: Request) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("limit", "offset"))
    limit, offset = query.limit(POOLS_LIMIT), query.offset()
    prefix = ctx.config.address_prefix

    async def compute(snap: Snapshot) -> Any:
        rows, total = await qd.active_pools_page(snap.conn, limit, offset)
        return {"pools": [shapes.pool(p, prefix) for p in rows], "total": total}

    return await ctx.answer(request, ("pools", limit, offset), compute)


async def tokens(request: Request) -> Response:
    ctx = context(request)
    Query(request.query_params, ())

    async def compute(snap: Snapshot) -> Any:
        rows = await q.tokens(snap.conn)
        tvl = await q.value_locked(snap.conn)
        out = []
        for t in rows:
            v = tvl.get(t.token_id)
            out.append(
                {
                    "token_id": t.token_id,
                    "first_seen_height": t.height,
                    "first_seen_time": t.time,
                    "first_pool_id": t.first_pool_id,
                    "pools": v.pools if v is not None else 0,
                    "tvl_sats": v.sats if v is not None else 0,
                    "tvl_tokens": v.tokens if v is not None else 0,
                }
            )
        return {"tokens": out}

    return await ctx.answer(request, ("tokens",), compute)


async def pool_history(request: Request) -> Response:
    ctx = context(request)
    pool_id = parse_pool_id(request.path_params["pool_id"])
    query = Query(request.query_params, ("start",))
    start = query.integer("start")

    async def compute(snap: Snapshot) -> Any:
        states = await q.pool_history(snap.conn, pool_id, start)
        if not states and (start is None or not await qd.lineage_known(snap.conn, pool_id)):
            raise ApiError.not_found("unknown_pool", f"no pool with the id {pool_id}")
        first = states[0] if states else None
        if first is None:  # known, but nothing at or after `start`: owner/token from its start
            first = (await q.pool_history(snap.conn, pool_id))[0]
        return {
            "pool_id": pool_id,
            "owner_pkh": first.owner_pkh,
            "token_id": first.token_id,
            "history": [shapes.pool_state(p) for p in states],
        }

    return await ctx.answer(request, ("pool_history", pool_id, start), compute)


async def aggregated_apy(request: Request) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("token", "pkh", "start", "end"))
    token_text, pkh_text = query.get("token"), query.get("pkh")
    token = None if token_text is None else await token_id(ctx, token_text)
    pkh = None if pkh_text is None else parse_pkh("pkh", pkh_text)
    start, end = query.window(ctx.now(), DEFAULT_SERIES_SPAN)
    if end - start < MIN_APY_WINDOW:
        raise ApiError.bad("start", f"the window must be at least {MIN_APY_WINDOW} s long")

    async def compute(snap: Snapshot) -> Any:
        if token is not None:
            await require_token(ctx, snap, token)
        if pkh is not None:
            result = await owner_apy(snap.conn, pkh, start, end, token)
        else:
            result = combine(await token_apys(snap.conn, start, end, token), start, end)
        return {"apy": result.text, "pools": result.pools}

    key = ("apy", token, pkh, start, end)
    return await ctx.answer(request, key, compute, requested_time=end)


async def contract_count(request: Request) -> Response:
    ctx = context(request)
    Query(request.query_params, ())
    text = request.path_params.get("token")
    token = None if text is None else await token_id(ctx, text)

    async def compute(snap: Snapshot) -> Any:
        if token is not None:
            await require_token(ctx, snap, token)
        active, ended = await q.contract_counts(snap.conn, token)
        interactions = await qd.trade_count(snap.conn, token)
        return {"active": active, "ended": ended, "interactions": interactions}

    return await ctx.answer(request, ("contract_count", token), compute)


async def first_pool(request: Request) -> Response:
    ctx = context(request)
    Query(request.query_params, ())
    token = await token_id(ctx, request.path_params["token"])
    prefix = ctx.config.address_prefix

    async def compute(snap: Snapshot) -> Any:
        p = await q.first_pool(snap.conn, token)
        if p is None:
            raise ApiError.not_found("unknown_token", f"the index has never seen a pool of {token}")
        return {
            **shapes.pool(p, prefix),
            "height": p.height,
            "timestamp": p.time,
        }

    return await ctx.answer(request, ("first_pool", token), compute)


ROUTES = [
    Route("/tokenpool/pool/active", pool_active),
    Route("/tokenpool/pools", pools),
    Route("/tokenpool/tokens", tokens),
    Route("/dex/pool/active", pool_active),
    Route("/dex/pool/aggregated_apy", aggregated_apy),
    Route("/dex/pool/history/{pool_id}", pool_history),
    Route("/dex/contract/count", contract_count),
    Route("/dex/contract/count/{token}", contract_count),
    Route("/dex/token/{token}/first_pool", first_pool),
]
