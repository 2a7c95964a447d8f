"""Transactions: the immutable model and its exact wire (de)serialization.

Hashes (txids, outpoint txids) are kept in wire order as bytes; the `*_hex` properties give the
reversed display order used by explorers, Electrum and every API.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from bch.encoding import DecodeError, Reader, compact_size, compact_size_len
from bch.hashes import hash256
from bch.token import MAX_TOKEN_AMOUNT, PREFIX_TOKEN, TokenData, decode_token_prefix

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_new = object.__new__
_set = object.__setattr__

MAX_SATS = 21_000_000 * 100_000_000
SEQUENCE_FINAL = 0xFFFFFFFF


def hex_to_hash(display_hex: str) -> bytes:
    """Display-order hex (txid, category, block hash) → wire-order bytes."""
    raw = bytes.fromhex(display_hex)
    if len(raw) != 32:
        raise ValueError(f"expected 32 bytes of hex, got {len(raw)}")
    return raw[::-1]


def hash_to_hex(wire: bytes) -> str:
    return wire[::-1].hex()


class OutPoint(NamedTuple):
    """A transaction output's address. A named tuple, not a dataclass: indexes and snapshots
    hash and compare millions of them, and a tuple does both in C (same hash as the former
    dataclass: `hash((txid, index))`)."""

    txid: bytes  # wire order
    index: int  # type: ignore[assignment]  # shadows tuple.index, which no caller uses

    @property
    def txid_hex(self) -> str:
        return self.txid[::-1].hex()

    @classmethod
    def from_hex(cls, txid_hex: str, index: int) -> OutPoint:
        return cls(hex_to_hash(txid_hex), index)

    def encode(self) -> bytes:
        return self.txid + _U32.pack(self.index)

    def __str__(self) -> str:
        return f"{self.txid_hex}:{self.index}"


@dataclass(frozen=True, slots=True)
class TxInput:
    outpoint: OutPoint
    unlocking: bytes = b""
    sequence: int = SEQUENCE_FINAL
    # The wire bytes, kept once computed: the value is immutable, and a builder serializes,
    # sizes and re-checks the same inputs several times.
    _encoded: bytes | None = field(default=None, init=False, repr=False, compare=False)

    def encode(self) -> bytes:
        encoded = self._encoded
        if encoded is None:
            encoded = b"".join(
                (
                    self.outpoint.txid,
                    _U32.pack(self.outpoint.index),
                    compact_size(len(self.unlocking)),
                    self.unlocking,
                    _U32.pack(self.sequence),
                )
            )
            object.__setattr__(self, "_encoded", encoded)
        return encoded

    def size(self) -> int:
        return 40 + compact_size_len(len(self.unlocking)) + len(self.unlocking)


@dataclass(frozen=True, slots=True)
class TxOutput:
    value: int
    locking: bytes
    token: TokenData | None = None
    # The wire bytes, kept once computed (see `TxInput`); `size` and dust checks reuse them.
    _encoded: bytes | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def script_field(self) -> bytes:
        """What the wire's script field holds: token prefix (if any) then locking bytecode."""
        if self.token is None:
            return self.locking
        return self.token.encode_prefix() + self.locking

    def encode(self) -> bytes:
        encoded = self._encoded
        if encoded is None:
            field_ = self.script_field
            encoded = _U64.pack(self.value) + compact_size(len(field_)) + field_
            object.__setattr__(self, "_encoded", encoded)
        return encoded

    def size(self) -> int:
        return len(self.encode())


@dataclass(frozen=True, slots=True)
class FungibleTemplate:
    """Outputs that differ only in sats and fungible amount (one locking bytecode, one token
    category, no NFT): the bytes they share are joined once, so each output is made with its
    wire bytes already in place (a router re-creates every pool it trades this way)."""

    locking: bytes
    category: bytes
    _head: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        head = TokenData(self.category, 1).encode_prefix()[:-1]  # ef ‖ category ‖ bitfield
        object.__setattr__(self, "_head", head)

    def output(self, value: int, amount: int) -> TxOutput:
        """`TxOutput(value, locking, TokenData(category, amount))`, encoded.

        The two frozen dataclasses are filled slot by slot rather than through their
        `__init__` (half the cost, and a router makes one per pool it trades): the category
        was checked when the template was made, and an amount `TokenData` would refuse is
        still refused by `TokenData` itself. `tests/router/test_fast_paths.py` holds the
        result equal, field for field and byte for byte, to the plain constructors'."""
        category, locking = self.category, self.locking
        if not 0 < amount <= MAX_TOKEN_AMOUNT:
            TokenData(category, amount)  # raises its own error (0 without an NFT, or range)
        token = _new(TokenData)
        _set(token, "category", category)
        _set(token, "amount", amount)
        _set(token, "nft", None)
        amount_bytes = compact_size(amount)
        field_len = len(self._head) + len(amount_bytes) + len(locking)
        out = _new(TxOutput)
        _set(out, "value", value)
        _set(out, "locking", locking)
        _set(out, "token", token)
        _set(
            out,
            "_encoded",
            b"".join(
                (_U64.pack(value), compact_size(field_len), self._head, amount_bytes, locking)
            ),
        )
        return out


