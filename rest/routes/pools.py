"""Pools: `/tokenpool/*`, `/dex/pool/*`, `/dex/contract/count`, `/dex/token/<t>/first_pool`.

The pool listings (`pool/active`, `/tokenpool/pools`, `/tokenpool/tokens`) show the pools at
their latest state, the mempool applied (`rest.mempool`), as the router trades them; the
other figures (counts, history, first pool) are the confirmed index's."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from indexer.store import queries as q
from indexer.store.overlay import overlay_state
from rest import endpoints as e
from rest import queries_dex as qd
from rest import shapes
from rest.apy_index import combine, owner_apy, token_apys
from rest.cache import RawJson, json_array
from rest.db import IndexVersion, Snapshot
from rest.declare import Args, NoArgs
from rest.errors import bad_parameter, not_found
from rest.held import Held
from rest.mempool import read_overlay
from rest.routes.common import context, require_token, token_id
from runtime.errors import ApiError


async def pool_active(request: Request, args: e.PoolActiveArgs) -> Response:
    ctx = context(request)
    pkh_text = args.pkh if args.pkh is not None else args.user
    if args.pkh is not None and args.user is not None:
        raise bad_parameter("user", "the same filter as pkh: give one of them")
    if args.token is None and pkh_text is None:
        raise ApiError(
            400,
            "missing_parameter",
            "token or pkh (user): give at least one",
            fields={"parameter": "token"},
        )
    token = None if args.token is None else await token_id(ctx, args.token)
    pkh = None if pkh_text is None else pkh_text.lower()

    async def compute(snap: Snapshot) -> Any:
        overlay = await read_overlay(snap.conn, snap.tip)
        if token is not None and not overlay.has_token(token):
            await require_token(ctx, snap, token)
        rows = await q.active_pools(snap.conn, token=token, pkh=pkh)
        latest = overlay.apply(rows, token, pkh)
        prefix = await ctx.address_prefix(snap.conn)
        return {"active": [shapes.pool(p, prefix) for p in latest]}

    return await ctx.answer(request, ("pool_active", token, pkh), compute, mempool=True)


async def pools(request: Request, args: e.PoolsArgs) -> Response:
    ctx = context(request)
    # Every pool unless the client pages: no default limit may cut the listing short.
    limit, offset = args.limit, args.offset
    name = "pools"  # every live pool by token, held per tip and mempool revision

    def body(held: Held[q.PoolRow]) -> RawJson:
        rows = json_array(held.page(offset, limit))
        return RawJson(b'{"pools":' + rows + b',"total":' + str(len(held)).encode() + b"}")

    async def compute(snap: Snapshot) -> Any:
        state = await overlay_state(snap.conn)
        version = (snap.tip, 0 if state is None else state.revision)
        held = ctx.held.get(name, version)
        if held is None:
            overlay = await read_overlay(snap.conn, snap.tip)
            latest = _by_token(overlay.apply(await q.all_active_pools(snap.conn)))
            prefix = await ctx.address_prefix(snap.conn)
            held = ctx.held.put(name, Held(version, latest, lambda p: shapes.pool(p, prefix)))
        return body(held)

    def from_memory(tip: IndexVersion) -> RawJson | None:
        held = ctx.held.get(name, (tip, ctx.mempool.revision))
        return None if held is None else body(held)

    key = ("pools", limit, offset)
    return await ctx.answer(request, key, compute, mempool=True, from_memory=from_memory)


def _by_token(rows: list[q.PoolRow]) -> list[q.PoolRow]:
    """By token, each token's pools in the order given (confirmed in chain order, then the
    mempool's in arrival order): a stable sort."""
    return sorted(rows, key=lambda p: p.token_id)


