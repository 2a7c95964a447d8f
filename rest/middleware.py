"""What every answer carries, and the layer in front of the routes.

- `Edge` (ASGI, outermost): CORS (simple requests and preflights), the per-client rate limit
  (429 + `Retry-After`; `/health` and `/metrics` are exempt) and per-route metrics.
- `json_answer`: a data answer's headers — `X-Index-Height`, an `ETag` tied to the index
  version and the resolved request, `Cache-Control`, `Vary` — with `If-None-Match` → 304 and
  gzip for large bodies when the client accepts it (the compressed body is cached too).

The ETag is `W/"<height>.<tip hash prefix>.<request digest>"`: weak, because the same answer is
sent plain or gzipped; derived from the index version and the request's *resolved* parameters
(defaults such as "now" included), so it can be checked before any database work.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Hashable, Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rest.cache import Entry
from rest.db import IndexVersion
from rest.errors import error_response
from rest.metrics import Metrics
from rest.ratelimit import RateLimiter
from runtime.errors import JSON_TYPE, ApiError

EXEMPT = frozenset({"/health", "/metrics"})
EXPOSED = b"X-Index-Height, ETag, Retry-After"
PREFLIGHT_MAX_AGE = b"86400"


def make_etag(tip: IndexVersion, key: Hashable) -> str:
    digest = hashlib.blake2b(repr(key).encode(), digest_size=8).hexdigest()
    return f'W/"{tip.tag}.{digest}"'


def etag_matches(if_none_match: str, etag: str) -> bool:
    opaque = etag.removeprefix("W/")
    for candidate in if_none_match.split(","):
        c = candidate.strip()
        if c == "*" or c.removeprefix("W/") == opaque:
            return True
    return False


def accepts_gzip(accept_encoding: str | None) -> bool:
    if not accept_encoding:
        return False
    for part in accept_encoding.split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() not in ("gzip", "*"):
            continue
        q = params.strip().lower()
        if q.startswith("q="):
            try:
                return float(q[2:]) > 0
            except ValueError:
                return False
        return True
    return False


def data_headers(tip: IndexVersion, etag: str, max_age: int) -> dict[str, str]:
    return {
        "X-Index-Height": str(tip.height),
        "ETag": etag,
        "Cache-Control": f"public, max-age={max_age}",
        "Vary": "Accept-Encoding",
    }


def not_modified(request: Request, tip: IndexVersion, etag: str, max_age: int) -> Response | None:
    inm = request.headers.get("if-none-match")
    if inm is None or not etag_matches(inm, etag):
        return None
    return Response(status_code=304, headers=data_headers(tip, etag, max_age))


def json_answer(request: Request, entry: Entry, max_age: int, gzip_min_size: int) -> Response:
    cached = not_modified(request, entry.tip, entry.etag, max_age)
    if cached is not None:
        return cached
    headers = data_headers(entry.tip, entry.etag, max_age)
    body = entry.body
    if len(body) >= gzip_min_size and accepts_gzip(request.headers.get("accept-encoding")):
        body = entry.gzipped()
        headers["Content-Encoding"] = "gzip"
    return Response(body, 200, headers=headers, media_type=JSON_TYPE)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


class Edge:
    """CORS, rate limit and metrics in one pass (one ASGI layer instead of three)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        limiter: RateLimiter | None,
        cors_origins: Sequence[str],
        trust_forwarded: bool = False,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.limiter = limiter
        self.any_origin = "*" in cors_origins
        self.origins = frozenset(o.encode() for o in cors_origins)
        self.trust_forwarded = trust_forwarded

    def _client(self, scope: Scope) -> str:
        if self.trust_forwarded:
            forwarded = _header(scope, b"x-forwarded-for")
            if forwarded:
                return forwarded.split(b",")[0].strip().decode("latin-1")
        client = scope.get("client")
        return str(client[0]) if client else "unknown"

    def _cors(self, origin: bytes | None) -> list[tuple[bytes, bytes]]:
        if origin is None:
            return []
        if self.any_origin:
            allowed = b"*"
        elif origin in self.origins:
            allowed = origin
        else:
            return []
        headers = [
            (b"access-control-allow-origin", allowed),
            (b"access-control-expose-headers", EXPOSED),
        ]
        if allowed != b"*":
            headers.append((b"vary", b"Origin"))
        return headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        method = scope["method"]
        origin = _header(scope, b"origin")
        cors = self._cors(origin)
        status = 500

        async def send_with_headers(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if cors:
                    message["headers"] = [*message.get("headers", ()), *cors]
            await send(message)

        route = "unmatched"
        try:
            if method == "OPTIONS" and origin is not None:
                requested = _header(scope, b"access-control-request-method")
                if requested is not None:
                    route = "preflight"
                    await self._preflight(scope, cors, send_with_headers)
                    return
            if self.limiter is not None and scope["path"] not in EXEMPT:
                wait = self.limiter.check(self._client(scope))
                if wait is not None:
                    route = "rate_limited"
                    error = ApiError(
                        429,
                        "rate_limited",
                        f"too many requests; retry in {wait} s",
                        headers={"Retry-After": str(wait)},
                    )
                    await error_response(error)(scope, receive, send_with_headers)
                    return
            await self.app(scope, receive, send_with_headers)
            matched = scope.get("route")
            route = getattr(matched, "path", route)
        finally:
            self.metrics.observe(route, method, status, time.perf_counter() - began)

    async def _preflight(self, scope: Scope, cors: list[tuple[bytes, bytes]], send: Send) -> None:
        headers = [
            (b"access-control-allow-methods", b"GET, HEAD, OPTIONS"),
            (b"access-control-max-age", PREFLIGHT_MAX_AGE),
            (b"content-length", b"0"),
        ]
        asked = _header(scope, b"access-control-request-headers")
        if asked is not None and cors:
            headers.append((b"access-control-allow-headers", asked))
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
