"""Routes of the explorer: pages, their static files, whitelisted vendor files, the schemas and
the page configuration. Paths taken from a URL are checked part by part (a fixed alphabet, no
dot-files, so no `..`) and resolved under their root before a file is opened."""

from __future__ import annotations

import asyncio
import gzip
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from rest.middleware import accepts_gzip
from rest.openapi import docs_html
from runtime.errors import JSON_TYPE, ApiError

HERE = Path(__file__).resolve().parent
PAGES = HERE / "pages"
STATIC = HERE / "static"
PROJECT = HERE.parents[1]
NODE_MODULES = PROJECT / "node_modules"
SCHEMAS = PROJECT / "schemas"

# What the pages need to reach the other services, computed per request (in `ladle up` the
# router and the broadcast API start after the data API, so their addresses come later).
ExplorerEnv = Callable[[], Mapping[str, object]]

# name -> (directory under node_modules, files allowed; None: any .js file below it)
VENDOR: dict[str, tuple[str, frozenset[str] | None]] = {
    "swagger-ui": (
        "swagger-ui-dist",
        frozenset({"swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "swagger-ui.css"}),
    ),
    "lightweight-charts": (
        "lightweight-charts/dist",
        frozenset({"lightweight-charts.standalone.production.mjs"}),
    ),
    # libauth is an ES module tree (relative imports between its files): the whole build.
    "libauth": ("@bitauth/libauth/build", None),
}

PAGE_FILES = {
    "tokens": "tokens.html",
    "token": "token.html",
    "pool": "pool.html",
    "swap": "swap.html",
    "oracle": "oracle.html",
    "lending": "lending.html",
    "broadcast": "broadcast.html",
    "docs": "docs.html",
}

_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".json": JSON_TYPE,
    ".svg": "image/svg+xml",
}
NOT_FOUND = "not_found"


def _missing() -> ApiError:
    return ApiError(404, NOT_FOUND, "no such file")


def safe_file(root: Path, rel: str, suffixes: frozenset[str]) -> Path:
    """The file `rel` names under `root`, or a 404: every part must match `_PART` (so no `..`,
    no hidden file, no empty part), the suffix must be allowed, and the resolved path (links
    followed) must still lie under `root`."""
    parts = rel.split("/")
    if not rel or len(parts) > 8 or not all(_PART.match(p) and ".." not in p for p in parts):
        raise _missing()
    path = (root / rel).resolve()
    if path.suffix not in suffixes or not path.is_relative_to(root.resolve()):
        raise _missing()
    if not path.is_file():
        raise _missing()
    return path


_COMPRESSIBLE = frozenset({".js", ".mjs", ".css", ".html", ".json", ".svg"})
# Gzipped copies of served files, made once per file version (path, mtime): the vendor bundles
# shrink to about a quarter (Swagger UI's 1.4 MB bundle, libauth's embedded WebAssembly).
_gzipped: dict[tuple[Path, int], bytes] = {}


async def _file(request: Request, path: Path, *, max_age: int) -> Response:
    media_type = _TYPES.get(path.suffix, "application/octet-stream")
    headers = {"Cache-Control": f"public, max-age={max_age}", "Vary": "Accept-Encoding"}
    if path.suffix not in _COMPRESSIBLE or not accepts_gzip(request.headers.get("accept-encoding")):
        return FileResponse(path, media_type=media_type, headers=headers)
    key = (path, path.stat().st_mtime_ns)
    body = _gzipped.get(key)
    if body is None:
        body = await asyncio.to_thread(gzip.compress, path.read_bytes(), 6, mtime=0)
        _gzipped[key] = body
    headers["Content-Encoding"] = "gzip"
    return Response(body, media_type=media_type, headers=headers)


def explorer_routes(
    env: ExplorerEnv | None = None, node_modules: Path = NODE_MODULES
) -> list[BaseRoute]:
    """The routes, mounted ahead of the data API's (so `/docs` is the viewer). `env` gives the
    other services' addresses; without it (a bare `ladle rest`) the swap page says there is no
    router configured, and the data pages work as usual."""

    def page(name: str) -> Callable[[Request], Any]:
        async def serve(request: Request) -> Response:
            # Short cache: the pages are tiny and change with the project.
            return await _file(request, PAGES / PAGE_FILES[name], max_age=60)

        return serve

    async def static(request: Request) -> Response:
        path = safe_file(STATIC, request.path_params["path"], frozenset({".js", ".css", ".svg"}))
        return await _file(request, path, max_age=60)

    async def vendor(request: Request) -> Response:
        name = request.path_params["name"]
        rel = request.path_params["path"]
        entry = VENDOR.get(name)
        if entry is None:
            raise _missing()
        directory, allowed = entry
        if allowed is not None and rel not in allowed:
            raise _missing()
        suffixes = frozenset({".js", ".mjs", ".css"})
        path = safe_file(node_modules / directory, rel, suffixes)
        return await _file(request, path, max_age=86400)

    async def schema(request: Request) -> Response:
        path = safe_file(SCHEMAS, request.path_params["path"], frozenset({".json"}))
        return await _file(request, path, max_age=300)

    async def broadcast_openapi(request: Request) -> Response:
        """The broadcast API's OpenAPI document with `servers` set to where it runs, so the
        viewer's "try it out" reaches it (that API has no docs route of its own)."""
        spec = orjson.loads((SCHEMAS / "openapi-broadcast.json").read_bytes())
        url = (env() if env is not None else {}).get("broadcast")
        if isinstance(url, str):
            spec["servers"] = [{"url": url, "description": "this ladle's broadcast API"}]
        return Response(
            orjson.dumps(spec), media_type=JSON_TYPE, headers={"Cache-Control": "no-store"}
        )

    async def config(request: Request) -> Response:
        values = dict(env()) if env is not None else {}
        body = {
            "network": values.get("network"),
            "router": values.get("router"),
            "broadcast": values.get("broadcast"),
            "electrum_ws": values.get("electrum_ws"),
            "router_fee": values.get("router_fee"),
            "oracle_feeds": values.get("oracle_feeds") or [],
            # Devnet test wallets only (their keys are printed by `ladle up` for anyone to use).
            "wallets": values.get("wallets") or [],
        }
        return Response(
            orjson.dumps(body), media_type=JSON_TYPE, headers={"Cache-Control": "no-store"}
        )

    async def endpoint_list(request: Request) -> Response:
        """The plain, script-free list of endpoints the data API served at `/docs` before the
        viewer: still useful without node_modules or JavaScript."""
        return HTMLResponse(docs_html(), headers={"Cache-Control": "public, max-age=3600"})

    async def root(request: Request) -> Response:
        return RedirectResponse("/explorer", status_code=302)

    return [
        Route("/docs", page("docs")),
        Route("/docs/endpoints", endpoint_list),
        Route("/docs/broadcast/openapi.json", broadcast_openapi),
        Route("/schemas/{path:path}", schema),
        Route("/vendor/{name}/{path:path}", vendor),
        Route("/explorer", page("tokens")),
        Route("/explorer/config.json", config),
        Route("/explorer/static/{path:path}", static),
        Route("/explorer/token/{token}", page("token")),
        Route("/explorer/pool/{pool}", page("pool")),
        Route("/explorer/swap", page("swap")),
        Route("/explorer/oracle", page("oracle")),
        Route("/explorer/lending", page("lending")),
        Route("/explorer/broadcast", page("broadcast")),
        Route("/", root),
    ]
