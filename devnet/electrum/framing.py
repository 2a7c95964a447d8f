"""JSON-RPC 2.0 framing: one message per TCP line or WebSocket text frame.

Parsing is separated from dispatch so both transports share exactly the same rules: batches,
notifications (no `id`), and rejection of float or structured ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from devnet.electrum.errors import INVALID_REQUEST, PARSE_ERROR, RpcError

RequestId = int | str | None


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    params: list[Any] | dict[str, Any]
    id: RequestId
    is_notification: bool  # the client sent no id: it gets no response


@dataclass(frozen=True, slots=True)
class Invalid:
    """An element that cannot be dispatched; answered with `error` under `id`."""

    id: RequestId
    error: RpcError


Item = Request | Invalid


def strip_frame(text: str | bytes) -> bytes:
    """A WebSocket frame may carry a trailing newline; a TCP line always does."""
    raw = text.encode() if isinstance(text, str) else text
    return raw.rstrip(b"\r\n")


def parse_message(raw: bytes) -> tuple[bool, list[Item]]:
    """Parse one message into (is_batch, items). A parse error is one Invalid item."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False, [Invalid(None, RpcError(PARSE_ERROR, "Parse error"))]
    if isinstance(obj, list):
        if not obj:
            return False, [Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request: empty batch"))]
        return True, [_parse_one(o) for o in obj]
    return False, [_parse_one(obj)]


def _parse_one(obj: object) -> Item:
    if not isinstance(obj, dict):
        return Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request: not an object"))
    has_id = "id" in obj
    raw_id = obj.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, int | str | None):
        # Floats are rejected like Fulcrum does; objects and arrays are never valid ids.
        return Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request: id must be int or string"))
    req_id: RequestId = raw_id
    if obj.get("jsonrpc", "2.0") != "2.0":
        return Invalid(req_id, RpcError(INVALID_REQUEST, "Invalid Request: jsonrpc must be 2.0"))
    method = obj.get("method")
    if not isinstance(method, str):
        return Invalid(req_id, RpcError(INVALID_REQUEST, "Invalid Request: method missing"))
    params = obj.get("params", [])
    if params is None:
        params = []
    if not isinstance(params, list | dict):
        return Invalid(
            req_id, RpcError(INVALID_REQUEST, "Invalid Request: params must be array or object")
        )
    return Request(method, params, req_id, not has_id)


def result_message(req_id: RequestId, result: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": req_id, "result": result}


def error_message(req_id: RequestId, error: RpcError) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": req_id, "error": error.to_json()}


def notification(method: str, params: list[object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def encode(message: object) -> bytes:
    return orjson.dumps(message)
