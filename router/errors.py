"""The router's error codes and the one exception type that carries them to a client.

Every failure a wallet can see is a `RouterError` whose code says what to do next: fix the
request (`bad_request`), try another order (`route_failed`), add coins (`insufficient_funds`),
accept a worse price (`slippage`) or report a bug to us (`build_failed`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    BAD_REQUEST = "bad_request"
    ROUTE_FAILED = "route_failed"
    INSUFFICIENT_FUNDS = "insufficient_funds"
    BUILD_FAILED = "build_failed"
    SLIPPAGE = "slippage"
    # Daemon-level codes (the WebSocket layer raises these; listed so every code lives here).
    RATE_LIMITED = "rate_limited"
    NOT_FOUND = "not_found"
    # The pool snapshot lags the best chain tip heard of beyond the daemon's bound (an extension
    # of the spec's codes, see docs/router.md): nothing is quoted or built from it.
    STALE_SNAPSHOT = "stale_snapshot"


class RouterError(Exception):
    """A failure with a machine-readable code, a sentence for humans and optional `data`."""

    def __init__(
        self, code: ErrorCode, message: str, data: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = dict(data) if data is not None else None

    def to_json(self) -> dict[str, Any]:
        """The protocol's error object: `{"code", "message", "data"?}`."""
        out: dict[str, Any] = {"code": self.code.value, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out

    def __repr__(self) -> str:
        return f"RouterError({self.code.value!r}, {self.message!r})"


def bad_request(message: str, **data: Any) -> RouterError:
    return RouterError(ErrorCode.BAD_REQUEST, message, data or None)


def route_failed(message: str, **data: Any) -> RouterError:
    return RouterError(ErrorCode.ROUTE_FAILED, message, data or None)


def insufficient_funds(message: str, **data: Any) -> RouterError:
    return RouterError(ErrorCode.INSUFFICIENT_FUNDS, message, data or None)


def build_failed(message: str, **data: Any) -> RouterError:
    return RouterError(ErrorCode.BUILD_FAILED, message, data or None)


def slippage(message: str, **data: Any) -> RouterError:
    return RouterError(ErrorCode.SLIPPAGE, message, data or None)
