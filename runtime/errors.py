"""The one error type of the HTTP APIs (data API and broadcast API).

Every error answer is one JSON object, `{"error": {"code", "message", …fields}, …members}`:
`fields` are further members of the error object, `members` sit beside it. Each API fixes its
own body shape and codes through that one parameterisation, in its own module — the data API
(`rest.errors`) names the parameter at fault inside the error object (`parameter`,
`candidates`); the broadcast API (`broadcast.errors`) puts `details` there and the transaction's
`txid` beside it. The codes are the spec's (service-spec.md), each API's in its own style.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.responses import Response

JSON_TYPE = "application/json"


class ApiError(Exception):
    """An answer other than 2xx/304, raised anywhere below a handler."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        fields: Mapping[str, Any] | None = None,
        members: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.fields = dict(fields or {})  # inside the error object, after code and message
        self.members = dict(members or {})  # beside the error object
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {
            "error": {"code": self.code, "message": self.message, **self.fields},
            **self.members,
        }

    def response(self, headers: Mapping[str, str] | None = None) -> Response:
        """The JSON answer; `headers` (the API's own, e.g. `Cache-Control`) come first, the
        error's own after them."""
        return Response(
            orjson.dumps(self.body()),
            self.status,
            headers={**(headers or {}), **self.headers},
            media_type=JSON_TYPE,
        )

    def __repr__(self) -> str:
        return f"ApiError({self.status}, {self.code!r}, {self.message!r})"
