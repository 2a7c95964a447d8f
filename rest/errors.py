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

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Scope

from runtime.errors import ApiError

log = logging.getLogger("rest")

# Every data API error is uncacheable.
_HEADERS = {"Cache-Control": "no-store"}


def bad_parameter(parameter: str, why: str) -> ApiError:
    """400 `invalid_parameter`, naming the parameter."""
    return ApiError(
        400, "invalid_parameter", f"{parameter}: {why}", fields={"parameter": parameter}
    )


def not_found(code: str, message: str) -> ApiError:
    return ApiError(404, code, message)


def error_response(error: ApiError) -> Response:
    """The data API's answer for `error`: its JSON body, never cached."""
    return error.response(_HEADERS)


def not_synced(message: str) -> ApiError:
    return ApiError(503, "not_synced", message, headers={"Retry-After": "30"})


def database_unavailable(message: str) -> ApiError:
    return ApiError(503, "database_unavailable", message, headers={"Retry-After": "5"})


async def on_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc)


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
    return error_response(error)


def internal_error(scope: Scope) -> ASGIApp:
    """What `CatchAll` answers in the data API: a bare `internal_error`, traceback in the log."""
    return error_response(ApiError(500, "internal_error", "internal error (logged on the server)"))
