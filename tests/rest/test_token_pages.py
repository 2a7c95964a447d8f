"""The token lists' pages (`list_cached`, `search_cached`, `list_by_volume`,
`search_by_volume`), sliced from listings held per version (`rest.held`), are the bytes of the
answer computed the plain way: the token list sorted (or searched, or ranked by the window's
volume) for each request, then sliced. Each page is asked twice (computed, then from memory)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson

from indexer.store import queries as q
from rest.context import ApiContext
from rest.db import read_tip
from rest.tokenlist import SORT_KEYS, TokenObject, matches, sort_tokens
from tests.rest.conftest import World, app_and_client


@asynccontextmanager
async def context_and_client(world: World) -> AsyncIterator[tuple[ApiContext, httpx.AsyncClient]]:
    async with app_and_client(world.config()) as (app, client):
        yield app.state.ctx, client


async def token_list(ctx: ApiContext) -> list[TokenObject]:
    async with ctx.pool.connection() as conn:
        tip = await read_tip(conn)
        assert tip is not None
        return await ctx.tokens.get(conn, tip, ctx.config.registry, ctx.config.usd)


async def by_volume(ctx: ApiContext, needle: str | None, start: int, end: int) -> list[Any]:
    """The volume ranking, each token's volume read on its own."""
    items = []
    async with ctx.pool.connection() as conn:
        for o in await token_list(ctx):
            if needle is None or matches(o, needle):
                sats, tokens, n = await q.volume(conn, start, end, o["token_id"])
                names = {k: o[k] for k in ("token_id", "display_symbol", "display_name")}
                items.append(
                    names | {"volume_sats": sats, "volume_tokens": tokens, "trade_count": n}
                )
    return sorted(items, key=lambda i: (-i["volume_sats"], i["token_id"]))


async def same_twice(client: httpx.AsyncClient, url: str, want: bytes) -> None:
    for _ in range(2):  # computed (and held), then from memory
        r = await client.get(url)
        assert r.status_code == 200, (url, r.text)
        assert r.content == want, url


PAGES = [(0, 1), (0, 3), (1, 2), (2, 50), (4, 1), (5, 100), (50, 10)]


async def test_token_list_pages_are_the_sorted_list_sliced(world: World) -> None:
    async with context_and_client(world) as (ctx, client):
        objs = await token_list(ctx)
        assert len(objs) >= 3
        needle = objs[0]["display_symbol"][:2].lower()
        found = [o for o in objs if matches(o, needle)]
        assert 0 < len(found) < len(objs)
        for by in SORT_KEYS:
            for order in ("asc", "desc"):
                listing = sort_tokens(objs, by, order)
                searched = sort_tokens(found, by, order)
                for offset, limit in PAGES:
                    page = f"by={by}&order={order}&offset={offset}&limit={limit}"
                    want = orjson.dumps(listing[offset : offset + limit])
                    await same_twice(client, f"/dex/tokens/list_cached?{page}", want)
                    want = orjson.dumps(searched[offset : offset + limit])
                    await same_twice(client, f"/dex/tokens/search_cached?q={needle}&{page}", want)


async def test_volume_pages_are_the_ranking_sliced(world: World) -> None:
    async with context_and_client(world) as (ctx, client):
        objs = await token_list(ctx)
        needle = objs[0]["display_symbol"][:2]
        end = world.now
        for start in (end - 86_400, end - 30 * 86_400, 0):
            window = f"start={start}&end={end}"
            every = await by_volume(ctx, None, start, end)
            found = await by_volume(ctx, needle, start, end)
            assert any(i["volume_sats"] for i in every)
            for offset, limit in PAGES:
                page = f"{window}&offset={offset}&limit={limit}"
                for path, items in (
                    ("list_by_volume?", every),
                    (f"search_by_volume?search_query={needle}&", found),
                ):
                    want = orjson.dumps(
                        {
                            "period_start": start,
                            "period_end": end,
                            "tokens": items[offset : offset + limit],
                        }
                    )
                    await same_twice(client, f"/dex/tokens/{path}{page}", want)
