"""The BCH signing serialization ("sighash" preimage) and its digest.

A transaction's shared hashes (prevouts, sequences, spent UTXOs, outputs) are computed once per
transaction by `SighashCache`, so signing or verifying every input is O(n) rather than O(n²).
`signing_preimage` keeps a one-entry cache keyed on object identity so that a loop calling it for
each input of the same transaction gets the same benefit without managing a cache itself.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from bch.encoding import DecodeError, compact_size
from bch.hashes import hash256
from bch.script import (
    OP_CHECKMULTISIG,
    OP_CHECKSIG,
    OP_CODESEPARATOR,
    OP_PUSHDATA1,
    OP_PUSHDATA2,
    OP_PUSHDATA4,
    ScriptKind,
    classify_locking,
    pushes,
)
from bch.tx import Transaction, TxOutput

SIGHASH_ALL = 0x01
SIGHASH_NONE = 0x02
SIGHASH_SINGLE = 0x03
SIGHASH_UTXOS = 0x20
SIGHASH_FORKID = 0x40
SIGHASH_ANYONECANPAY = 0x80
SIGHASH_DEFAULT = SIGHASH_ALL | SIGHASH_UTXOS | SIGHASH_FORKID  # 0x61: what covenant trades use

VALID_SIGHASH_TYPES = frozenset({0x41, 0x42, 0x43, 0xC1, 0xC2, 0xC3, 0x61, 0x62, 0x63})

_BASE_MASK = 0x1F
_ZERO32 = bytes(32)
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")


def is_valid_sighash_type(t: int) -> bool:
    """FORKID is mandatory; UTXOS may not combine with ANYONECANPAY; base type 1..3."""
    return t in VALID_SIGHASH_TYPES


class SighashCache:
    """Per-transaction hashes shared by every input's preimage, computed lazily and once.

    Holds (tx, source_outputs); both must not change while the cache is in use (the model types
    are immutable, so this only concerns a caller mutating the `source_outputs` list).
    """

    __slots__ = (
        "_hash_outputs",
        "_hash_prevouts",
        "_hash_sequence",
        "_hash_utxos",
        "_locktime",
        "_version",
        "source_outputs",
        "tx",
    )

    def __init__(self, tx: Transaction, source_outputs: Sequence[TxOutput]) -> None:
        if len(source_outputs) != len(tx.inputs):
            raise ValueError(
                f"source_outputs has {len(source_outputs)} entries for {len(tx.inputs)} inputs"
            )
        self.tx = tx
        self.source_outputs: tuple[TxOutput, ...] = tuple(source_outputs)
        self._version = _I32.pack(tx.version)
        self._locktime = _U32.pack(tx.locktime)
        self._hash_prevouts: bytes | None = None
        self._hash_sequence: bytes | None = None
        self._hash_utxos: bytes | None = None
        self._hash_outputs: bytes | None = None

    @property
    def hash_prevouts(self) -> bytes:
        if self._hash_prevouts is None:
            self._hash_prevouts = hash256(b"".join(i.outpoint.encode() for i in self.tx.inputs))
        return self._hash_prevouts

    @property
    def hash_sequence(self) -> bytes:
        if self._hash_sequence is None:
            self._hash_sequence = hash256(b"".join(_U32.pack(i.sequence) for i in self.tx.inputs))
        return self._hash_sequence

    @property
    def hash_utxos(self) -> bytes:
        if self._hash_utxos is None:
            self._hash_utxos = hash256(b"".join(o.encode() for o in self.source_outputs))
        return self._hash_utxos

    @property
    def hash_outputs(self) -> bytes:
        if self._hash_outputs is None:
            self._hash_outputs = hash256(b"".join(o.encode() for o in self.tx.outputs))
        return self._hash_outputs

    def preimage(self, input_index: int, sighash_type: int, script_code: bytes) -> bytes:
        """The exact signing serialization of one input (see bch-wire.md, preimage table)."""
        if not is_valid_sighash_type(sighash_type):
            raise ValueError(f"invalid sighash type {sighash_type:#04x}")
        tx = self.tx
        if not 0 <= input_index < len(tx.inputs):
            raise ValueError(f"input index {input_index} out of range ({len(tx.inputs)} inputs)")
        base = sighash_type & _BASE_MASK
        anyone_can_pay = bool(sighash_type & SIGHASH_ANYONECANPAY)
        txin = tx.inputs[input_index]
        spent = self.source_outputs[input_index]

        parts = [self._version, _ZERO32 if anyone_can_pay else self.hash_prevouts]
        if sighash_type & SIGHASH_UTXOS:
            parts.append(self.hash_utxos)
        parts.append(self.hash_sequence if base == SIGHASH_ALL and not anyone_can_pay else _ZERO32)
        parts.append(txin.outpoint.encode())
        if spent.token is not None:
            parts.append(spent.token.encode_prefix())
        parts += (compact_size(len(script_code)), script_code)
        parts += (_U64.pack(spent.value), _U32.pack(txin.sequence))
        if base == SIGHASH_ALL:
            parts.append(self.hash_outputs)
        elif base == SIGHASH_SINGLE and input_index < len(tx.outputs):
            parts.append(hash256(tx.outputs[input_index].encode()))
        else:
            parts.append(_ZERO32)
        parts += (self._locktime, _U32.pack(sighash_type))
        return b"".join(parts)

    def digest(self, input_index: int, sighash_type: int, script_code: bytes) -> bytes:
        return hash256(self.preimage(input_index, sighash_type, script_code))


# One-entry memo for `signing_preimage`: (tx, snapshot of source_outputs, cache). The tx is
# matched by identity (it is immutable); the outputs by comparing against the snapshot, which is a
# C-speed identity-first list/tuple comparison, so a caller mutating its list is never served a
# stale entry.
_last: tuple[Transaction, Sequence[TxOutput], SighashCache] | None = None


def _cache_for(tx: Transaction, source_outputs: Sequence[TxOutput]) -> SighashCache:
    global _last
    last = _last
    if last is not None and last[0] is tx:
        snapshot = last[1]
        if type(source_outputs) is type(snapshot) and source_outputs == snapshot:
            return last[2]
    cache = SighashCache(tx, source_outputs)
    snap: Sequence[TxOutput] = (
        list(source_outputs) if isinstance(source_outputs, list) else cache.source_outputs
    )
    _last = (tx, snap, cache)
    return cache


def signing_preimage(
    tx: Transaction,
    input_index: int,
    source_outputs: Sequence[TxOutput],
    sighash_type: int,
    script_code: bytes,
) -> bytes:
    """The signing serialization of input `input_index`; ValueError on invalid arguments."""
    return _cache_for(tx, source_outputs).preimage(input_index, sighash_type, script_code)


def signature_digest(
    tx: Transaction,
    input_index: int,
    source_outputs: Sequence[TxOutput],
    sighash_type: int,
    script_code: bytes,
) -> bytes:
    """hash256 of the preimage: the 32-byte message that ECDSA/Schnorr signatures sign."""
    return hash256(signing_preimage(tx, input_index, source_outputs, sighash_type, script_code))


# --- script code ------------------------------------------------------------------------------

_SIGNATURE_CHECKS = frozenset(
    {OP_CHECKSIG, OP_CHECKSIG + 1, OP_CHECKMULTISIG, OP_CHECKMULTISIG + 1}
)


def _op_offsets(bytecode: bytes) -> list[tuple[int, int]]:
    """(offset, opcode) of every operation; DecodeError if a push runs past the end."""
    ops: list[tuple[int, int]] = []
    pos, n = 0, len(bytecode)
    while pos < n:
        op = bytecode[pos]
        ops.append((pos, op))
        pos += 1
        if 0 < op < OP_PUSHDATA1:
            size = op
        elif OP_PUSHDATA1 <= op <= OP_PUSHDATA4:
            width = 1 if op == OP_PUSHDATA1 else 2 if op == OP_PUSHDATA2 else 4
            if pos + width > n:
                raise DecodeError(f"truncated push length at offset {pos - 1}")
            size = int.from_bytes(bytecode[pos : pos + width], "little")
            pos += width
        else:
            continue
        if pos + size > n:
            raise DecodeError(f"push of {size} bytes at offset {pos} runs past the end")
        pos += size
    return ops


def covered_bytecode(bytecode: bytes, before: int | None = None) -> bytes:
    """What a signature check at byte offset `before` covers: the bytecode after the last
    OP_CODESEPARATOR preceding it (the whole bytecode if there is none).

    Assumes every separator before `before` executes (true for scripts without branches around
    them); `before=None` means the end of the script.
    """
    limit = len(bytecode) if before is None else before
    start = 0
    for offset, op in _op_offsets(bytecode):
        if offset >= limit:
            break
        if op == OP_CODESEPARATOR:
            start = offset + 1
    return bytecode[start:]


def first_signature_check(bytecode: bytes) -> int | None:
    """Byte offset of the first OP_CHECKSIG/OP_CHECKMULTISIG(VERIFY), or None."""
    for offset, op in _op_offsets(bytecode):
        if op in _SIGNATURE_CHECKS:
            return offset
    return None


def script_code_for_input(source_output: TxOutput, unlocking: bytes) -> bytes:
    """The bytecode a signature in this input covers, before any OP_CODESEPARATOR cut.

    P2SH20/P2SH32: the redeem script (last push of the unlocking bytecode); otherwise the spent
    output's locking bytecode (never the token prefix, which the preimage carries separately).
    """
    kind, _ = classify_locking(source_output.locking)
    if kind in (ScriptKind.P2SH20, ScriptKind.P2SH32):
        try:
            items = pushes(unlocking)
        except DecodeError as exc:
            raise ValueError(f"P2SH unlocking bytecode is not push-only: {exc}") from None
        if not items:
            raise ValueError("P2SH unlocking bytecode has no redeem script")
        return items[-1]
    return source_output.locking


__all__ = [
    "SIGHASH_ALL",
    "SIGHASH_ANYONECANPAY",
    "SIGHASH_DEFAULT",
    "SIGHASH_FORKID",
    "SIGHASH_NONE",
    "SIGHASH_SINGLE",
    "SIGHASH_UTXOS",
    "VALID_SIGHASH_TYPES",
    "SighashCache",
    "covered_bytecode",
    "first_signature_check",
    "is_valid_sighash_type",
    "script_code_for_input",
    "signature_digest",
    "signing_preimage",
]
