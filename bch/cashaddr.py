"""CashAddr: the `prefix:base32` address format, including token-aware and P2SH32 kinds.

Two layers: `encode_cashaddr`/`decode_cashaddr` move (prefix, version byte, hash) in and out of
text for any prefix and version (the official vectors exercise unknown ones), while `Address`
only admits the six kinds that map to a standard locking bytecode, so anything built from it
can be paid to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from bch.script import ScriptKind, classify_locking, p2pkh_locking, p2sh20_locking, p2sh32_locking

CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
KNOWN_PREFIXES = ("bitcoincash", "bchtest", "bchreg")
HASH_SIZES = (20, 24, 28, 32, 40, 48, 56, 64)  # indexed by the version byte's size code

_CHAR_VALUE = {c: i for i, c in enumerate(CHARSET)}
_GENERATORS = (0x98F2BC8E61, 0x79B76D99E2, 0xF33E5FB3C4, 0xAE2EABE2A8, 0x1E4F43E470)


def _generator_xor(top: int) -> int:
    acc = 0
    for bit, generator in enumerate(_GENERATORS):
        if top >> bit & 1:
            acc ^= generator
    return acc


# The XOR of generators for every 5-bit value shifted out of the state: one lookup per symbol.
_POLYMOD_TABLE = tuple(_generator_xor(top) for top in range(32))
_MASK35 = 0x07FFFFFFFF
_CHECKSUM_LEN = 8
# Longest payload: version byte + 64-byte hash = 520 bits → 104 characters, plus the checksum.
_MAX_DATA_CHARS = 104 + _CHECKSUM_LEN
_PREFIX_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


class CashAddrError(ValueError):
    """An address (or the parts to build one) is not valid CashAddr."""


def _polymod_step(state: int, values: Iterable[int]) -> int:
    table = _POLYMOD_TABLE
    for v in values:
        state = ((state & _MASK35) << 5) ^ v ^ table[state >> 35]
    return state


@lru_cache(maxsize=32)
def _prefix_state(prefix: str) -> int:
    """Checksum state after `prefix` and the separator's 0 (cached: a handful of prefixes)."""
    return _polymod_step(1, [*(ord(c) & 31 for c in prefix), 0])


def _check_prefix(prefix: str) -> None:
    if not prefix:
        raise CashAddrError("missing prefix: expected e.g. 'bitcoincash:' before the payload")
    if not _PREFIX_CHARS.issuperset(prefix):
        raise CashAddrError(f"invalid prefix {prefix!r}: only lowercase letters and digits")


def _check_version(version_byte: int, payload_len: int) -> None:
    if not 0 <= version_byte <= 0x7F:
        raise CashAddrError(
            f"invalid version byte {version_byte:#x}: must be 0..0x7f (the top bit is reserved)"
        )
    expected = HASH_SIZES[version_byte & 7]
    if payload_len != expected:
        raise CashAddrError(
            f"wrong payload length for size code {version_byte & 7}: "
            f"expected {expected} bytes, got {payload_len}"
        )


def _to_5bit(data: bytes) -> list[int]:
    """Regroup bytes into 5-bit values, zero-padding the last group."""
    nbits = 8 * len(data)
    pad = -nbits % 5
    acc = int.from_bytes(data, "big") << pad
    count = (nbits + pad) // 5
    return [(acc >> (5 * (count - 1 - i))) & 31 for i in range(count)]


def encode_cashaddr(prefix: str, version_byte: int, payload: bytes) -> str:
    """Encode a hash as `prefix:…`; the version byte's size code must match the payload."""
    _check_prefix(prefix)
    _check_version(version_byte, len(payload))
    data = _to_5bit(bytes((version_byte,)) + payload)
    state = _polymod_step(_prefix_state(prefix), data)
    checksum = _polymod_step(state, (0,) * _CHECKSUM_LEN) ^ 1
    chars = [CHARSET[v] for v in data]
    chars += [CHARSET[(checksum >> (5 * (7 - i))) & 31] for i in range(_CHECKSUM_LEN)]
    return f"{prefix}:{''.join(chars)}"


