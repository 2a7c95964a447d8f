"""Block headers, merkle trees, and whole-block parsing that stays cheap on 32 MB blocks.

`Block` never decodes a transaction up front: one pass over the raw bytes walks the length
fields only (`scan_transaction`) to record where each transaction starts and ends, and hashes
each span through a `memoryview`, so parsing costs little more than hashing the block once.
Full `Transaction` objects are built on demand (`Block.transaction`), and `Block.contains` /
`Block.find_transactions` let the indexer skip transactions that cannot touch a pool without
decoding them.

Hashes are wire-order bytes; `*_hex` properties give the reversed display order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from bch.encoding import DecodeError, compact_size, read_compact_size
from bch.hashes import hash256
from bch.token import PREFIX_TOKEN, TokenData
from bch.tx import AMOUNT_ONLY, OutPoint, Transaction, fungible_amount_at, parse_transaction

HEADER_SIZE = 80
# Default header version for blocks we build: the BIP9 "top bits" every BCH miner sets.
BLOCK_VERSION = 0x20000000
# version + input count + output count + locktime: no transaction can be shorter.
_MIN_TX_BYTES = 10

_HEADER = struct.Struct("<i32s32sIII")
_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_sha256 = hashlib.sha256


@dataclass(frozen=True, slots=True)
class BlockHeader:
    version: int
    prev_hash: bytes  # wire order
    merkle_root: bytes  # wire order
    time: int
    bits: int
    nonce: int

    def __post_init__(self) -> None:
        if len(self.prev_hash) != 32 or len(self.merkle_root) != 32:
            raise ValueError("prev_hash and merkle_root must be 32 bytes")
        if not -(1 << 31) <= self.version < 1 << 31:
            raise ValueError(f"header version out of int32 range: {self.version}")
        for name in ("time", "bits", "nonce"):
            value = getattr(self, name)
            if not 0 <= value <= 0xFFFFFFFF:
                raise ValueError(f"header {name} out of uint32 range: {value}")

    def encode(self) -> bytes:
        """The 80 serialized bytes that are hashed for the block id and proof of work."""
        return _HEADER.pack(
            self.version, self.prev_hash, self.merkle_root, self.time, self.bits, self.nonce
        )

    @classmethod
    def from_bytes(cls, b80: bytes) -> BlockHeader:
        if len(b80) != HEADER_SIZE:
            raise DecodeError(f"block header must be {HEADER_SIZE} bytes, got {len(b80)}")
        return cls(*_HEADER.unpack(b80))

    @classmethod
    def from_hex(cls, header_hex: str) -> BlockHeader:
        try:
            raw = bytes.fromhex(header_hex)
        except ValueError:
            raise DecodeError("block header hex is not valid hexadecimal") from None
        return cls.from_bytes(raw)

    @property
    def hash(self) -> bytes:
        """Block id, wire order (hash256 of the 80 header bytes)."""
        return hash256(self.encode())

    @property
    def hash_hex(self) -> str:
        return self.hash[::-1].hex()

    @property
    def prev_hash_hex(self) -> str:
        return self.prev_hash[::-1].hex()

    @property
    def merkle_root_hex(self) -> str:
        return self.merkle_root[::-1].hex()

    @property
    def target(self) -> int:
        """The proof-of-work target that `bits` encodes (compact "nBits" form)."""
        return bits_to_target(self.bits)

    def check_proof_of_work(self) -> bool:
        """True if the header hash, read as a little-endian number, is at most the target."""
        try:
            target = bits_to_target(self.bits)
        except ValueError:
            return False
        return target > 0 and int.from_bytes(self.hash, "little") <= target


def bits_to_target(bits: int) -> int:
    """Expand compact `nBits`: 3-byte mantissa × 256^(exponent − 3). ValueError if negative or
    above 2^256 (consensus treats both as an invalid target)."""
    exponent = bits >> 24
    mantissa = bits & 0x007FFFFF
    if bits & 0x00800000 and mantissa:
        raise ValueError(f"nBits {bits:#010x} encodes a negative target")
    target = mantissa >> 8 * (3 - exponent) if exponent <= 3 else mantissa << 8 * (exponent - 3)
    if target >> 256:
        raise ValueError(f"nBits {bits:#010x} overflows 256 bits")
    return target


# --- merkle tree -----------------------------------------------------------------------------


def _check_hashes(txids: Sequence[bytes]) -> None:
    if not txids:
        raise ValueError("a merkle tree needs at least one transaction")
    for t in txids:
        if len(t) != 32:
            raise ValueError(f"txids must be 32 bytes, got {len(t)}")


def _next_level(level: list[bytes]) -> list[bytes]:
    if len(level) & 1:
        level.append(level[-1])
    sha = _sha256
    return [sha(sha(level[i] + level[i + 1]).digest()).digest() for i in range(0, len(level), 2)]


def merkle_root(txids: Sequence[bytes]) -> bytes:
    """Bitcoin merkle root (wire order) of wire-order txids; an odd level repeats its last hash."""
    _check_hashes(txids)
    level = list(txids)
    while len(level) > 1:
        level = _next_level(level)
    return level[0]


def merkle_branch(txids: Sequence[bytes], index: int) -> list[bytes]:
    """The sibling hashes from leaf `index` up to the root (what Electrum's get_merkle serves)."""
    _check_hashes(txids)
    if not 0 <= index < len(txids):
        raise IndexError(f"transaction index {index} out of range for {len(txids)} txids")
    level = list(txids)
    branch: list[bytes] = []
    while len(level) > 1:
        if len(level) & 1:
            level.append(level[-1])
        branch.append(level[index ^ 1])
        level = _next_level(level)
        index >>= 1
    return branch


def merkle_root_from_branch(txid: bytes, branch: Sequence[bytes], index: int) -> bytes:
    """Fold a branch back up to the root; compare with the header's root to verify a proof."""
    h = txid
    for sibling in branch:
        h = hash256(sibling + h) if index & 1 else hash256(h + sibling)
        index >>= 1
    return h


# --- fast transaction scanning -----------------------------------------------------------------


def _wide_compact(buf: bytes, pos: int, first: int) -> tuple[int, int]:
    """The multi-byte CompactSize whose prefix byte `first` sits at `pos`; must be minimal."""
    if first == 0xFD:
        value, nxt, minimum = _U16(buf, pos + 1)[0], pos + 3, 0xFD
    elif first == 0xFE:
        value, nxt, minimum = _U32(buf, pos + 1)[0], pos + 5, 0x10000
    else:
        value, nxt, minimum = _U64(buf, pos + 1)[0], pos + 9, 0x100000000
    if value < minimum:
        raise DecodeError(f"CompactSize at offset {pos} is not minimally encoded: {value}")
    return value, nxt


def _scan(buf: bytes, p: int) -> int:
    # Reads past the end raise IndexError/struct.error (caught by the caller); skips past the
    # end are caught by the caller's final bound check, since offsets only grow.
    p += 4  # version
    n = buf[p]
    if n < 0xFD:
        p += 1
    else:
        n, p = _wide_compact(buf, p, n)
    for _ in range(n):  # inputs: outpoint 36, script length, script, sequence 4
        size = buf[p + 36]
        if size < 0xFD:
            p += 41 + size
        else:
            size, q = _wide_compact(buf, p + 36, size)
            p = q + size + 4
    n = buf[p]
    if n < 0xFD:
        p += 1
    else:
        n, p = _wide_compact(buf, p, n)
    for _ in range(n):  # outputs: value 8, script length, script (token prefix included)
        size = buf[p + 8]
        if size < 0xFD:
            p += 9 + size
        else:
            size, q = _wide_compact(buf, p + 8, size)
            p = q + size
    return p + 4  # locktime


def scan_transaction(buf: bytes, pos: int = 0) -> int:
    """Offset just past the transaction starting at `pos`, found by walking length fields only.

    Checks framing (lengths, minimal CompactSizes, truncation), not content: token prefixes are
    validated when the transaction is decoded (`bch.tx.parse_transaction`).
    """
    try:
        end = _scan(buf, pos)
    except (IndexError, struct.error):
        end = -1
    if end < 0 or end > len(buf):
        raise DecodeError(
            f"transaction at offset {pos} is truncated ({len(buf) - pos} bytes remain)"
        )
    return end


def output0_spends_and_categories(buf: bytes, pos: int = 0) -> tuple[list[bytes], list[bytes]]:
    """What an authchain prefilter asks, read from the length fields alone: the txids (wire
    order) whose output 0 the transaction at `pos` spends, and its outputs' token categories
    (a superset: a prefix is recognised by its first byte). Framing is assumed valid (`Block`
    has scanned it). No slice per input (the index is tested in place), so a decoder can
    afford it on every transaction of every block.

    A transaction spending no output 0 is neither a link nor a genesis (a genesis spends
    output 0 of its category's txid): its outputs are not read, and its categories come back
    empty (most transactions of a block; the walk reads half the bytes it did).
    """
    p = pos + 4  # version
    n = buf[p]
    if n < 0xFD:
        p += 1
    else:
        n, p = _wide_compact(buf, p, n)
    zero = _ZERO_INDEX
    spent: list[bytes] = []
    for _ in range(n):
        if buf.startswith(zero, p + 32):
            spent.append(buf[p : p + 32])
        size = buf[p + 36]
        if size < 0xFD:
            p += 41 + size
        else:
            size, q = _wide_compact(buf, p + 36, size)
            p = q + size + 4
    categories: list[bytes] = []
    if not spent:
        return spent, categories
    n = buf[p]
    if n < 0xFD:
        p += 1
    else:
        n, p = _wide_compact(buf, p, n)
    for _ in range(n):
        size = buf[p + 8]
        if size < 0xFD:
            q = p + 9
        else:
            size, q = _wide_compact(buf, p + 8, size)
        if size > 33 and buf[q] == PREFIX_TOKEN:
            categories.append(buf[q + 1 : q + 33])
        p = q + size
    return spent, categories


_ZERO_INDEX = bytes(4)  # output index 0, little-endian


# --- lean transaction views ----------------------------------------------------------------------
# What a decoder reads of most transactions is each input's outpoint and unlocking bytecode and
# each output's value, locking bytecode and tokens. `parse_view` reads just that into named
# tuples (one allocation per input and output, no `TxInput`/`TxOutput` objects, no encoding
# caches), several times cheaper than `parse_transaction` on the indexer's candidates. A
# `Transaction` is a `TxView` too, so code written against the views takes either.


class InputView(Protocol):
    @property
    def outpoint(self) -> OutPoint: ...
    @property
    def unlocking(self) -> bytes: ...


class OutputView(Protocol):
    @property
    def value(self) -> int: ...
    @property
    def locking(self) -> bytes: ...  # without the token prefix
    @property
    def token(self) -> TokenData | None: ...


class TxView(Protocol):
    @property
    def version(self) -> int: ...
    @property
    def inputs(self) -> Sequence[InputView]: ...
    @property
    def outputs(self) -> Sequence[OutputView]: ...


class LeanInput(NamedTuple):
    outpoint: OutPoint
    unlocking: bytes


class LeanOutput(NamedTuple):
    value: int
    locking: bytes
    token: TokenData | None


class LeanTx(NamedTuple):
    version: int
    inputs: list[LeanInput]
    outputs: list[LeanOutput]


_unpack_input_head = struct.Struct("<32sIB").unpack_from  # txid, index, script length
_unpack_output_head = struct.Struct("<QB").unpack_from  # value, script length
_unpack_i32 = struct.Struct("<i").unpack_from
_unpack_u32 = struct.Struct("<I").unpack_from
_tuple_new = tuple.__new__


def _token_maker() -> Callable[[bytes, int], TokenData]:
    """A fungible-only `TokenData` filled slot by slot (as `bch.tx`'s fast parse does: its
    `__init__` and `__post_init__` cost Python frames), if the class still has exactly those
    slots; otherwise its constructor."""
    names = tuple(f.name for f in dataclasses.fields(TokenData))
    if names != ("category", "amount", "nft"):  # pragma: no cover - layout guard
        return lambda category, amount: TokenData(category, amount)
    slots: dict[str, Any] = dict(vars(TokenData))
    set_category, set_amount, set_nft = (slots[n].__set__ for n in names)
    new = object.__new__

    def make(category: bytes, amount: int) -> TokenData:
        token: TokenData = new(TokenData)
        set_category(token, category)
        set_amount(token, amount)
        set_nft(token, None)
        return token

    return make


_fungible = _token_maker()


def parse_view(buf: bytes, pos: int = 0) -> tuple[TxView, int]:
    """The transaction at `pos` as a `TxView`, and the offset just after it.

    A `LeanTx` for the common shapes; anything else (CompactSize counts ≥ 253, scripts ≥ 65,536
    bytes, a token prefix other than a plain fungible amount, anything malformed or truncated)
    is `parse_transaction`'s `Transaction`, with its errors: so a view always reads as the full
    parse does (`tests/bch/test_block_views.py` holds them equal).
    """
    if type(buf) is bytes:
        try:
            lean = _parse_lean(buf, pos)
        except (IndexError, struct.error):  # ran past the end: let the reference report it
            lean = None
        if lean is not None:
            return lean
    return parse_transaction(buf, pos)


def _parse_lean(buf: bytes, pos: int) -> tuple[LeanTx, int] | None:
    """`parse_view`'s lean pass, or None where it might differ from `parse_transaction`
    (which then parses). Reads past the end raise; a slice past the end is short but
    harmless, because a read at or beyond its end follows it (offsets only grow)."""
    n = len(buf)
    version = _unpack_i32(buf, pos)[0]
    p = pos + 4
    count = buf[p]
    p += 1
    if count >= 0xFD or count > (n - p) // 41:
        return None
    new = _tuple_new
    inputs: list[LeanInput] = []
    add = inputs.append
    for _ in range(count):
        txid, index, size = _unpack_input_head(buf, p)
        q = p + 37
        if size >= 0xFD:
            if size > 0xFD:
                return None
            size = buf[q] | buf[q + 1] << 8
            if size < 0xFD:
                return None  # not minimal
            q += 2
        p = q + size + 4  # sequence
        add(new(LeanInput, (new(OutPoint, (txid, index)), buf[q : p - 4])))
    if p > n:
        return None
    count = buf[p]
    p += 1
    if count >= 0xFD or count > (n - p) // 9:
        return None
    outputs: list[LeanOutput] = []
    add_out = outputs.append
    fungible = _fungible
    for _ in range(count):
        value, size = _unpack_output_head(buf, p)
        start = p + 9
        if size >= 0xFD:
            if size > 0xFD:
                return None
            size = buf[start] | buf[start + 1] << 8
            if size < 0xFD:
                return None
            start += 2
        p = start + size
        if p > n:
            return None
        if size and buf[start] == PREFIX_TOKEN:
            lead = start + 34  # ef ‖ category ‖ bitfield
            if lead >= p or buf[lead - 1] != AMOUNT_ONLY:
                return None  # too short for an amount, or an NFT: the full parse decides
            # The amount's CompactSize read in place for one, three and five bytes (what
            # `fungible_amount_at` accepts: minimal, within the output, not zero).
            amount = buf[lead]
            if 0 < amount < 0xFD:
                after = lead + 1
            elif amount == 0xFD and lead + 3 <= p:
                after = lead + 3
                amount = buf[lead + 1] | buf[lead + 2] << 8
                if amount < 0xFD:
                    return None
            elif amount == 0xFE and lead + 5 <= p:
                after = lead + 5
                amount = _unpack_u32(buf, lead + 1)[0]
                if amount < 0x10000:
                    return None
            else:
                read = fungible_amount_at(buf, lead, p)
                if read is None:
                    return None
                amount, after = read
            add_out(
                new(LeanOutput, (value, buf[after:p], fungible(buf[start + 1 : lead - 1], amount)))
            )
        else:
            add_out(new(LeanOutput, (value, buf[start:p], None)))
    if p + 4 > n:
        return None
    return new(LeanTx, (version, inputs, outputs)), p + 4


# --- blocks ----------------------------------------------------------------------------------


class Block:
    """A parsed block: header, transaction boundaries and txids; transactions decode on demand.

    Treat instances as read-only. `raw` is the block's bytes (kept, not copied per transaction).
    """

    __slots__ = ("_offsets", "header", "raw", "txids")

    header: BlockHeader
    raw: bytes
    txids: tuple[bytes, ...]  # wire order, block order
    _offsets: list[int]  # start of each transaction, then the end of the last one

    def __init__(self, raw: bytes) -> None:
        raw = bytes(raw)
        n = len(raw)
        if n < HEADER_SIZE + 1:
            raise DecodeError(
                f"block is {n} bytes: needs an {HEADER_SIZE}-byte header and a transaction count"
            )
        header = BlockHeader.from_bytes(raw[:HEADER_SIZE])
        try:
            count, pos = read_compact_size(raw, HEADER_SIZE)
        except DecodeError as exc:
            raise DecodeError(f"block transaction count: {exc}") from None
        if count == 0:
            raise DecodeError("block has no transactions (it needs at least a coinbase)")
        if count > (n - pos) // _MIN_TX_BYTES:
            raise DecodeError(
                f"block claims {count} transactions but only {n - pos} bytes follow the count"
            )
        offsets = [pos]
        txids: list[bytes] = []
        view = memoryview(raw)
        sha = _sha256
        scan = scan_transaction
        append_offset = offsets.append
        append_txid = txids.append
        for i in range(count):
            try:
                end = scan(raw, pos)
            except DecodeError as exc:
                raise DecodeError(
                    f"block transaction {i} of {count} (offset {pos}): {exc}"
                ) from None
            append_txid(sha(sha(view[pos:end]).digest()).digest())
            append_offset(end)
            pos = end
        if pos != n:
            raise DecodeError(f"block has {n - pos} trailing bytes after its {count} transactions")
        self.header = header
        self.raw = raw
        self.txids = tuple(txids)
        self._offsets = offsets

    @classmethod
    def from_bytes(cls, raw: bytes) -> Block:
        return cls(raw)

    def parts(self) -> tuple[bytes, list[int], tuple[bytes, ...]]:
        """(raw, transaction offsets, txids): what `from_parts` takes back, so a block scanned
        and hashed in one process (the indexer's fetch process) is not scanned again."""
        return self.raw, self._offsets, self.txids

    @classmethod
    def from_parts(cls, raw: bytes, offsets: list[int], txids: tuple[bytes, ...]) -> Block:
        """The block whose `parts()` these are, trusted as made (only the header is parsed
        again): the caller vouches that `Block(raw)` gave them."""
        block = cls.__new__(cls)
        block.header = BlockHeader.from_bytes(raw[:HEADER_SIZE])
        block.raw = raw
        block.txids = txids
        block._offsets = offsets
        return block

    @classmethod
    def from_hex(cls, block_hex: str) -> Block:
        try:
            raw = bytes.fromhex(block_hex)
        except ValueError:
            raise DecodeError("block hex is not valid hexadecimal") from None
        return cls(raw)

    @staticmethod
    def build(
        transactions: Sequence[Transaction | bytes],
        *,
        prev_hash: bytes,
        time: int,
        bits: int,
        nonce: int = 0,
        version: int = BLOCK_VERSION,
    ) -> bytes:
        """Serialize a block whose header commits to `transactions` (coinbase first)."""
        header = build_header(
            transactions, prev_hash=prev_hash, time=time, bits=bits, nonce=nonce, version=version
        )
        return serialize_block(header, transactions)

    def __len__(self) -> int:
        return len(self.txids)

    def __repr__(self) -> str:
        return f"Block({self.hash_hex}, {len(self.txids)} txs, {len(self.raw)} bytes)"

    @property
    def tx_count(self) -> int:
        return len(self.txids)

    @property
    def size(self) -> int:
        return len(self.raw)

    @property
    def hash(self) -> bytes:
        return hash256(self.raw[:HEADER_SIZE])

    @property
    def hash_hex(self) -> str:
        return self.hash[::-1].hex()

    def has_valid_merkle_root(self) -> bool:
        """Does the header commit to exactly these transactions?"""
        return merkle_root(self.txids) == self.header.merkle_root

    def _index(self, i: int) -> int:
        n = len(self.txids)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"transaction index {i} out of range for {n} transactions")
        return j

    @property
    def offsets(self) -> Sequence[int]:
        """Where each transaction starts in `raw`, then the end of the last one."""
        return self._offsets

    def tx_span(self, i: int) -> tuple[int, int]:
        """(start, end) offsets of transaction `i` within `raw`."""
        j = self._index(i)
        return self._offsets[j], self._offsets[j + 1]

    def tx_raw(self, i: int) -> bytes:
        start, end = self.tx_span(i)
        return self.raw[start:end]

    def transaction(self, i: int) -> Transaction:
        """Fully decode transaction `i` (DecodeError if, say, a token prefix is malformed)."""
        start, end = self.tx_span(i)
        tx, stop = parse_transaction(self.raw, start)
        if stop != end:  # pragma: no cover - scan and parse read the same length fields
            raise DecodeError(f"transaction {i} decodes to {stop - start} bytes, scanned {end}")
        return tx

    def view(self, i: int) -> TxView:
        """Transaction `i`'s outpoints, unlocking bytecodes and outputs (`parse_view`): what
        most decoders read, without the full decode."""
        start, end = self.tx_span(i)
        view, stop = parse_view(self.raw, start)
        if stop != end:  # pragma: no cover - scan and parse read the same length fields
            raise DecodeError(f"transaction {i} decodes to {stop - start} bytes, scanned {end}")
        return view

    def iter_transactions(self) -> Iterator[Transaction]:
        for i in range(len(self.txids)):
            yield self.transaction(i)

    def contains(self, pattern: bytes, i: int) -> bool:
        """Do transaction `i`'s bytes contain `pattern`? (No decoding.)"""
        start, end = self.tx_span(i)
        return self.raw.find(pattern, start, end) >= 0

    def find_transactions(self, pattern: bytes) -> list[int]:
        """Indexes of the transactions whose bytes contain `pattern` (`transactions_holding`)."""
        return transactions_holding(self.raw, self._offsets, pattern)


