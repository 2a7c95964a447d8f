"""Token lists: `/dex/tokens/list_cached`, `list_cached_by_ids`, `search_cached` (token objects,
see `rest.tokenlist`), and `list_by_volume`, `search_by_volume` (volume over a window)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from indexer.store import queries as q
from rest.db import Snapshot
from rest.errors import ApiError
from rest.params import DEFAULT_VOLUME_SPAN, MAX_IDS, SEARCH_LIMIT, TOKEN_LIST_LIMIT, Query
from rest.routes.common import context
from rest.tokenlist import SORT_KEYS, matches, sort_tokens
from rest.tokens import parse_token_id

MAX_QUERY = 64


def _sorting(query: Query) -> tuple[str, str]:
    by = query.choice("by", SORT_KEYS, "score")
    return by, query.choice("order", ("asc", "desc"), "asc" if by == "name" else "desc")


def _search_text(query: Query, name: str) -> str:
    text = query.get(name)
    if text is None:
        raise ApiError(400, "missing_parameter", f"{name}: required", parameter=name)
    text = text.strip()
    if not 1 <= len(text) <= MAX_QUERY:
        raise ApiError.bad(name, f"must be 1 to {MAX_QUERY} characters (spaces trimmed)")
    return text


async def list_cached(request: Request) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("limit", "offset", "by", "order"))
    limit, offset = query.limit(TOKEN_LIST_LIMIT), query.offset()
    by, order = _sorting(query)
    registry, usd = ctx.config.registry, ctx.config.usd

    async def compute(snap: Snapshot) -> Any:
        objs = await ctx.tokens.get(snap.conn, snap.tip, registry, usd)
        return sort_tokens(objs, by, order)[offset : offset + limit]

    key = ("list_cached", limit, offset, by, order, registry.revision)
    return await ctx.answer(request, key, compute)


async def list_cached_by_ids(request: Request) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("ids", "by", "order"))
    text = query.get("ids")
    if text is None:
        raise ApiError(400, "missing_parameter", "ids: required", parameter="ids")
    parts = text.split(",")
    if len(parts) > MAX_IDS:
        raise ApiError.bad("ids", f"at most {MAX_IDS} ids, got {len(parts)}")
    ids = tuple(sorted({parse_token_id("ids", p.strip()) for p in parts}))
    by, order = _sorting(query)
    registry, usd = ctx.config.registry, ctx.config.usd

    async def compute(snap: Snapshot) -> Any:
        objs = await ctx.tokens.get(snap.conn, snap.tip, registry, usd)
        wanted = set(ids)
        return sort_tokens([o for o in objs if o["token_id"] in wanted], by, order)

    key = ("list_cached_by_ids", ids, by, order, registry.revision)
    return await ctx.answer(request, key, compute)


async def search_cached(request: Request) -> Response:
    ctx = context(request)
    query = Query(request.query_params, ("q", "limit", "offset", "by", "order"))
    needle = _search_text(query, "q")
    limit, offset = query.limit(SEARCH_LIMIT), query.offset()
    by, order = _sorting(query)
    registry, usd = ctx.config.registry, ctx.config.usd

    async def compute(snap: Snapshot) -> Any:
        objs = await ctx.tokens.get(snap.conn, snap.tip, registry, usd)
        found = [o for o in objs if matches(o, needle)]
        return sort_tokens(found, by, order)[offset : offset + limit]

    key = ("search_cached", needle.casefold(), limit, offset, by, order, registry.revision)
    return await ctx.answer(request, key, compute)


async def _by_volume(request: Request, search: bool) -> Response:
    ctx = context(request)
    allowed = ("search_query", "start", "end", "limit") if search else ("start", "end", "limit")
    query = Query(request.query_params, (*allowed, "offset"))
    needle = _search_text(query, "search_query") if search else None
    start, end = query.window(ctx.now(), DEFAULT_VOLUME_SPAN)
    limit = query.limit(SEARCH_LIMIT if search else TOKEN_LIST_LIMIT)
    offset = query.offset()
    registry, usd = ctx.config.registry, ctx.config.usd

    async def compute(snap: Snapshot) -> Any:
        objs = await ctx.tokens.get(snap.conn, snap.tip, registry, usd)
        volumes = await q.volume_by_token(snap.conn, start, end)
        items = []
        for o in objs:
            if needle is not None and not matches(o, needle):
                continue
            vs, vt, n = volumes.get(o["token_id"], (0, 0, 0))
            items.append(
                {
                    "token_id": o["token_id"],
                    "display_symbol": o["display_symbol"],
                    "display_name": o["display_name"],
                    "volume_sats": vs,
                    "volume_tokens": vt,
                    "trade_count": n,
                }
            )
        items.sort(key=lambda i: (-i["volume_sats"], i["token_id"]))
        return {
            "period_start": start,
            "period_end": end,
            "tokens": items[offset : offset + limit],
        }

    folded = None if needle is None else needle.casefold()
    key = ("by_volume", folded, start, end, limit, offset, registry.revision)
    return await ctx.answer(request, key, compute, requested_time=end)


async def list_by_volume(request: Request) -> Response:
    return await _by_volume(request, search=False)


async def search_by_volume(request: Request) -> Response:
    return await _by_volume(request, search=True)


ROUTES = [
    Route("/dex/tokens/list_by_volume", list_by_volume),
    Route("/dex/tokens/list_cached", list_cached),
    Route("/dex/tokens/list_cached_by_ids", list_cached_by_ids),
    Route("/dex/tokens/search_by_volume", search_by_volume),
    Route("/dex/tokens/search_cached", search_cached),
]