async def tokens(request: Request, args: NoArgs) -> Response:
    ctx = context(request)

    async def compute(snap: Snapshot) -> Any:
        overlay = await read_overlay(snap.conn, snap.tip)
        live: dict[str, list[q.PoolRow]] = {}
        for p in overlay.apply(await q.all_active_pools(snap.conn)):
            live.setdefault(p.token_id, []).append(p)
        out = []
        known = set()
        for t in await q.tokens(snap.conn):
            known.add(t.token_id)
            if t.token_id in live:
                out.append(_token(t.token_id, t.height, t.time, t.first_pool_id, live))
        # A token whose first pool is still unconfirmed: listed, not yet seen in a block.
        for token, ps in live.items():
            if token not in known:
                out.append(_token(token, None, None, ps[0].pool_id, live))
        return {"tokens": out}

    return await ctx.answer(request, ("tokens",), compute, mempool=True)


def _token(
    token: str,
    height: int | None,
    time: int | None,
    first_pool_id: str,
    live: dict[str, list[q.PoolRow]],
) -> dict[str, Any]:
    ps = live[token]
    return {
        "token_id": token,
        "first_seen_height": height,
        "first_seen_time": time,
        "first_pool_id": first_pool_id,
        "pools": len(ps),
        "tvl_sats": sum(p.sats for p in ps),
        "tvl_tokens": sum(p.tokens for p in ps),
    }


async def pool_history(request: Request, args: e.PoolHistoryArgs) -> Response:
    ctx = context(request)
    txid, vout = args.pool_id.split(":")
    pool_id, start = f"{txid.lower()}:{vout}", args.start

    async def compute(snap: Snapshot) -> Any:
        states = await q.pool_history(snap.conn, pool_id, start)
        if not states and (start is None or not await qd.lineage_known(snap.conn, pool_id)):
            raise not_found("unknown_pool", f"no pool with the id {pool_id}")
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


async def aggregated_apy(request: Request, args: e.ApyArgs) -> Response:
    ctx = context(request)
    token = None if args.token is None else await token_id(ctx, args.token)
    pkh = None if args.pkh is None else args.pkh.lower()
    start, end = e.window(args.start, args.end, ctx.now(), e.DEFAULT_SERIES_SPAN)
    if end - start < e.MIN_APY_WINDOW:
        raise bad_parameter("start", f"the window must be at least {e.MIN_APY_WINDOW} s long")

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


async def contract_count(request: Request, args: Args) -> Response:
    ctx = context(request)
    text = args.token if isinstance(args, e.TokenArgs) else None
    token = None if text is None else await token_id(ctx, text)

    async def compute(snap: Snapshot) -> Any:
        if token is not None:
            await require_token(ctx, snap, token)
        active, ended = await q.contract_counts(snap.conn, token)
        interactions = await qd.trade_count(snap.conn, token)
        return {"active": active, "ended": ended, "interactions": interactions}

    return await ctx.answer(request, ("contract_count", token), compute)


async def first_pool(request: Request, args: e.TokenArgs) -> Response:
    ctx = context(request)
    token = await token_id(ctx, args.token)

    async def compute(snap: Snapshot) -> Any:
        p = await q.first_pool(snap.conn, token)
        if p is None:
            raise not_found("unknown_token", f"the index has never seen a pool of {token}")
        return {
            **shapes.pool(p, await ctx.address_prefix(snap.conn)),
            "height": p.height,
            "timestamp": p.time,
        }

    return await ctx.answer(request, ("first_pool", token), compute)


ROUTES = [
    e.TOKENPOOL_ACTIVE.route(pool_active),
    e.TOKENPOOL_POOLS.route(pools),
    e.TOKENPOOL_TOKENS.route(tokens),
    e.DEX_POOL_ACTIVE.route(pool_active),
    e.APY.route(aggregated_apy),
    e.POOL_HISTORY.route(pool_history),
    e.CONTRACT_COUNT.route(contract_count),
    e.TOKEN_CONTRACT_COUNT.route(contract_count),
    e.FIRST_POOL.route(first_pool),
]
