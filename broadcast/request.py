"""The body of `POST /broadcast`, checked before anything else happens.

Unknown members are refused rather than ignored: a misspelt `dry_run` must not turn a test into
a real broadcast.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

from broadcast.errors import BAD_REQUEST, ApiError
from broadcast.protection import Protection

FIELDS = ("tx", "dry_run", "diagnosis", "protection")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")
_TXID = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True, slots=True)
class BroadcastRequest:
    tx_hex: str  # lower-case, even length, non-empty
    dry_run: bool = False
    diagnosis: bool = False
    protection: Protection | None = None  # None: the service's default rules


def _bad(message: str) -> ApiError:
    return ApiError(BAD_REQUEST, message)


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
    tx = tx.strip()
    if not tx:
        raise _bad('"tx" is empty')
    if len(tx) % 2:
        raise _bad(f'"tx" has an odd number of hex digits ({len(tx)})')
    if _HEX.fullmatch(tx) is None:
        raise _bad('"tx" is not hexadecimal')
    flags = {}
    for key in ("dry_run", "diagnosis"):
        value = obj.get(key, False)
        if not isinstance(value, bool):
            raise _bad(f'"{key}" must be true or false')
        flags[key] = value
    protection = None
    if obj.get("protection") is not None:
        try:
            protection = Protection.from_json(obj["protection"])
        except ValueError as exc:
            raise _bad(str(exc)) from None
    return BroadcastRequest(tx.lower(), protection=protection, **flags)


def check_txid(text: str) -> str:
    """A display-order txid from a URL, lower-cased; BAD_REQUEST otherwise."""
    if _TXID.fullmatch(text) is None:
        raise _bad(f"a txid is 64 hexadecimal characters, got {text[:80]!r}")
    return text.lower()
