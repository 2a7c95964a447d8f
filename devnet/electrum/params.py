"""Parameter converters shared by the method handlers: wrong shapes answer -32602."""

from __future__ import annotations

from bch.tx import hex_to_hash
from devnet.electrum.errors import bad_params


def as_int(value: object, name: str, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_params(f"{name} must be an integer")
    if minimum is not None and value < minimum:
        raise bad_params(f"{name} must be at least {minimum}")
    return value


def as_bool(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise bad_params(f"{name} must be a boolean")
    return value


def as_str(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise bad_params(f"{name} must be a string")
    return value


def as_hash(value: object, name: str) -> bytes:
    """A display-order 32-byte hash (txid, block hash) → wire-order bytes."""
    text = as_str(value, name)
    try:
        return hex_to_hash(text)
    except ValueError:
        raise bad_params(f"{name} must be 64 hex characters") from None


def as_scripthash(value: object) -> bytes:
    """Electrum scripthash hex (reversed sha256) → the sha256 bytes the index is keyed by."""
    return as_hash(value, "scripthash")


def as_hex(value: object, name: str) -> bytes:
    text = as_str(value, name)
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise bad_params(f"{name} must be hex") from None


def parse_version(text: str) -> tuple[int, ...]:
    try:
        parts = tuple(int(p) for p in text.split("."))
    except ValueError:
        raise bad_params(f"invalid protocol version {text!r}") from None
    if not parts or len(parts) > 3:
        raise bad_params(f"invalid protocol version {text!r}")
    return parts


def format_version(version: tuple[int, ...]) -> str:
    return ".".join(str(p) for p in version)
