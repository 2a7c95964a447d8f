"""Transactions: the immutable model and its exact wire (de)serialization.

Hashes (txids, outpoint txids) are kept in wire order as bytes; the `*_hex` properties give the
reversed display order used by explorers, Electrum and every API.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import Any, NamedTuple

from bch.encoding import DecodeError, Reader, compact_size, compact_size_len
from bch.hashes import hash256
from bch.kernels import COMPILED as KERNELS_COMPILED
from bch.kernels import fungible_outputs
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
    # Per CompactSize width of the amount (1, 3, 5, 9 bytes): the script field's length,
    # then the prefix's head; only the amount and the bytecode follow.
    _leads: tuple[bytes, ...] = field(init=False, repr=False, compare=False)
    # Per width, one struct's `pack` writing a whole output: value, lead, the amount's
    # CompactSize (marker byte and integer; the 1-byte width has no marker) and bytecode.
    _packs: tuple[Callable[..., bytes], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        head = TokenData(self.category, 1).encode_prefix()[:-1]  # ef ‖ category ‖ bitfield
        object.__setattr__(self, "_head", head)
        leads = tuple(
            compact_size(len(head) + width + len(self.locking)) + head for width in (1, 3, 5, 9)
        )
        object.__setattr__(self, "_leads", leads)
        size = len(self.locking)
        packs = tuple(
            _output_packer(f"<Q{len(lead)}s{amount}{size}s")
            for lead, amount in zip(leads, ("B", "BH", "BI", "BQ"), strict=True)
        )
        object.__setattr__(self, "_packs", packs)

    def __reduce__(self) -> tuple[Any, ...]:
        """Made again from its two fields (a struct's `pack` does not pickle)."""
        return (FungibleTemplate, (self.locking, self.category))

    def output(self, value: int, amount: int) -> TxOutput:
        """`TxOutput(value, locking, TokenData(category, amount))`: what one of the encodings
        `fungible_encodings` makes decodes to (`tests/router/test_templated.py`)."""
        return TxOutput(value, self.locking, TokenData(self.category, amount))


_PACKERS: dict[str, Callable[..., bytes]] = {}


def _output_packer(fmt: str) -> Callable[..., bytes]:
    """`struct.Struct(fmt).pack`, one per format (templates of one shape share it)."""
    pack = _PACKERS.get(fmt)
    if pack is None:
        pack = _PACKERS[fmt] = struct.Struct(fmt).pack
    return pack


def fungible_encodings(
    templates: Sequence[FungibleTemplate], values: Sequence[int], amounts: Sequence[int]
) -> list[bytes]:
    """`[t.output(v, a).encode() for …]` without the objects: one pass, the bytes only (a
    router's transaction holds its pools' outputs this way, `TemplatedTransaction`), by a
    compiled loop where `make` compiled one (`bch.kernels`; interpreted, that loop is slower
    than this one's struct packers). An amount `TokenData` would refuse is refused by
    `TokenData` itself, as in `output`."""
    if KERNELS_COMPILED:
        made = fungible_outputs(tuple(templates), tuple(values), tuple(amounts))
        if made is not None:
            return made
    # Not compiled, or a value or an amount outside 63 bits (the packers write or refuse it).
    out: list[bytes] = []
    add = out.append
    for template, value, amount in zip(templates, values, amounts, strict=True):
        # One struct call per output (`FungibleTemplate._packs`), not four pieces joined.
        leads, packs = template._leads, template._packs
        if amount < 0xFD:
            if amount < 1:
                TokenData(template.category, amount)  # raises its own error
            add(packs[0](value, leads[0], amount, template.locking))
        elif amount <= 0xFFFF:
            add(packs[1](value, leads[1], 0xFD, amount, template.locking))
        elif amount <= 0xFFFFFFFF:
            add(packs[2](value, leads[2], 0xFE, amount, template.locking))
        else:
            if amount > MAX_TOKEN_AMOUNT:
                TokenData(template.category, amount)  # raises its own error
            add(packs[3](value, leads[3], 0xFF, amount, template.locking))
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
        # Kept bytes are read from the slot (a router's transaction is mostly pools whose
        # inputs and outputs carry theirs), the rest encoded.
        parts = [_I32.pack(self.version), compact_size(len(self.inputs))]
        parts += [i._encoded or i.encode() for i in self.inputs]
        parts.append(compact_size(len(self.outputs)))
        parts += [o._encoded or o.encode() for o in self.outputs]
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


_output_bytes = TxOutput.encode
_input_bytes = TxInput.encode


def _inputs_wire(inputs: Sequence[TxInput]) -> bytes:
    """The inputs' wire bytes joined: most are kept (a router's pool inputs), the rest
    encoded."""
    return b"".join([i._encoded or i.encode() for i in inputs])


class TemplatedTransaction(Transaction):
    """A built transaction whose first outputs are `FungibleTemplate` outputs, held as the
    templates, their (value, amount) integers and their wire bytes, then `rest`, ordinary
    outputs. The bytes are made here from those integers (never taken from outside), so they
    always say what the integers say; the `TxOutput` objects of `outputs` are made only when
    something reads them. A router re-creates hundreds of pools per transaction and its gate
    and policy checks read the integers (`router.gate`, `bch.policy.standardness_errors`):
    `tests/router/test_templated.py` holds everything equal to the plain `Transaction`."""

    __slots__ = (
        "_made_outputs",
        "_outputs_at",
        "amounts",
        "encoded",
        "rest",
        "templates",
        "values",
    )
    templates: tuple[FungibleTemplate, ...]
    values: tuple[int, ...]
    amounts: tuple[int, ...]
    encoded: tuple[bytes, ...]  # each templated output's wire bytes
    rest: tuple[TxOutput, ...]
    _outputs_at: int
    _made_outputs: tuple[TxOutput, ...] | None  # `outputs`, once something has read them

    def __init__(
        self,
        inputs: Sequence[TxInput],
        templates: Sequence[FungibleTemplate],
        values: Sequence[int],
        amounts: Sequence[int],
        rest: Sequence[TxOutput],
        *,
        version: int = 2,
        locktime: int = 0,
        _encoded: tuple[bytes, ...] | None = None,
    ) -> None:
        templates, values, amounts = tuple(templates), tuple(values), tuple(amounts)
        if _encoded is None:
            _encoded = tuple(fungible_encodings(templates, values, amounts))
        inputs, rest = tuple(inputs), tuple(rest)
        count = compact_size(len(inputs))
        wire = _inputs_wire(inputs)
        parts = [_I32.pack(version), count, wire, compact_size(len(templates) + len(rest))]
        parts += _encoded
        parts += map(_output_bytes, rest)
        parts.append(_U32.pack(locktime))
        self._fill(version, inputs, locktime, b"".join(parts), 4 + len(count) + len(wire))
        _set(self, "templates", templates)
        _set(self, "values", values)
        _set(self, "amounts", amounts)
        _set(self, "encoded", _encoded)
        _set(self, "rest", rest)

    def _fill(
        self, version: int, inputs: tuple[TxInput, ...], locktime: int, raw: bytes, at: int
    ) -> None:
        _set(self, "version", version)
        _set(self, "inputs", inputs)
        _set(self, "locktime", locktime)
        _set(self, "raw", raw)
        _set(self, "_outputs_at", at)  # where the output count starts in `raw`
        _set(self, "_made_outputs", None)

    @property
    def outputs(self) -> tuple[TxOutput, ...]:
        """The templated outputs as objects (made on first read, then kept), then `rest`."""
        made = self._made_outputs
        if made is None:
            made = tuple(map(FungibleTemplate.output, self.templates, self.values, self.amounts))
            made += self.rest
            _set(self, "_made_outputs", made)
        return made

    def with_inputs(self, inputs: Sequence[TxInput]) -> TemplatedTransaction:
        """The same outputs after other inputs: the outputs' bytes are this transaction's,
        from its output count on (`tests/router/test_templated.py` holds the result equal
        to a plain transaction of those inputs and outputs)."""
        inputs = tuple(inputs)
        old = self.inputs
        if len(inputs) == len(old):
            # The same count: the bytes up to the first input that is not the same object
            # are kept (a signer's copy changes only the funding inputs after the pools).
            same = list(map(is_, inputs, old))
            return self._spliced(inputs, same.index(False) if False in same else len(old))
        raw = self.raw
        assert raw is not None  # always set by __init__
        head = _I32.pack(self.version) + compact_size(len(inputs)) + _inputs_wire(inputs)
        return self._made(inputs, _spliced_bytes(raw, 0, head, self._outputs_at), len(head))

    def with_unlocking(self, unlocking: Mapping[int, bytes]) -> TemplatedTransaction:
        """The same transaction with the inputs at `unlocking`'s indices unlocked by its
        bytecodes (a signer's copy, or the gate's worst case): the bytes before the first of
        them are kept, and the inputs before it are not looked at."""
        inputs = list(self.inputs)
        for i, bytecode in unlocking.items():
            if not 0 <= i < len(inputs):
                raise IndexError(f"the transaction has no input {i}")
            spent = inputs[i]
            inputs[i] = TxInput(spent.outpoint, bytecode, spent.sequence)
        return self._spliced(tuple(inputs), min(unlocking, default=len(inputs)))

    def _spliced(self, inputs: tuple[TxInput, ...], first: int) -> TemplatedTransaction:
        """This transaction with `inputs`, as many as it has, the same objects before `first`."""
        raw = self.raw
        assert raw is not None  # always set by __init__
        at = self._outputs_at
        start = at - sum(map(len, map(_input_bytes, self.inputs[first:])))
        tail = _inputs_wire(inputs[first:])
        return self._made(inputs, _spliced_bytes(raw, start, tail, at), start + len(tail))

    def _made(self, inputs: tuple[TxInput, ...], raw: bytes, at: int) -> TemplatedTransaction:
        other = _new(TemplatedTransaction)
        other._fill(self.version, inputs, self.locktime, raw, at)
        for name in ("templates", "values", "amounts", "encoded", "rest"):
            _set(other, name, getattr(self, name))
        return other

    def output_count(self) -> int:
        return len(self.templates) + len(self.rest)

    def output_value(self) -> int:
        """Sum of every output's value, from the integers."""
        return sum(self.values) + sum(map(_value_of, self.rest))

    def __reduce__(self) -> tuple[Any, ...]:
        """Copies and pickles are made again from the integers (the bytes follow)."""
        return (
            _templated_again,
            (
                self.inputs,
                self.templates,
                self.values,
                self.amounts,
                self.rest,
                self.version,
                self.locktime,
            ),
        )

    def replace(self, **changes: Any) -> Transaction:
        """A plain `Transaction` with fields changed (see `Transaction.replace`)."""
        plain = Transaction(self.version, self.inputs, self.outputs, self.locktime)
        return plain.replace(**changes)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Transaction):
            return NotImplemented
        return (self.version, self.inputs, self.outputs, self.locktime) == (
            other.version,
            other.inputs,
            other.outputs,
            other.locktime,
        )

    def __hash__(self) -> int:
        return hash((self.version, self.inputs, self.outputs, self.locktime))