def decode_cashaddr(address: str, default_prefix: str = "bitcoincash") -> tuple[str, int, bytes]:
    """Decode `prefix:payload` (or a bare payload, checked against `default_prefix`).

    Returns (prefix, version byte, hash). The whole string must be one case; upper-case input
    is accepted and reported in lower case.
    """
    text = address.lower()
    if text != address and address.upper() != address:
        raise CashAddrError("mixed case: an address must be all lower case or all upper case")
    prefix, sep, body = text.rpartition(":")
    if not sep:
        prefix = default_prefix
    _check_prefix(prefix)
    if len(body) <= _CHECKSUM_LEN:
        raise CashAddrError(f"too short: {len(body)} characters after the prefix")
    if len(body) > _MAX_DATA_CHARS:
        raise CashAddrError(f"too long: {len(body)} characters after the prefix")
    try:
        values = [_CHAR_VALUE[c] for c in body]
    except KeyError as exc:
        i = body.index(exc.args[0])
        raise CashAddrError(
            f"invalid character {body[i]!r} at position {len(text) - len(body) + i}"
        ) from None
    if _polymod_step(_prefix_state(prefix), values) != 1:
        given = "" if sep else "; no prefix was given"
        raise CashAddrError(f"bad checksum for prefix {prefix!r}{given}")
    data = values[:-_CHECKSUM_LEN]
    nbits = 5 * len(data)
    pad = nbits % 8
    acc = 0
    for v in data:
        acc = (acc << 5) | v
    if pad >= 5:
        raise CashAddrError("invalid padding: more than 4 bits of padding")
    if acc & ((1 << pad) - 1):
        raise CashAddrError("non-zero padding bits")
    raw = (acc >> pad).to_bytes(nbits // 8, "big")
    version_byte, payload = raw[0], raw[1:]
    if version_byte & 0x80:
        raise CashAddrError(f"invalid version byte {version_byte:#x}: reserved bit is set")
    _check_version(version_byte, len(payload))
    return prefix, version_byte, payload


class AddressKind(Enum):
    P2PKH = "p2pkh"
    P2SH20 = "p2sh20"
    P2SH32 = "p2sh32"


_TYPE_P2SH = 1
_TYPE_TOKEN_AWARE = 2
_HASH_LEN = {AddressKind.P2PKH: 20, AddressKind.P2SH20: 20, AddressKind.P2SH32: 32}
_SIZE_CODE = {20: 0, 32: 3}
_FROM_SCRIPT_KIND = {
    ScriptKind.P2PKH: AddressKind.P2PKH,
    ScriptKind.P2SH20: AddressKind.P2SH20,
    ScriptKind.P2SH32: AddressKind.P2SH32,
}


@dataclass(frozen=True, slots=True)
class Address:
    """A payable address: P2PKH, P2SH20 or P2SH32, plain or token-aware, on one network."""

    kind: AddressKind
    hash: bytes
    token_aware: bool = False
    prefix: str = "bitcoincash"

    def __post_init__(self) -> None:
        expected = _HASH_LEN[self.kind]
        if len(self.hash) != expected:
            raise CashAddrError(
                f"{self.kind.name} needs a {expected}-byte hash, got {len(self.hash)}"
            )
        _check_prefix(self.prefix)

    @property
    def version_byte(self) -> int:
        addr_type = (_TYPE_P2SH if self.kind is not AddressKind.P2PKH else 0) | (
            _TYPE_TOKEN_AWARE if self.token_aware else 0
        )
        return addr_type << 3 | _SIZE_CODE[len(self.hash)]

    def encode(self) -> str:
        return encode_cashaddr(self.prefix, self.version_byte, self.hash)

    def __str__(self) -> str:
        return self.encode()

    def locking_bytecode(self) -> bytes:
        if self.kind is AddressKind.P2PKH:
            return p2pkh_locking(self.hash)
        if self.kind is AddressKind.P2SH20:
            return p2sh20_locking(self.hash)
        return p2sh32_locking(self.hash)

    def with_token_awareness(self, flag: bool) -> Address:
        return dataclasses.replace(self, token_aware=flag)

    @classmethod
    def decode(cls, text: str, *, prefix: str | None = None) -> Address:
        """Parse an address; with `prefix`, require that network, else any known network.

        A bare payload (no `prefix:`) is checked against `prefix`, or `bitcoincash`.
        """
        got, version_byte, payload = decode_cashaddr(text, prefix or "bitcoincash")
        if prefix is not None and got != prefix:
            raise CashAddrError(f"wrong prefix {got!r}: expected {prefix!r}")
        if prefix is None and got not in KNOWN_PREFIXES:
            raise CashAddrError(f"unknown prefix {got!r}: expected one of {KNOWN_PREFIXES}")
        addr_type = version_byte >> 3
        if addr_type > 3:
            raise CashAddrError(
                f"unknown version type {addr_type} (version byte {version_byte:#x})"
            )
        token_aware = bool(addr_type & _TYPE_TOKEN_AWARE)
        if not addr_type & _TYPE_P2SH:
            kind = AddressKind.P2PKH
        elif len(payload) == 20:
            kind = AddressKind.P2SH20
        else:
            kind = AddressKind.P2SH32
        if len(payload) != _HASH_LEN[kind]:
            raise CashAddrError(
                f"unsupported hash length {len(payload)} for a "
                f"{'P2SH' if addr_type & _TYPE_P2SH else 'P2PKH'} address"
            )
        return cls(kind, payload, token_aware, got)

    @classmethod
    def from_locking(
        cls, bytecode: bytes, *, token_aware: bool = False, prefix: str = "bitcoincash"
    ) -> Address | None:
        """The address paying to `bytecode`, or None if it is not a standard template."""
        script_kind, script_hash = classify_locking(bytecode)
        kind = _FROM_SCRIPT_KIND.get(script_kind)
        if kind is None:
            return None
        return cls(kind, script_hash, token_aware, prefix)


def address_to_locking(text: str) -> bytes:
    """Locking bytecode for an address on any known network."""
    return Address.decode(text).locking_bytecode()


def locking_to_address(
    bytecode: bytes, *, token_aware: bool = False, prefix: str = "bitcoincash"
) -> str | None:
    """CashAddr for a standard locking bytecode, or None for anything else."""
    addr = Address.from_locking(bytecode, token_aware=token_aware, prefix=prefix)
    return None if addr is None else addr.encode()
