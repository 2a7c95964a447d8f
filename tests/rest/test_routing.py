"""`StaticFirstRouter` dispatches every request exactly as Starlette's scan would: to the same
endpoint, with the same path parameters, 405 and 404, whether the shortcut takes it or not."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from rest.app import all_routes
from rest.config import RestConfig
from rest.routing import StaticFirstRouter, first_static


def endpoint(name: str) -> Callable[[Request], Awaitable[Response]]:
    async def run(request: Request) -> Response:
        return JSONResponse({"endpoint": name, "params": request.path_params})

    return run


ROUTES: list[BaseRoute] = [
    Route("/a/{x}", endpoint("a-param")),
    Route("/a/b", endpoint("a-b")),  # shadowed by /a/{x}: never reached
    Route("/c", endpoint("c-get"), methods=["GET"]),
    Route("/c", endpoint("c-post"), methods=["POST"]),
    Route("/d", endpoint("d")),
    Route("/e/f", endpoint("e-f")),
    Route("/e/{y}", endpoint("e-param")),
]
REQUESTS = [
    (m, p)
    for m in ("GET", "HEAD", "POST", "PUT")
    for p in ("/a/b", "/a/z", "/c", "/d", "/d/", "/e/f", "/e/g", "/nowhere")
]


async def answers(app: Starlette) -> list[tuple[int, bytes, str | None]]:
    out = []
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for method, path in REQUESTS:
            r = await client.request(method, path)
            out.append((r.status_code, r.content, r.headers.get("allow")))
    return out


async def test_the_shortcut_dispatches_as_the_scan() -> None:
    plain = Starlette(routes=ROUTES)
    fast = Starlette(routes=ROUTES)
    fast.router = StaticFirstRouter(ROUTES)
    assert set(first_static(ROUTES)) == {"/c", "/d", "/e/f"}
    got = await answers(fast)
    assert got == await answers(plain)
    assert (200, b'{"endpoint":"a-param","params":{"x":"b"}}', None) in got


def test_every_plain_api_path_takes_the_shortcut() -> None:
    routes = all_routes(RestConfig(bench_ceiling=True))
    plain = [r.path for r in routes if isinstance(r, Route) and not r.param_convertors]
    assert "/dex/tx/latest" in plain and "/bench/ceiling" in plain
    assert sorted(first_static(routes)) == sorted(set(plain))