def _spliced_bytes(raw: bytes, start: int, middle: bytes, end: int) -> bytes:
    """`raw[:start] + middle + raw[end:]`, copied once: a memoryview's slices copy nothing,
    and a router's transaction is tens of kilobytes."""
    view = memoryview(raw)
    return b"".join((view[:start], middle, view[end:]))


def _value_of(output: TxOutput) -> int:
    return output.value


def _templated_again(
    inputs: Sequence[TxInput],
    templates: Sequence[FungibleTemplate],
    values: Sequence[int],
    amounts: Sequence[int],
    rest: Sequence[TxOutput],
    version: int,
    locktime: int,
) -> TemplatedTransaction:
    return TemplatedTransaction(
        inputs, templates, values, amounts, rest, version=version, locktime=locktime
    )


def parse_transaction(buf: bytes, pos: int = 0) -> tuple[Transaction, int]:
    """Parse a transaction starting at `pos`; return it and the offset just after it.

    One pass with `struct.unpack_from` and slot-filled values (`_parse_fast`), a few times
    cheaper than going through `Reader` (the indexer parses every Cauldron candidate, tens of
    inputs and outputs each). Anything that pass does not accept (malformed, or merely rare:
    CompactSize counts ≥ 253, scripts ≥ 65,536 bytes) is parsed again by the bounds-checked
    reference, `_parse_checked`, so results and errors are the reference's exactly
    (`tests/bch/test_tx.py` holds the two equal on the vectors and on mutated transactions).
    """
    if _FAST_LAYOUT and type(buf) is bytes:
        try:
            parsed = _parse_fast(buf, pos)
        except (IndexError, struct.error):  # ran past the end: let the reference report it
            parsed = None
        if parsed is not None:
            return parsed
    return _parse_checked(buf, pos)