def transactions_holding(raw: bytes, offsets: Sequence[int], pattern: bytes) -> list[int]:
    """Indexes i of the transactions `raw[offsets[i]:offsets[i + 1]]` that contain `pattern`,
    in one pass: faster than a search per transaction when matches are rare, since the search
    runs in C over the whole block and only hits are mapped back to transactions."""
    stop = offsets[-1]
    width = len(pattern)
    found: list[int] = []
    pos = offsets[0]
    while True:
        hit = raw.find(pattern, pos, stop)
        if hit < 0:
            return found
        i = bisect_right(offsets, hit) - 1
        end = offsets[i + 1]
        if hit + width <= end:
            found.append(i)
            pos = end
            if pos >= stop:
                return found
        else:  # straddles two transactions: keep looking inside transaction i
            pos = hit + 1


def build_header(
    transactions: Sequence[Transaction | bytes],
    *,
    prev_hash: bytes,
    time: int,
    bits: int,
    nonce: int = 0,
    version: int = BLOCK_VERSION,
) -> BlockHeader:
    """A header whose merkle root commits to `transactions` (a miner then varies `nonce`)."""
    txids = [t.txid if isinstance(t, Transaction) else hash256(t) for t in transactions]
    return BlockHeader(version, prev_hash, merkle_root(txids), time, bits, nonce)


def serialize_block(header: BlockHeader, transactions: Sequence[Transaction | bytes]) -> bytes:
    """header ‖ CompactSize count ‖ transactions, exactly as given (the header is not adjusted;
    use `build_header` / `Block.build` to commit to the transactions)."""
    parts = [header.encode(), compact_size(len(transactions))]
    parts += [t.to_bytes() if isinstance(t, Transaction) else bytes(t) for t in transactions]
    return b"".join(parts)


def parse_block(raw: bytes) -> Block:
    return Block(raw)


__all__ = [
    "BLOCK_VERSION",
    "HEADER_SIZE",
    "Block",
    "BlockHeader",
    "InputView",
    "LeanInput",
    "LeanOutput",
    "LeanTx",
    "OutputView",
    "TxView",
    "bits_to_target",
    "build_header",
    "merkle_branch",
    "merkle_root",
    "merkle_root_from_branch",
    "output0_spends_and_categories",
    "parse_block",
    "parse_view",
    "scan_transaction",
    "serialize_block",
    "transactions_holding",
]
