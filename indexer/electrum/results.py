"""Typed values for the JSON results the indexer relies on, and the parsers that check them.

A result that does not have the documented shape raises ElectrumProtocolError: the indexer must
never guess at what a server meant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from bch.hashes import hash256, sha256
from bch.token import TokenData
from bch.tx import OutPoint
from indexer.electrum.errors import ElectrumProtocolError

HEADER_SIZE = 80
SATS_PER_BCH = 100_000_000
TokenFilter = Literal["include_tokens", "exclude_tokens", "tokens_only"]
_HASH_HEX = re.compile(r"[0-9a-fA-F]{64}")


def scripthash(locking_bytecode: bytes) -> str:
    """Electrum's scripthash: sha256 of the locking bytecode *without* any token prefix, byte-
    reversed, in hex."""
    return sha256(locking_bytecode)[::-1].hex()


def is_hash_hex(value: object) -> bool:
    return isinstance(value, str) and _HASH_HEX.fullmatch(value) is not None


def check_hash_hex(value: str, what: str = "hash") -> str:
    """A 64-hex-digit hash as given by the caller, lower-cased; ValueError otherwise."""
    if not is_hash_hex(value):
        raise ValueError(f"{what} must be 64 hex characters, got {value!r}")
    return value.lower()


def hex_bytes(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise ElectrumProtocolError(f"{what}: expected a hex string, got {type(value).__name__}")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise ElectrumProtocolError(f"{what}: not hex: {value[:80]!r}") from None


def _int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ElectrumProtocolError(f"{what}: expected an integer, got {value!r}")
    return value


def _dict(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ElectrumProtocolError(f"{what}: expected an object, got {type(value).__name__}")
    return value


def header_bytes(value: object, what: str = "header") -> bytes:
    raw = hex_bytes(value, what)
    if len(raw) != HEADER_SIZE:
        raise ElectrumProtocolError(f"{what}: {len(raw)} bytes, expected {HEADER_SIZE}")
    return raw


def checked_transaction(value: object, txid: str) -> bytes:
    """Raw transaction bytes from hex, verified to hash to `txid` (display order)."""
    raw = hex_bytes(value, f"transaction {txid}")
    if hash256(raw)[::-1].hex() != txid.lower():
        raise ElectrumProtocolError(f"the server sent a transaction that is not {txid}")
    return raw


@dataclass(frozen=True, slots=True)
class HeaderNotice:
    """A chain tip as `headers.subscribe` / `headers.get_tip` report it."""

    height: int
    header: bytes  # the 80 serialized bytes

    @property
    def hash_hex(self) -> str:
        return hash256(self.header)[::-1].hex()

    @classmethod
    def from_json(cls, value: object) -> HeaderNotice:
        obj = _dict(value, "header notification")
        return cls(_int(obj.get("height"), "height"), header_bytes(obj.get("hex")))


def headers_from_result(value: object) -> list[bytes]:
    """`blockchain.block.headers` result: `{count, hex}` (protocol < 1.6, headers concatenated)
    or `{count, headers: [...]}` (≥ 1.6). Both are accepted."""
    obj = _dict(value, "block.headers result")
    count = _int(obj.get("count"), "count")
    if "headers" in obj:
        items = obj["headers"]
        if not isinstance(items, list):
            raise ElectrumProtocolError("block.headers: `headers` is not a list")
        headers = [header_bytes(h, f"header {i}") for i, h in enumerate(items)]
    elif "hex" in obj:
        blob = hex_bytes(obj["hex"], "block.headers hex")
        if len(blob) % HEADER_SIZE:
            raise ElectrumProtocolError(f"block.headers: {len(blob)} bytes is not whole headers")
        headers = [blob[i : i + HEADER_SIZE] for i in range(0, len(blob), HEADER_SIZE)]
    else:
        raise ElectrumProtocolError("block.headers: neither `headers` nor `hex` in the result")
    if len(headers) != count:
        raise ElectrumProtocolError(f"block.headers: count {count}, got {len(headers)} headers")
    return headers


def _token(value: object) -> TokenData | None:
    if value is None:
        return None
    try:
        return TokenData.from_json(_dict(value, "token_data"))
    except ValueError as exc:
        raise ElectrumProtocolError(f"token_data: {exc}") from None


@dataclass(frozen=True, slots=True)
class Unspent:
    """One `blockchain.scripthash.listunspent` entry."""

    outpoint: OutPoint
    height: int  # 0 (or negative) while unconfirmed
    value: int
    token: TokenData | None

    @classmethod
    def from_json(cls, value: object) -> Unspent:
        obj = _dict(value, "listunspent entry")
        txid = obj.get("tx_hash")
        if not isinstance(txid, str) or not is_hash_hex(txid):
            raise ElectrumProtocolError(f"listunspent: bad tx_hash {txid!r}")
        return cls(
            OutPoint.from_hex(txid, _int(obj.get("tx_pos"), "tx_pos")),
            _int(obj.get("height"), "height"),
            _int(obj.get("value"), "value"),
            _token(obj.get("token_data")),
        )


@dataclass(frozen=True, slots=True)
class UtxoInfo:
    """`blockchain.utxo.get_info` for an unspent output."""

    confirmed_height: int | None  # None while in the mempool
    scripthash: str
    value: int
    token: TokenData | None

    @classmethod
    def from_json(cls, value: object) -> UtxoInfo:
        obj = _dict(value, "utxo info")
        height = obj.get("confirmed_height")
        sh = obj.get("scripthash")
        if not isinstance(sh, str) or not is_hash_hex(sh):
            raise ElectrumProtocolError(f"utxo info: bad scripthash {sh!r}")
        return cls(
            None if height is None else _int(height, "confirmed_height"),
            sh.lower(),
            _int(obj.get("value"), "value"),
            _token(obj.get("token_data")),
        )


def sats_per_kb(value: object) -> int:
    """A fee rate in BCH/kB (how Electrum reports it) → satoshis per 1000 bytes."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ElectrumProtocolError(f"fee rate: expected a non-negative number, got {value!r}")
    return round(value * SATS_PER_BCH)