def _parse_checked(buf: bytes, pos: int = 0) -> tuple[Transaction, int]:
    """The reference parser: every field read through `Reader`, every error reported."""
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


# --- the fast pass -------------------------------------------------------------------------------
# Values are made as their constructors would make them, slot by slot (a frozen dataclass's
# `__init__` costs a Python frame and an `object.__setattr__` per field). Only while the classes
# have exactly the slots filled here; otherwise every parse takes the reference path.

_unpack_i32 = _I32.unpack_from
_unpack_u32 = _U32.unpack_from
_unpack_input_head = struct.Struct("<32sIB").unpack_from  # txid, index, script length
_unpack_output_head = struct.Struct("<QB").unpack_from  # value, script length
_unpack_u16 = struct.Struct("<H").unpack_from
_tuple_new = tuple.__new__
_MIN_WIDE = (0xFD, 0x10000, 0x100000000)  # least value of a 3-, 5-, 9-byte CompactSize
AMOUNT_ONLY = 0x10  # token bitfield of a fungible amount without an NFT


def fungible_amount_at(buf: bytes, lead: int, stop: int) -> tuple[int, int] | None:
    """The token amount whose CompactSize starts at `lead` (a prefix's bitfield said "amount
    only") and where it ends: (amount, end), or None unless it is minimal, ends by `stop`,
    and is 1 … 2^63−1 (the one-pass parsers then leave the case to the checked parse)."""
    amount = buf[lead]
    if amount < 0xFD:
        after = lead + 1
    else:
        width = 2 if amount == 0xFD else 4 if amount == 0xFE else 8
        after = lead + 1 + width
        if after > stop:
            return None
        amount = int.from_bytes(buf[lead + 1 : after], "little")
        if amount < _MIN_WIDE[width >> 2] or amount > MAX_TOKEN_AMOUNT:
            return None
    if amount == 0:
        return None
    return amount, after


