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
    ctx = context(request)
    tip = ctx.watcher.version
    height = None if tip is None else tip.height
    tip_time = None if tip is None else tip.time
    limiter = ctx.limiter
    text = ctx.metrics.render(
        [
            ("index_height", "gauge", "Height of the index tip.", height),
            ("index_tip_time", "gauge", "Header time of the index tip.", tip_time),
            (
                "index_lag_seconds",
                "gauge",
                "Seconds since the index tip's (running max) header time.",
                None if tip is None else max(0, ctx.now() - tip.max_time),
            ),
            ("chain_height", "gauge", "Chain tip height, when known.", ctx.chain_height),
            (
                "warmed_height",
                "gauge",
                "Index height whose token list and candle series the warmer has prepared.",
                ctx.warmed_height,
            ),
            ("cache_entries", "gauge", "Cached answers.", len(ctx.cache)),
            ("cache_bytes", "gauge", "Bytes the cached answers may hold.", ctx.cache.bytes),
            ("cache_hits_total", "counter", "Answers served from cache.", ctx.cache.hits),
            ("cache_misses_total", "counter", "Answers computed.", ctx.cache.misses),
            (
                "rate_limited_total",
                "counter",
                "Requests refused by the rate limit.",
                None if limiter is None else limiter.refused,
            ),
            (
                "candle_rebuilds_total",
                "counter",
                "Hourly candle series built from scratch.",
                ctx.candles.rebuilds,
            ),
        ]
    )
    return Response(text, headers={"Cache-Control": "no-store"}, media_type=PROMETHEUS_TYPE)


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
