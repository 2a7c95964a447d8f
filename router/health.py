"""Plain HTTP on the router's WebSocket port: `GET /health` (JSON) and `GET /metrics`
(Prometheus text), answered in the handshake hook (`process_request`) so that monitoring needs
no WebSocket client. A request asking for a WebSocket upgrade on those paths is a WebSocket
connection like any other."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import orjson
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from runtime.metrics import CONTENT_TYPE


def is_plain_get(request: Request, path: str) -> bool:
    """`GET path` (query string ignored) without an upgrade to WebSocket."""
    if request.path.split("?", 1)[0] != path:
        return False
    return "websocket" not in request.headers.get("Upgrade", "").lower()


def _response(status: HTTPStatus, body: bytes, content_type: str) -> Response:
    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("Connection", "close"),
        ]
    )
    return Response(status.value, status.phrase, headers, body)


def health_response(doc: dict[str, Any]) -> Response:
    """200 while the router answers from a fresh snapshot, 503 while it is stale."""
    status = HTTPStatus.OK if doc.get("status") == "ok" else HTTPStatus.SERVICE_UNAVAILABLE
    return _response(status, orjson.dumps(doc), "application/json")


def metrics_response(text: bytes) -> Response:
    return _response(HTTPStatus.OK, text, CONTENT_TYPE)
