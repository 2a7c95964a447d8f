"""The data API's Starlette app: `create_app(config)`.

Layers, outside in: `Edge` (CORS, rate limit, metrics) → `CatchAll` (no traceback ever
reaches a client) → Starlette's routing with JSON 404/405 → the route modules. The lifespan
starts the index watcher, the cache warmer (`rest.warm`) and the chain tip poll, and closes the
reader connections; without it (an in-process test transport) the app still works, reading
the tip on demand and computing everything on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from rest.config import RestConfig
from rest.context import ApiContext
from rest.errors import internal_error, log, on_api_error, on_http_error
from rest.explorer import explorer_routes
from rest.middleware import Edge
from rest.routes import activity, lending, oracle, pools, price, registry, system, token_list
from rest.routing import StaticFirstRouter
from rest.warm import Warmer
from runtime.catchall import CatchAll
from runtime.errors import ApiError
from runtime.tasks import cancel_and_wait


def all_routes(config: RestConfig) -> list[BaseRoute]:
    routes: list[BaseRoute] = [
        # First: the explorer's `/docs` (the OpenAPI viewer) replaces the plain endpoint list.
        *explorer_routes(config.explorer_env),
        *pools.ROUTES,
        *price.ROUTES,
        *token_list.ROUTES,
        *activity.ROUTES,
        *oracle.ROUTES,
        *registry.ROUTES,
        *lending.ROUTES,
        *system.ROUTES,
    ]
    if config.bench_ceiling:
        routes.append(system.CEILING)
    return routes


def create_app(config: RestConfig | None = None) -> Starlette:
    cfg = config if config is not None else RestConfig()
    ctx = ApiContext.create(cfg)

    warmer = Warmer(ctx)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        ctx.watcher.start()
        if cfg.warm:
            warmer.start()
        chain_poll = None
        if cfg.chain_tip is not None:
            chain_poll = asyncio.create_task(_poll_chain(ctx), name="rest-chain-tip")
        try:
            yield
        finally:
            if chain_poll is not None:
                await cancel_and_wait([chain_poll])
            await warmer.stop()
            await ctx.watcher.stop()
            await ctx.pool.close()

    app = Starlette(
        routes=all_routes(cfg),
        middleware=[
            Middleware(
                Edge,
                metrics=ctx.metrics,
                limiter=ctx.limiter,
                cors_origins=cfg.cors_origins,
                trust_forwarded=cfg.trust_forwarded,
            ),
            Middleware(CatchAll, answer=internal_error, logger=log),
        ],
        exception_handlers={ApiError: on_api_error, HTTPException: on_http_error},
        lifespan=lifespan,
    )
    # Starlette would answer `/x/` with a 307 to an absolute URL built from the client's Host
    # header (an open redirect); a trailing-slash path is a plain JSON 404 instead.
    app.router = StaticFirstRouter(app.router.routes, redirect_slashes=False, lifespan=lifespan)
    app.state.ctx = ctx
    return app


async def _poll_chain(ctx: ApiContext) -> None:
    while True:
        await ctx.refresh_chain_height()
        await asyncio.sleep(ctx.config.poll_interval)
