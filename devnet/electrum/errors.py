"""JSON-RPC and Electrum error codes, and the exception handlers raise to answer with one."""

from __future__ import annotations

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
BAD_REQUEST = 1
DAEMON_ERROR = 2
EXCESSIVE_FLOOD = 3
LIMIT_EXCEEDED = 4

REJECTED_PREFIX = "the transaction was rejected by network rules.\n\n"


class RpcError(Exception):
    """Raised by a method handler; becomes the `error` member of the response."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "message": self.message}


def rejected(node_message: str) -> RpcError:
    """A broadcast rejection worded as Fulcrum wraps the node's reject reason."""
    return RpcError(BAD_REQUEST, f"{REJECTED_PREFIX}{node_message}\n")


def daemon_error(code: int, message: str) -> str:
    """A node's RPC error as Fulcrum relays it (code 2), in the repr ElectrumX used."""
    return f"daemon error: DaemonError({{'code': {code}, 'message': {message!r}}})"


def bad_params(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, message)
