"""API errors: an HTTP status, a machine-readable code and a message, answered as
`{"error": {"code", "message", "details"?}, …}`."""

from __future__ import annotations

from typing import Any

BAD_REQUEST = "BAD_REQUEST"
REJECTED = "REJECTED"
BROADCAST_FAILED = "BROADCAST_FAILED"
PROTECTION_REJECTED = "PROTECTION_REJECTED"
TRANSACTION_NOT_FOUND = "TRANSACTION_NOT_FOUND"
PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
NOT_FOUND = "NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
INTERNAL_ERROR = "INTERNAL_ERROR"

# The HTTP status each code is answered with.
HTTP_STATUS = {
    BAD_REQUEST: 400,
    TRANSACTION_NOT_FOUND: 404,
    NOT_FOUND: 404,
    METHOD_NOT_ALLOWED: 405,
    PAYLOAD_TOO_LARGE: 413,
    UNSUPPORTED_MEDIA_TYPE: 415,
    REJECTED: 422,
    PROTECTION_REJECTED: 422,
    BROADCAST_FAILED: 502,
    INTERNAL_ERROR: 503,
}


class ApiError(Exception):
    """Raised anywhere below the HTTP layer; `extra` adds top-level members (txid,
    diagnosis) next to `error`."""

    def __init__(
        self,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        self.extra = extra or {}

    @property
    def status(self) -> int:
        return HTTP_STATUS[self.code]

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error, **self.extra}
