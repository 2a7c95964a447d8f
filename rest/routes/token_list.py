"""Token lists: `/dex/tokens/list_cached`, `list_cached_by_ids`, `search_cached` (token objects,
see `rest.tokenlist`), and `list_by_volume`, `search_by_volume` (volume over a window)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from indexer.store import queries as q
from rest import endpoints as e
from rest.db import Snapshot
from rest.routes.common import context
from rest.tokenlist import matches, sort_tokens


def _sorting(args: e.ListCachedArgs | e.ByIdsArgs | e.SearchCachedArgs) -> tuple[str, str]:
    by = args.by
    return by, args.order or ("asc" if by == "name" else "desc")


async def list_cached(request: Request, args: e.ListCachedArgs) -> Response:
    ctx = context(request)
    limit, offset = args.limit, args.offset
    by, order = _sorting(args)
    registry, usd = ctx.config.registry, ctx.config.usd

    async def compute(snap: Snapshot) -> Any:
        objs = await ctx.tokens.get(snap.conn, snap.tip, registry, usd)
        return sort_tokens(objs, by, order)[offset : offset + limit]

    key = ("list_cached", limit, offset, by, order, registry.revision)
    return await ctx.answer(request, key, compute)


async def list_cached_by_ids(request: Request, args: e.ByIdsArgs) -> Response:
    ctx = context(request)
    ids = tuple(sorted(e.hex_list(args.ids)))
    by, order = _sorting(args)
    registry, usd = ctx.config.registry, ctx.config.usd

    async def compute(snap: Snapshot) -> Any:
        objs = await ctx.tokens.get(snap.conn, snap.tip, registry, usd)
        wanted = set(ids)
        return sort_tokens([o for o in objs if o["token_id"] in wanted], by, order)

    key = ("list_cached_by_ids", ids, by, order, registry.revision)
    return await ctx.answer(request, key, compute)


async def search_cached(request: Request, args: e.SearchCachedArgs) -> Response:
    ctx = context(request)
    needle = args.q.strip()
    limit, offset = args.limit, args.offset
    by, order = _sorting(args)
    registry, usd = ctx.config.registry, ctx.config.usd

    async def compute(snap: Snapshot) -> Any:
        objs = await ctx.tokens.get(snap.conn, snap.tip, registry, usd)
        found = [o for o in objs if matches(o, needle)]
        return sort_tokens(found, by, order)[offset : offset + limit]

    key = ("search_cached", needle.casefold(), limit, offset, by, order, registry.revision)
    return await ctx.answer(request, key, compute)


async def _by_volume(request: Request, args: e.ByVolumeArgs | e.SearchByVolumeArgs) -> Response:
    ctx = context(request)
    needle = args.search_query.strip() if isinstance(args, e.SearchByVolumeArgs) else None
    start, end = e.window(args.start, args.end, ctx.now(), e.DEFAULT_VOLUME_SPAN)
    limit, offset = args.limit, args.offset
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


async def list_by_volume(request: Request, args: e.ByVolumeArgs) -> Response:
    return await _by_volume(request, args)


async def search_by_volume(request: Request, args: e.SearchByVolumeArgs) -> Response:
    return await _by_volume(request, args)


ROUTES = [
    e.LIST_BY_VOLUME.route(list_by_volume),
    e.LIST_CACHED.route(list_cached),
    e.LIST_CACHED_BY_IDS.route(list_cached_by_ids),
    e.SEARCH_BY_VOLUME.route(search_by_volume),
    e.SEARCH_CACHED.route(search_cached),
]
