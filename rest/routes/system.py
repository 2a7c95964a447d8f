"""Operations: `/health`, `/metrics`, `/openapi.json`, `/docs` (and the benchmark's ceiling)."""

from __future__ import annotations

import time
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from rest.declare import Endpoint, NoArgs
from rest.openapi import docs_html, spec_bytes
from rest.routes.common import context
from runtime.errors import JSON_TYPE

PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Parsing only (an unknown parameter is a 400): its operation is written in `rest.spec`, as
# its answers are not cached and a 503 carries the same Health body.
HEALTH = Endpoint("/health", NoArgs, "Health", "Index height, lag, database status")


async def health(request: Request) -> Response:
    """Index height, lag behind the chain tip, database status. 503 when the database cannot
    be read; 200 otherwise (`synced` says whether time-based answers are complete)."""
    ctx = context(request)
    HEALTH.parse(request)
    tip = await ctx.watcher.refresh()
    freshness = await ctx.freshness(tip)
    chain = await ctx.refresh_chain_height()
    now = ctx.now()
    body: dict[str, Any] = {
        "status": "ok",
        "database": "ok",
        "index_height": None,
        "index_hash": None,
        "index_time": None,
        "chain_height": chain,
        "lag_blocks": None,
        "lag_seconds": None,
        "synced": False,
        "uptime_seconds": int(time.time() - ctx.started),
        "freshness": None if freshness is None else freshness.to_json(),
    }
    status = 200
    if ctx.watcher.error is not None:
        body.update(status="unavailable", database="unavailable", error=ctx.watcher.error)
        status = 503
    elif tip is None:
        body.update(status="empty")
    else:
        synced = ctx.synced_until(tip, now) >= now
        body.update(
            status="ok" if synced else "syncing",
            index_height=tip.height,
            index_hash=tip.hash,
            index_time=tip.time,
            lag_blocks=None if chain is None else max(0, chain - tip.height),
            lag_seconds=max(0, now - tip.max_time),
            synced=synced,
        )
    headers = {"Cache-Control": "no-store"}
    return Response(orjson.dumps(body), status, headers=headers, media_type=JSON_TYPE)


async def metrics(request: Request) -> Response:
    """Prometheus exposition (`rest.metrics`): this worker sets the index gauges, then the
    values of every worker are merged (multi-process mode) or this one's given."""
    ctx = context(request)
    tip = ctx.watcher.version
    freshness = await ctx.freshness(tip)
    m = ctx.metrics
    m.index_height.set(None if tip is None else tip.height)
    m.index_tip_time.set(None if tip is None else tip.time)
    m.index_lag_seconds.set(None if tip is None else max(0, ctx.now() - tip.max_time))
    m.chain_height.set(ctx.chain_height)
    m.warmed_height.set(ctx.warmed_height)
    if freshness is not None:
        m.best_height.set(freshness.best_height)
        m.lag_blocks.set(freshness.lag_blocks)
        m.lag_seconds.set(freshness.lag_seconds)
        m.servers_connected.set(freshness.connected)
    headers = {"Cache-Control": "no-store"}
    return Response(m.render(), headers=headers, media_type=PROMETHEUS_TYPE)


async def openapi(request: Request) -> Response:
    return Response(
        spec_bytes(), headers={"Cache-Control": "public, max-age=3600"}, media_type=JSON_TYPE
    )


async def docs(request: Request) -> Response:
    return HTMLResponse(docs_html(), headers={"Cache-Control": "public, max-age=3600"})


async def ceiling(request: Request) -> Response:
    """The benchmark's ceiling: no parsing, no database, no cache."""
    return PlainTextResponse("ok")


ROUTES = [
    Route("/health", health),
    Route("/metrics", metrics),
    Route("/openapi.json", openapi),
    Route("/docs", docs),
]
CEILING = Route("/bench/ceiling", ceiling)
