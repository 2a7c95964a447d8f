"""JSON errors: `{"error": {"code", "message", …}}`, never a traceback.

| status | codes |
|---|---|
| 400 | `invalid_parameter`, `missing_parameter`, `unknown_parameter`, `ambiguous_symbol` |
| 404 | `not_found` (no such endpoint), `unknown_token`, `unknown_pool` |
| 405 | `method_not_allowed` (with `Allow`) |
| 429 | `rate_limited` (with `Retry-After`) |
| 503 | `not_synced` (the index has not reached the requested time), `database_unavailable` |
| 500 | `internal_error`: a bug; logged on the server, the body says nothing more |

A 400 names the parameter (`parameter`) and says why; an ambiguous symbol also lists the
`candidates`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Scope

log = logging.getLogger("rest")

JSON_TYPE = "application/json"


class ApiError(Exception):
    """An answer other than 2xx/304, raised anywhere below a handler."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        self.extra = extra

    @classmethod
    def bad(cls, parameter: str, why: str) -> ApiError:
        return cls(400, "invalid_parameter", f"{parameter}: {why}", parameter=parameter)

    @classmethod
    def not_found(cls, code: str, message: str) -> ApiError:
        return cls(404, code, message)

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}

    def response(self) -> Response:
        headers = {"Cache-Control": "no-store", **self.headers}
        return Response(
            orjson.dumps(self.body()), self.status, headers=headers, media_type=JSON_TYPE
        )


def not_synced(message: str) -> ApiError:
    return ApiError(503, "not_synced", message, headers={"Retry-After": "30"})


def database_unavailable(message: str) -> ApiError:
    return ApiError(503, "database_unavailable", message, headers={"Retry-After": "5"})


async def on_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def on_http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no route) and 405 (wrong method), as JSON."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        error = ApiError(
            405,
            "method_not_allowed",
            f"{request.method} is not allowed on {request.url.path}",
            headers=exc.headers,
        )
    elif exc.status_code == 404:
        error = ApiError(404, "not_found", f"no such endpoint: {request.url.path}")
    else:
        error = ApiError(exc.status_code, "http_error", str(exc.detail), headers=exc.headers)
    return error.response()


def internal_error(scope: Scope) -> ASGIApp:
    """What `CatchAll` answers in the data API: a bare `internal_error`, traceback in the log."""
    return ApiError(500, "internal_error", "internal error (logged on the server)").response()
