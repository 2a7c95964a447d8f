"""The decoder interface: how a protocol's indexing plugs into the store.

A decoder is a declaration — its tables (`migrations`), which transactions it looks at (its
selection rule: `patterns`, or `select`), how a block's candidates become rows (`prepare`,
`decode_block`, `write`) and how they are undone (`undo_tables`, or `undo_to`) — on the base
class `Decoder`, whose optional behaviour (bulk mode, kept-back rows, the mempool) does nothing
unless a decoder overrides it. The store owns the chain and all I/O (which block is applied, the
tip, the SQLite transaction on the writer client, reorgs, the mempool's bookkeeping); a decoder
reads and writes its own tables through the `Writer` it is handed. For each block the store

1. picks the decoder's candidate transactions with `select` (by default: those whose raw bytes
   hold one of its `patterns`, searched in the block's bytes, so most of a block is never
   decoded),
2. calls `prepare` once (the decoder reads what it needs from SQLite and may reorder the
   candidates, e.g. parents before children, since CTOR blocks are sorted by txid),
3. calls `decode_block(candidates, state)` — pure, apart from advancing its own state; by
   default `decode` per candidate in that order — and collects the rows,
4. calls `write` with all the rows; steps 2–4 run inside the block's SQLite transaction. Both
   are called for every block, with or without candidates and rows (unless the decoder
   declares `sparse = True`: then a block without candidates skips steps 2–5); a decoder
   should skip SQLite calls when it has nothing to read or write,
5. after COMMIT, calls `committed` (rows possibly empty) so the decoder can update in-memory
   state (the snapshot). During the initial sync several blocks may share one transaction
   (`Store.apply_block(hold=True)`): `committed` then runs after each block's writes, before
   the next block's `prepare`, and if the transaction fails the store calls `load` again.

`undo_to` deletes/restores the decoder's rows above a height inside the reorg transaction;
`load` rebuilds in-memory state from the database (at open and after every undo). New protocols
(oracles, registries, lending) add a decoder and register it (`indexer.decoders`); the follower
and the store do not change.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from bch.block import TxView, transactions_holding
from bch.tx import OutPoint, Transaction, TxOutput
from indexer.store.schema import Migration
from indexer.store.writer import Writer

StateT = TypeVar("StateT")
RowT = TypeVar("RowT")


# Fetches outputs that a block's transactions spend from the chain's source (the follower's
# server): what a decoder needs when the index never saw the spent output, e.g. a pool created
# before the start height. Outpoints it cannot resolve are left out of the answer.
PrevoutFetcher = Callable[[Sequence[OutPoint]], Awaitable[Mapping[OutPoint, TxOutput]]]


@dataclass(frozen=True, slots=True)
class BlockContext:
    """The block being applied (or, for the mempool, the block a transaction could enter)."""

    height: int
    time: int  # block time (Unix seconds); wall-clock time for the mempool
    hash: bytes  # wire order; empty for the mempool
    txids: tuple[bytes, ...] = ()  # every transaction of the block, wire order, block order
    prevouts: PrevoutFetcher | None = None  # None: no source (decoders make do without)


class TxSource(Protocol):
    """Where a block's transactions are decoded from, by position (the store's block)."""

    def transaction(self, i: int) -> Transaction: ...
    def view(self, i: int) -> TxView: ...
    def holds(self, i: int, pattern: bytes) -> bool: ...


class BlockTx:
    """One transaction and where it sits in its block (-1 in the mempool).

    `tx` is the full decode; `view` holds what most decoders read (outpoints, unlocking
    bytecodes, outputs: `bch.block.TxView`). A candidate of a block decodes each on first use,
    so a decoder that reads only `view` (Cauldron's block path) never pays for `tx`, a few
    times dearer. Given a `Transaction`, both are it.
    """

    __slots__ = ("_source", "_tx", "_view", "position", "txid")

    def __init__(
        self,
        position: int,
        txid: bytes,  # wire order
        tx: Transaction | None = None,
        *,
        source: TxSource | None = None,  # decodes transaction `position` when `tx` is None
    ) -> None:
        if tx is None and source is None:
            raise ValueError("a BlockTx needs its transaction or a source to decode it from")
        self.position = position
        self.txid = txid
        self._tx = tx
        self._view: TxView | None = tx
        self._source = source

    @property
    def tx(self) -> Transaction:
        tx = self._tx
        if tx is None:
            assert self._source is not None  # (checked in __init__)
            tx = self._tx = self._source.transaction(self.position)
        return tx

    @property
    def view(self) -> TxView:
        view = self._view
        if view is None:
            if self._tx is not None:  # decoded already: as cheap to read
                view = self._view = self._tx
            else:
                assert self._source is not None  # (checked in __init__)
                view = self._view = self._source.view(self.position)
        return view

    def may_hold(self, pattern: bytes) -> bool:
        """False only if the transaction's bytes surely lack `pattern` (searched in its source's
        bytes, no decoding: a C-level search instead of a Python walk of its fields)."""
        source = self._source
        return source is None or source.holds(self.position, pattern)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlockTx):
            return NotImplemented
        return (self.position, self.txid, self.tx) == (other.position, other.txid, other.tx)

    def __hash__(self) -> int:
        return hash((self.position, self.txid))

    def __repr__(self) -> str:
        return f"BlockTx({self.position}, {self.txid[::-1].hex()})"


@dataclass(frozen=True, slots=True)
class BlockBytes:
    """A block's transactions as bytes: transaction i is `raw[offsets[i]:offsets[i + 1]]`."""

    raw: bytes
    offsets: Sequence[int]
    txids: Sequence[bytes]  # wire order, block order


