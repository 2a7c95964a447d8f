"""Token lists: `/dex/tokens/list_cached`, `list_cached_by_ids`, `search_cached` (token objects,
see `rest.tokenlist`), and `list_by_volume`, `search_by_volume` (volume over a window)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from indexer.store import queries as q
from rest import endpoints as e
from rest.cache import RawJson, json_array
from rest.context import ApiContext
from rest.db import IndexVersion, Snapshot
from rest.held import Held
from rest.routes.common import context
from rest.tokenlist import TokenObject, matches, sort_tokens

Build = Callable[[Snapshot, list[TokenObject]], Awaitable[Sequence[Any]]]
Body = Callable[[Held[Any]], RawJson]


def _identity(o: TokenObject) -> TokenObject:
    return o


async def _paged(
    request: Request,
    ctx: ApiContext,
    key: tuple[Any, ...],
    name: Hashable,
    build: Build,
    body: Body,
    requested_time: int | None = None,
) -> Response:
    """An answer that pages a listing derived from the token list: the listing held per
    (tip, registry revision) under `name`, built by `build` from the list, shown by `body`."""
    registry, usd = ctx.config.registry, ctx.config.usd

    async def compute(snap: Snapshot) -> Any:
        objs = await ctx.tokens.get(snap.conn, snap.tip, registry, usd)
        version = ctx.tokens.version
        held = ctx.held.get(name, version)
        if held is None:
            held = ctx.held.put(name, Held(version, await build(snap, objs), _identity))
        return body(held)

    def from_memory(tip: IndexVersion) -> RawJson | None:
        held = ctx.held.get(name, (tip, registry.revision))
        return None if held is None else body(held)

    return await ctx.answer(
        request, key, compute, requested_time=requested_time, from_memory=from_memory
    )


def _sorting(args: e.ListCachedArgs | e.ByIdsArgs | e.SearchCachedArgs) -> tuple[str, str]:
    by = args.by
    return by, args.order or ("asc" if by == "name" else "desc")


async def list_cached(request: Request, args: e.ListCachedArgs) -> Response:
    ctx = context(request)
    limit, offset = args.limit, args.offset
    by, order = _sorting(args)

    async def build(snap: Snapshot, objs: list[TokenObject]) -> Sequence[Any]:
        return sort_tokens(objs, by, order)

    def body(held: Held[Any]) -> RawJson:
        return RawJson(json_array(held.page(offset, limit)))

    key = ("list_cached", limit, offset, by, order, ctx.config.registry.revision)
    return await _paged(request, ctx, key, ("list_cached", by, order), build, body)


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
    folded = needle.casefold()

    async def build(snap: Snapshot, objs: list[TokenObject]) -> Sequence[Any]:
        return sort_tokens([o for o in objs if matches(o, needle)], by, order)

    def body(held: Held[Any]) -> RawJson:
        return RawJson(json_array(held.page(offset, limit)))

    key = ("search_cached", folded, limit, offset, by, order, ctx.config.registry.revision)
    return await _paged(request, ctx, key, ("search_cached", folded, by, order), build, body)


async def _by_volume(request: Request, args: e.ByVolumeArgs | e.SearchByVolumeArgs) -> Response:
    ctx = context(request)
    needle = args.search_query.strip() if isinstance(args, e.SearchByVolumeArgs) else None
    start, end = e.window(args.start, args.end, ctx.now(), e.DEFAULT_VOLUME_SPAN)
    limit, offset = args.limit, args.offset

    async def build(snap: Snapshot, objs: list[TokenObject]) -> Sequence[Any]:
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
        return items

    window = orjson.dumps({"period_start": start, "period_end": end})[:-1]

    def body(held: Held[Any]) -> RawJson:
        return RawJson(window + b',"tokens":' + json_array(held.page(offset, limit)) + b"}")

    folded = None if needle is None else needle.casefold()
    key = ("by_volume", folded, start, end, limit, offset, ctx.config.registry.revision)
    name = ("by_volume", folded, start, end)
    return await _paged(request, ctx, key, name, build, body, requested_time=end)


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
