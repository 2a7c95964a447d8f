"""The HTTP API: `POST /broadcast` and `GET /broadcast/status/<txid>` (Starlette), with
`GET /health` and `GET /metrics` for operators.

Every answer is JSON, errors included: `{"error": {"code", "message", "details"?}}` with the
documented statuses (400, 404, 405, 413, 415, 422, 502). Nothing reaches the client as a bare
500 or a traceback: an unexpected failure is logged and answered as BROADCAST_FAILED (502) on
the broadcast endpoint, where the transaction may or may not have left, and INTERNAL_ERROR
(503) elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Scope

from broadcast.errors import (
    BAD_REQUEST,
    BROADCAST_FAILED,
    INTERNAL_ERROR,
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    PAYLOAD_TOO_LARGE,
    broadcast_error,
)
from broadcast.metrics import BroadcastMetrics, RequestMetrics
from broadcast.request import JSON_TYPE, check_content_type, check_txid, parse_request
from broadcast.service import BroadcastService
from runtime.catchall import CatchAll
from runtime.errors import ApiError
from runtime.metrics import CONTENT_TYPE

log = logging.getLogger(__name__)

DRAIN_LIMIT = 64 << 20  # an oversized body is read (and dropped) up to this, then cut off


class JsonResponse(Response):
    media_type = JSON_TYPE

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, or PAYLOAD_TOO_LARGE past `limit` bytes. An oversized body is drained rather
    than left unread, so the client gets the 413 instead of a reset connection."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise broadcast_error(BAD_REQUEST, "Content-Length is not a number") from None
        if size > DRAIN_LIMIT:
            raise broadcast_error(PAYLOAD_TOO_LARGE, f"the body may be at most {limit} bytes")
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received <= limit:
            chunks.append(chunk)
        elif received > DRAIN_LIMIT:
            break
    if received > limit:
        raise broadcast_error(
            PAYLOAD_TOO_LARGE, f"the body is {received} bytes; at most {limit} are accepted"
        )
    return b"".join(chunks)


def create_app(service: BroadcastService, *, manage: bool = True) -> Starlette:
    """The ASGI app. With `manage`, the app's lifespan starts and closes `service`."""
    metrics = BroadcastMetrics()

    async def post_broadcast(request: Request) -> Response:
        check_content_type(request.headers.getlist("content-type"))
        body = await read_body(request, service.config.max_body)
        return JsonResponse(await service.broadcast(parse_request(body)))

    async def get_status(request: Request) -> Response:
        txid = check_txid(request.path_params["txid"])
        return JsonResponse(await service.status(txid))

    async def get_health(request: Request) -> Response:
        doc = service.health()
        status = 503 if doc["status"] == "unavailable" else 200
        return JsonResponse(doc, status_code=status, headers={"Cache-Control": "no-store"})

    async def get_metrics(request: Request) -> Response:
        heard = service.health()
        metrics.best_height.set(heard["best_height"])
        metrics.nodes_connected.set(heard["connected"])
        for node in heard["nodes"]:
            metrics.node_connected.labels(node["name"]).set(int(node["connected"]))
            if node["lag_blocks"] is not None:
                metrics.node_lag_blocks.labels(node["name"]).set(node["lag_blocks"])
        return Response(
            metrics.render(), headers={"Cache-Control": "no-store"}, media_type=CONTENT_TYPE
        )

    async def on_api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return exc.response()

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            error = broadcast_error(METHOD_NOT_ALLOWED, f"{request.method} is not allowed here")
            response = error.response()
            if exc.headers:
                response.headers.update(exc.headers)
            return response
        if exc.status_code == 404:
            return broadcast_error(NOT_FOUND, f"no such endpoint: {request.url.path}").response()
        return ApiError(exc.status_code, BAD_REQUEST, str(exc.detail)).response()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manage:
            await service.start()
        try:
            yield
        finally:
            if manage:
                await service.close()

    app = Starlette(
        routes=[
            Route("/broadcast", post_broadcast, methods=["POST"]),
            Route("/broadcast/status/{txid}", get_status, methods=["GET"]),
            Route("/health", get_health, methods=["GET"]),
            Route("/metrics", get_metrics, methods=["GET"]),
        ],
        middleware=[
            Middleware(RequestMetrics, metrics=metrics),
            # Open to browsers: a web wallet (the explorer's swap page) posts its signed
            # transaction here from another origin.
            Middleware(
                CORSMiddleware,
                allow_origins=["*"],
                allow_methods=["GET", "POST"],
                allow_headers=["content-type"],
            ),
            Middleware(CatchAll, answer=_internal_error, logger=log),
        ],
        exception_handlers={ApiError: on_api_error, HTTPException: on_http_error},
        lifespan=lifespan,
    )
    # Starlette would answer `/broadcast/` with a 307 (method and body kept) to an absolute URL
    # built from the client's Host header: a redirect-following client would re-POST its signed
    # transaction to whatever host it named. A trailing-slash path is a JSON 404 instead.
    app.router.redirect_slashes = False
    app.state.service = service
    return app


def _internal_error(scope: Scope) -> ASGIApp:
    """What `CatchAll` answers: on POST /broadcast the outcome is unknown, so say where to look."""
    if scope["method"] == "POST" and scope["path"] == "/broadcast":
        error = broadcast_error(
            BROADCAST_FAILED,
            "internal error; the transaction may or may not have been sent: check "
            "GET /broadcast/status/<txid>",
        )
    else:
        error = broadcast_error(INTERNAL_ERROR, "internal error (logged on the server)")
    return error.response()
