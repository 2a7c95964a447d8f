"""The body of `POST /broadcast`, checked before anything else happens.

Exact rather than forgiving: what is not the documented shape is refused, not repaired. Unknown
members are refused because a misspelt `dry_run` must not turn a test into a real broadcast;
`tx` is taken as sent (no trimming), so the bytes the client signed are the bytes checked; and a
body declared in another charset is refused rather than read as UTF-8 and misread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from broadcast.errors import BAD_REQUEST, UNSUPPORTED_MEDIA_TYPE, broadcast_error
from broadcast.protection import Protection
from runtime.errors import ApiError

FIELDS = ("tx", "dry_run", "diagnosis", "protection")
_NOT_HEX = re.compile(r"[^0-9a-fA-F]")
_TXID = re.compile(r"[0-9a-fA-F]{64}")
JSON_TYPE = "application/json"
# RFC 9110 media-type parameter: token "=" (token / quoted-string).
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_PARAMETER = re.compile(rf'({_TOKEN})=({_TOKEN}|"(?:[^"\\]|\\.)*")')


@dataclass(frozen=True, slots=True)
class BroadcastRequest:
    tx_hex: str  # lower-case, even length, non-empty
    dry_run: bool = False
    diagnosis: bool = False
    protection: Protection | None = None  # None: the service's default rules


def _bad(message: str) -> ApiError:
    return broadcast_error(BAD_REQUEST, message)


def parse_request(body: bytes) -> BroadcastRequest:
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise _bad(f"the body is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise _bad('the body must be a JSON object: {"tx": "<hex>"}')
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        raise _bad(f"unknown field(s) {', '.join(unknown)}; known: {', '.join(FIELDS)}")
    if "tx" not in obj:
        raise _bad('missing "tx": the raw transaction as hex')
    tx = obj["tx"]
    if not isinstance(tx, str):
        raise _bad('"tx" must be a string of hex')
    if not tx:
        raise _bad('"tx" is empty')
    bad = _NOT_HEX.search(tx)
    if bad is not None:
        raise _bad(
            f'"tx" is not hexadecimal: character {bad.start()} is {bad.group()!r} '
            "(nothing is trimmed: send the hex alone)"
        )
    if len(tx) % 2:
        raise _bad(f'"tx" has an odd number of hex digits ({len(tx)})')
    flags = {}
    for key in ("dry_run", "diagnosis"):
        value = obj.get(key, False)
        if not isinstance(value, bool):
            raise _bad(f'"{key}" must be true or false')
        flags[key] = value
    protection = None  # absent or null: the service's default rules
    if obj.get("protection") is not None:
        try:
            protection = Protection.from_json(obj["protection"])
        except ValueError as exc:
            raise _bad(str(exc)) from None
    return BroadcastRequest(tx.lower(), protection=protection, **flags)


def check_content_type(values: list[str]) -> None:
    """UNSUPPORTED_MEDIA_TYPE unless the request has one Content-Type, `application/json`,
    whose only parameter (if any) is `charset=utf-8` (case-insensitive, quoted or not)."""
    if len(values) != 1:
        found = "none" if not values else f"{len(values)} headers"
        raise broadcast_error(
            UNSUPPORTED_MEDIA_TYPE, f"Content-Type must be {JSON_TYPE}, got {found}"
        )
    value = values[0]
    media_type, *parameters = value.split(";")
    if media_type.strip(" \t").lower() != JSON_TYPE:
        raise broadcast_error(
            UNSUPPORTED_MEDIA_TYPE, f"Content-Type must be {JSON_TYPE}, got {value[:100]!r}"
        )
    for parameter in parameters:
        parameter = parameter.strip(" \t")
        if not parameter:
            continue  # RFC 9110 allows empty parameters ("application/json;")
        match = _PARAMETER.fullmatch(parameter)
        if match is None or match.group(1).lower() != "charset":
            raise broadcast_error(
                UNSUPPORTED_MEDIA_TYPE,
                "the only Content-Type parameter accepted is charset=utf-8, "
                f"got {parameter[:100]!r}",
            )
        charset = match.group(2)
        if charset.startswith('"'):
            charset = re.sub(r"\\(.)", r"\1", charset[1:-1])
        if charset.lower() != "utf-8":
            raise broadcast_error(
                UNSUPPORTED_MEDIA_TYPE,
                f"the body must be UTF-8 JSON; charset {charset[:100]!r} is not accepted",
            )


def check_txid(text: str) -> str:
    """A display-order txid from a URL, lower-cased; BAD_REQUEST otherwise."""
    if _TXID.fullmatch(text) is None:
        raise _bad(f"a txid is 64 hexadecimal characters, got {text[:80]!r}")
    return text.lower()