def decode_output(reader: Reader) -> TxOutput:
    """Decode one output (value ‖ CompactSize ‖ [token prefix] ‖ locking bytecode)."""
    value = reader.u64("output value")
    length = reader.compact("output script length")
    start = reader.pos
    end = start + length
    if end > reader.end:
        raise DecodeError(f"output script: needs {length} bytes, {reader.end - start} remain")
    buf = reader.buf
    if length and buf[start] == PREFIX_TOKEN:
        sub = Reader(buf, start, end)
        token = decode_token_prefix(sub)
        locking = buf[sub.pos : end]
    else:
        token = None
        locking = buf[start:end]
    reader.pos = end
    return TxOutput(value, locking, token)


def encode_outputs(outputs: Iterable[TxOutput]) -> bytes:
    """CompactSize count ‖ outputs: the `sourceOutputs` encoding of libauth's VMB tests."""
    items = list(outputs)
    return compact_size(len(items)) + b"".join(o.encode() for o in items)


def decode_outputs(raw: bytes) -> list[TxOutput]:
    reader = Reader(raw)
    count = reader.compact("output count")
    outs = [decode_output(reader) for _ in range(count)]
    if reader.remaining():
        raise DecodeError(f"{reader.remaining()} trailing bytes after outputs")
    return outs


@dataclass(frozen=True, slots=True)
class Transaction:
    version: int
    inputs: tuple[TxInput, ...]
    outputs: tuple[TxOutput, ...]
    locktime: int = 0
    # The bytes this transaction was parsed from, so re-encoding and hashing are free and exact.
    raw: bytes | None = field(default=None, compare=False, repr=False)

    @classmethod
    def build(
        cls,
        inputs: Sequence[TxInput],
        outputs: Sequence[TxOutput],
        *,
        version: int = 2,
        locktime: int = 0,
    ) -> Transaction:
        return cls(version, tuple(inputs), tuple(outputs), locktime)

    def replace(self, **changes: Any) -> Transaction:
        """A copy with fields changed and the cached `raw` dropped.

        Use this, never `dataclasses.replace`, which would keep the old bytes (and old txid).
        """
        changes.setdefault("raw", None)
        return dataclasses.replace(self, **changes)

    def to_bytes(self) -> bytes:
        if self.raw is not None:
            return self.raw
        parts = [_I32.pack(self.version), compact_size(len(self.inputs))]
        parts += [i.encode() for i in self.inputs]
        parts.append(compact_size(len(self.outputs)))
        parts += [o.encode() for o in self.outputs]
        parts.append(_U32.pack(self.locktime))
        return b"".join(parts)

    def hex(self) -> str:
        return self.to_bytes().hex()

    @property
    def txid(self) -> bytes:
        """Wire-order hash; `txid_hex` is the display form."""
        return hash256(self.to_bytes())

    @property
    def txid_hex(self) -> str:
        return hash256(self.to_bytes())[::-1].hex()

    def size(self) -> int:
        return len(self.to_bytes())

    @classmethod
    def from_bytes(cls, raw: bytes) -> Transaction:
        """Parse exactly one transaction; trailing bytes are an error."""
        tx, end = parse_transaction(raw, 0)
        if end != len(raw):
            raise DecodeError(f"{len(raw) - end} trailing bytes after the transaction")
        return tx

    @classmethod
    def from_hex(cls, tx_hex: str) -> Transaction:
        try:
            raw = bytes.fromhex(tx_hex)
        except ValueError:
            raise DecodeError("transaction hex is not valid hexadecimal") from None
        return cls.from_bytes(raw)


def parse_transaction(buf: bytes, pos: int = 0) -> tuple[Transaction, int]:
    """Parse a transaction starting at `pos`; return it and the offset just after it."""
    reader = Reader(buf, pos)
    version = reader.i32("version")
    n_in = reader.compact("input count")
    if n_in > reader.remaining() // 41:
        raise DecodeError(f"input count {n_in} exceeds what the remaining bytes can hold")
    inputs = []
    for _ in range(n_in):
        txid = reader.take(32, "previous txid")
        index = reader.u32("previous output index")
        unlocking = reader.var_bytes("unlocking bytecode")
        sequence = reader.u32("sequence")
        inputs.append(TxInput(OutPoint(txid, index), unlocking, sequence))
    n_out = reader.compact("output count")
    if n_out > reader.remaining() // 9:
        raise DecodeError(f"output count {n_out} exceeds what the remaining bytes can hold")
    outputs = [decode_output(reader) for _ in range(n_out)]
    locktime = reader.u32("locktime")
    end = reader.pos
    raw = buf[pos:end] if (pos or end != len(buf)) else buf
    return Transaction(version, tuple(inputs), tuple(outputs), locktime, bytes(raw)), end
