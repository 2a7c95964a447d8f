"""The broadcast API's error codes (the spec's, upper case) and their statuses, answered as
`{"error": {"code", "message", "details"?}, …}` (`runtime.errors.ApiError`)."""

from __future__ import annotations

from typing import Any

from runtime.errors import ApiError

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


def broadcast_error(
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> ApiError:
    """The broadcast API's error: its status follows from `code`; `details` go inside the error
    object, `extra` (txid, diagnosis) beside it."""
    return ApiError(
        HTTP_STATUS[code],
        code,
        message,
        fields=None if details is None else {"details": details},
        members=extra,
    )