class Decoder(ABC, Generic[StateT, RowT]):
    """One protocol's indexing. See the module docstring for the call sequence."""

    name: str  # unique; also the migrations' component name and the table prefix
    migrations: Sequence[Migration] = ()
    # The selection rule's byte patterns: a transaction is a candidate iff its raw bytes hold
    # one of them (b"" matches every transaction). Must never miss a transaction `decode`
    # would use. The mempool's candidates are always chosen by them.
    patterns: Sequence[bytes] = ()
    # Tables whose rows all carry the `height` of the block that wrote them (children before
    # the rows they reference): the default `undo_to` deletes those above the fork.
    undo_tables: Sequence[str] = ()
    # A block without candidates changes nothing for this decoder (its `prepare`, `write` and
    # `committed` would read, write and keep nothing), so the store skips all three for it:
    # most blocks hold no oracle update, registry link or lending action.
    sparse: bool = False

    def select(self, block: BlockBytes) -> Iterable[int]:
        """Indexes of the block's candidate transactions (any order; duplicates allowed). By
        default those holding one of `patterns`; a decoder whose candidates no byte pattern
        announces (an authchain link is recognised by the outpoint it spends) walks the bytes
        with its in-memory state instead. Like `patterns`, it must never miss a transaction
        `decode` would use (a superset is fine). Called after the previous block's
        `committed`."""
        raw, offsets = block.raw, block.offsets
        return {i for p in self.patterns for i in transactions_holding(raw, offsets, p)}

    async def load(self, db: Writer) -> None:
        """Rebuild in-memory state from the database (after open and after each undo)."""
        return

    @abstractmethod
    async def prepare(
        self, db: Writer, block: BlockContext, txs: Sequence[BlockTx]
    ) -> tuple[Sequence[BlockTx], StateT]:
        """Read what decoding the candidates needs; return them in decode order + the state."""

    @abstractmethod
    def decode(self, tx: BlockTx, state: StateT) -> Sequence[RowT]:
        """The rows one transaction produces (pure, apart from advancing `state`)."""

    def decode_block(self, txs: Sequence[BlockTx], state: StateT) -> list[RowT]:
        """The rows of a block's candidates, in `prepare`'s order."""
        decode = self.decode
        return [row for t in txs for row in decode(t, state)]

    @abstractmethod
    async def write(self, db: Writer, block: BlockContext, rows: Sequence[RowT]) -> None:
        """Store the block's rows (inside the block's transaction)."""

    async def undo_to(self, db: Writer, height: int) -> None:
        """Remove every effect of blocks above `height` (inside the reorg's transaction). By
        default, delete the rows of `undo_tables` above it (in-memory state is rebuilt by
        `load` afterwards)."""
        for table in self.undo_tables:
            await db.execute(f"DELETE FROM {table} WHERE height > ?", (height,))

    def committed(
        self, block: BlockContext, rows: Sequence[RowT], evicted: Collection[bytes]
    ) -> None:
        """The block is durable: update in-memory state. `evicted` are mempool txids the store
        found conflicting with the block (or descending from such), beyond the block's own."""
        return

    def flush(self, db: Writer) -> None:
        """Rows a decoder keeps back while the store holds a batch open (so that a row changed
        again within the batch is written once, in its final state) are queued here
        (`Writer.submit`, no waiting), inside the open transaction, right before every COMMIT
        of applied blocks. A rollback discards them with the transaction: `load` runs next
        and must forget them."""
        return

    def bulk(self, on: bool) -> None:
        """Called with True when a long initial sync begins (its secondary indexes deferred:
        `Store.defer_indexes`, or `Store.open` finding them deferred) and False when it ends
        (`Store.restore_indexes`). Meanwhile nobody reads live state (the router is not served
        before the initial sync ends), so a decoder may let it lag — keeping only what
        decoding needs — and must bring it up to date when it ends (and before any mempool
        call)."""
        return

    async def mempool_add(self, db: Writer, block: BlockContext, tx: BlockTx) -> bool:
        """Apply an unconfirmed transaction to live state only; True if it mattered. By
        default unconfirmed transactions never matter (oracle prices, registries and loans are
        served from blocks only)."""
        return False

    def mempool_evict(self, txids: Collection[bytes]) -> None:
        """Forget these unconfirmed transactions (conflicts, replaced, dropped)."""
        return

    def mempool_txids(self) -> Collection[bytes]:
        """The unconfirmed transactions this decoder still applies to live state."""
        return ()


AnyDecoder = Decoder[Any, Any]


def matches(patterns: Sequence[bytes], raw_tx: bytes) -> bool:
    """The selection rule's test for one raw transaction (the mempool's)."""
    return any(p in raw_tx for p in patterns)
