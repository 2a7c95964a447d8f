"""Activity: `/dex/tx/latest`, `/dex/user/unique_addresses`, `/dex/valuelocked[/<token>]`,
`/dex/volume[/<token>]`."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from indexer.store import queries as q
from rest import endpoints as e
from rest import shapes
from rest.cache import RawJson, json_array
from rest.db import IndexVersion, Snapshot
from rest.declare import NoArgs
from rest.routes.common import context, require_token, token_id


async def tx_latest(request: Request, args: e.TxLatestArgs) -> Response:
    ctx = context(request)
    limit, offset = args.limit, args.offset
    text = args.token
    token = None if text is None else await token_id(ctx, text)
    listing = q.trades_listing(token)

    async def compute(snap: Snapshot) -> Any:
        if token is not None:
            await require_token(ctx, snap, token)
        start = await ctx.anchors.seek(snap.conn, snap.tip, listing, offset)
        rows = await q.latest_trades(snap.conn, limit, offset, token, start)
        page = [orjson.dumps(shapes.trade(t)) for t in rows]
        ctx.anchors.keep(snap.tip, listing, offset, page)
        return RawJson(json_array(page))

    def from_memory(tip: IndexVersion) -> RawJson | None:
        if token is not None and not ctx.tokens.known(tip, token):
            return None  # not at `tip` (None), or unknown: the snapshot path answers 404
        page = ctx.anchors.ready(tip, listing, offset, limit)
        return None if page is None else RawJson(json_array(page))

    key = ("tx_latest", limit, offset, token)
    return await ctx.answer(request, key, compute, from_memory=from_memory)


async def unique_addresses(request: Request, args: NoArgs) -> Response:
    ctx = context(request)

    async def compute(snap: Snapshot) -> Any:
        return [[month, n] for month, n in await q.unique_addresses(snap.conn)]

    return await ctx.answer(request, ("unique_addresses",), compute)


async def valuelocked(request: Request, args: e.ValueLockedArgs) -> Response:
    ctx = context(request)
    when = args.time
    text = args.token if isinstance(args, e.TokenValueLockedArgs) else None
    token = None if text is None else await token_id(ctx, text)

    async def compute(snap: Snapshot) -> Any:
        if token is not None:
            await require_token(ctx, snap, token)
        height = None if when is None else await q.height_at(snap.conn, when)
        if when is not None and height is None:
            locked = {}  # before the first block
        else:
            locked = await q.value_locked(snap.conn, token=token, height=height)
        if token is None:
            return {"satoshis": sum(v.sats for v in locked.values())}
        v = locked.get(token)
        return {
            "satoshis": v.sats if v is not None else 0,
            "token_amount": v.tokens if v is not None else 0,
            "token_id": token,
        }

    return await ctx.answer(request, ("valuelocked", token, when), compute, requested_time=when)


async def volume(request: Request, args: e.WindowArgs) -> Response:
    ctx = context(request)
    start, end = e.window(args.start, args.end, ctx.now(), e.DEFAULT_VOLUME_SPAN)
    text = args.token if isinstance(args, e.TokenWindowArgs) else None
    token = None if text is None else await token_id(ctx, text)

    async def compute(snap: Snapshot) -> Any:
        if token is None:
            sats, _, _ = await q.volume(snap.conn, start, end)
            return {"total_volume_sats": sats, "period_start": start, "period_end": end}
        await require_token(ctx, snap, token)
        sats, tokens, _ = await q.volume(snap.conn, start, end, token)
        return {
            "volume_sats": sats,
            "volume_tokens": tokens,
            "token_id": token,
            "period_start": start,
            "period_end": end,
        }

    key = ("volume", token, start, end)
    return await ctx.answer(request, key, compute, requested_time=end)


ROUTES = [
    e.TX_LATEST.route(tx_latest),
    e.UNIQUE_ADDRESSES.route(unique_addresses),
    e.VALUE_LOCKED.route(valuelocked),
    e.TOKEN_VALUE_LOCKED.route(valuelocked),
    e.VOLUME.route(volume),
    e.TOKEN_VOLUME.route(volume),
]