_INPUT_SLOTS = ("outpoint", "unlocking", "sequence", "_encoded")
_OUTPUT_SLOTS = ("value", "locking", "token", "_encoded")
_TOKEN_SLOTS = ("category", "amount", "nft")
_Setter = Callable[[Any, Any], None]


def _slots(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _setters(cls: type, names: tuple[str, ...]) -> tuple[_Setter, ...]:
    """The slots' own descriptors' `__set__` (what `object.__setattr__` ends up calling)."""
    slots = vars(cls)
    return tuple(slots[name].__set__ for name in names)


_FAST_LAYOUT = (
    _slots(TxInput) == _INPUT_SLOTS
    and _slots(TxOutput) == _OUTPUT_SLOTS
    and _slots(TokenData) == _TOKEN_SLOTS
)
if _FAST_LAYOUT:
    _in_outpoint, _in_unlocking, _in_sequence, _in_encoded = _setters(TxInput, _INPUT_SLOTS)
    _out_value, _out_locking, _out_token, _out_encoded = _setters(TxOutput, _OUTPUT_SLOTS)
    _tok_category, _tok_amount, _tok_nft = _setters(TokenData, _TOKEN_SLOTS)


def _parse_fast(buf: bytes, pos: int) -> tuple[Transaction, int] | None:
    """`_parse_checked` for the common shapes, or None where it might differ from it.

    Reads past the end raise IndexError/struct.error (the caller falls back); a slice past the
    end is short but harmless, because a read at or beyond its end follows it (offsets only
    grow). A token prefix other than a plain fungible amount is decoded by
    `decode_token_prefix` itself, whose error is then the reference's: everything before it
    was read exactly as the reference reads it.
    """
    n = len(buf)
    version = _unpack_i32(buf, pos)[0]
    p = pos + 4
    count = buf[p]
    p += 1
    if count >= 0xFD or count > (n - p) // 41:
        return None
    inputs: list[TxInput] = []
    add = inputs.append
    for _ in range(count):
        txid, index, size = _unpack_input_head(buf, p)
        q = p + 37
        if size >= 0xFD:
            if size > 0xFD:
                return None
            size = _unpack_u16(buf, q)[0]
            if size < 0xFD:
                return None  # not minimal: the reference reports it
            q += 2
        stop = q + size
        inp = _new(TxInput)
        _in_outpoint(inp, _tuple_new(OutPoint, (txid, index)))
        _in_unlocking(inp, buf[q:stop])
        _in_sequence(inp, _unpack_u32(buf, stop)[0])
        _in_encoded(inp, None)
        add(inp)
        p = stop + 4
    count = buf[p]
    p += 1
    if count >= 0xFD or count > (n - p) // 9:
        return None
    outputs: list[TxOutput] = []
    add_out = outputs.append
    for _ in range(count):
        value, size = _unpack_output_head(buf, p)
        start = p + 9
        if size >= 0xFD:
            if size > 0xFD:
                return None
            size = _unpack_u16(buf, start)[0]
            if size < 0xFD:
                return None
            start += 2
        stop = start + size
        if stop > n:
            return None
        out = _new(TxOutput)
        if size and buf[start] == PREFIX_TOKEN:
            lead = start + 34  # ef ‖ category ‖ bitfield
            if lead >= stop:
                return None  # too short for a prefix with an amount
            if buf[lead - 1] == AMOUNT_ONLY:
                read = fungible_amount_at(buf, lead, stop)
                if read is None:
                    return None
                amount, after = read
                token = _new(TokenData)
                _tok_category(token, buf[start + 1 : lead - 1])
                _tok_amount(token, amount)
                _tok_nft(token, None)
            else:
                sub = Reader(buf, start, stop)
                token = decode_token_prefix(sub)
                after = sub.pos
            _out_token(out, token)
            _out_locking(out, buf[after:stop])
        else:
            _out_token(out, None)
            _out_locking(out, buf[start:stop])
        _out_value(out, value)
        _out_encoded(out, None)
        add_out(out)
        p = stop
    locktime = _unpack_u32(buf, p)[0]
    end = p + 4
    raw = buf[pos:end] if (pos or end != n) else buf
    return Transaction(version, tuple(inputs), tuple(outputs), locktime, raw), end
