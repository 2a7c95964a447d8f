"""The decoder interface: how a protocol's indexing plugs into the store.

The store owns the chain (which block is applied, the tip, the SQLite transaction, reorgs and
the mempool's bookkeeping); a decoder owns one protocol's tables. For each block the store

1. picks the decoder's candidate transactions with its *prefilter* (byte patterns searched in
   the raw transactions, so most of a block is never decoded; or, if the decoder has one, its
   `select` hook, which walks the block's bytes with the decoder's own state),
2. calls `prepare` once (the decoder reads what it needs from SQLite and may reorder the
   candidates, e.g. parents before children, since CTOR blocks are sorted by txid),
3. calls `decode(tx, context)` for each candidate in that order — pure, apart from advancing
   its own context — and collects the rows,
4. calls `write` with all the rows; steps 2–4 run inside the block's SQLite transaction. Both
   are called for every block, with or without candidates and rows (unless the decoder
   declares itself `Sparse`: then a block without candidates skips steps 2–5); a decoder
   should skip SQLite calls when it has nothing to read or write,
5. after COMMIT, calls `committed` (rows possibly empty) so the decoder can update in-memory
   state (the snapshot). During the initial sync several blocks may share one transaction
   (`Store.apply_block(hold=True)`): `committed` then runs after each block's writes, before
   the next block's `prepare`, and if the transaction fails the store calls `load` again.

`undo_to` deletes/restores the decoder's rows above a height inside the reorg transaction;
`load` rebuilds in-memory state from the database (at open and after every undo). New protocols
(oracles, registries, lending) add a decoder and register it; the follower and the store do not
change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import aiosqlite

from bch.block import TxView
from bch.tx import OutPoint, Transaction, TxOutput

if TYPE_CHECKING:  # the store imports this module; Migration is only an annotation here
    from indexer.store.schema import Migration

ContextT = TypeVar("ContextT")
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


class Decoder(Protocol[ContextT, RowT]):
    """One protocol's indexing. See the module docstring for the call sequence."""

    @property
    def name(self) -> str:
        """Unique; also the migrations' component name and the table prefix."""
        ...

    @property
    def migrations(self) -> Sequence[Migration]: ...

    @property
    def patterns(self) -> Sequence[bytes]:
        """The prefilter: a transaction is a candidate iff its raw bytes contain one of these
        (b"" matches every transaction). Must never miss a transaction `decode` would use."""
        ...

    async def load(self, conn: aiosqlite.Connection) -> None:
        """Rebuild in-memory state from the database (after open and after each undo)."""
        ...

    async def prepare(
        self, conn: aiosqlite.Connection, block: BlockContext, txs: Sequence[BlockTx]
    ) -> tuple[Sequence[BlockTx], ContextT]:
        """Read what decoding the candidates needs; return them in decode order + the context."""
        ...

    def decode(self, tx: BlockTx, context: ContextT) -> Sequence[RowT]:
        """The rows one transaction produces (pure, apart from advancing `context`)."""
        ...

    async def write(
        self, conn: aiosqlite.Connection, block: BlockContext, rows: Sequence[RowT]
    ) -> None:
        """Store the block's rows (inside the block's transaction)."""
        ...

    async def undo_to(self, conn: aiosqlite.Connection, height: int) -> None:
        """Remove every effect of blocks above `height` (inside the reorg's transaction)."""
        ...

    def committed(
        self, block: BlockContext, rows: Sequence[RowT], evicted: Collection[bytes]
    ) -> None:
        """The block is durable: update in-memory state. `evicted` are mempool txids the store
        found conflicting with the block (or descending from such), beyond the block's own."""
        ...

    async def mempool_add(
        self, conn: aiosqlite.Connection, block: BlockContext, tx: BlockTx
    ) -> bool:
        """Apply an unconfirmed transaction to live state only; True if it mattered."""
        ...

    def mempool_evict(self, txids: Collection[bytes]) -> None:
        """Forget these unconfirmed transactions (conflicts, replaced, dropped)."""
        ...

    def mempool_txids(self) -> Collection[bytes]:
        """The unconfirmed transactions this decoder still applies to live state."""
        ...


AnyDecoder = Decoder[Any, Any]


@dataclass(frozen=True, slots=True)
class BlockBytes:
    """A block's transactions as bytes: transaction i is `raw[offsets[i]:offsets[i + 1]]`."""

    raw: bytes
    offsets: Sequence[int]
    txids: Sequence[bytes]  # wire order, block order


class Selecting(Protocol):
    """An optional decoder hook, used instead of `patterns` for blocks when present: for
    decoders whose candidates no byte pattern announces (an authchain link is recognised by
    the outpoint it spends), but a cheap walk over the block's bytes with the decoder's
    in-memory state can. Like `patterns`, it must never miss a transaction `decode` would use
    (a superset is fine). Called before `prepare`, after the previous block's `committed`."""

    def select(self, block: BlockBytes) -> Iterable[int]:
        """Indexes of the candidate transactions (any order; duplicates allowed)."""
        ...


def selector(decoder: object) -> Callable[[BlockBytes], Iterable[int]] | None:
    """The decoder's `select` hook, if it has one."""
    fn = getattr(decoder, "select", None)
    return fn if callable(fn) else None


class Flushing(Protocol):
    """An optional decoder hook: rows a decoder keeps back while the store holds a batch open
    (so that a row changed again within the batch is written once, in its final state) must
    be queued by `flush`, which the store calls on the SQLite connection right before every
    COMMIT of applied blocks. A rollback discards them with the transaction: `load` runs next
    and must forget them."""

    def flush(self, conn: aiosqlite.Connection) -> None:
        """Queue (`submit`) the kept-back writes, inside the open transaction; do not wait."""
        ...


def flusher(decoder: object) -> Callable[[aiosqlite.Connection], None] | None:
    """The decoder's `flush` hook, if it has one."""
    fn = getattr(decoder, "flush", None)
    return fn if callable(fn) else None


class Bulk(Protocol):
    """An optional decoder hook: the store calls `bulk(True)` when a long initial sync begins
    (its secondary indexes are deferred: `Store.defer_indexes`, or `Store.open` finding them
    deferred) and `bulk(False)` when it ends (`Store.restore_indexes`). Meanwhile nobody reads
    live state (the router is not served before the initial sync ends), so a decoder may let
    it lag — keeping only what decoding needs — and must bring it up to date in `bulk(False)`
    (and before any mempool hook)."""

    def bulk(self, on: bool) -> None:
        """Enter (True) or leave (False) bulk mode; leaving brings live state up to date."""
        ...


def bulk_hook(decoder: object) -> Callable[[bool], None] | None:
    """The decoder's `bulk` hook, if it has one."""
    fn = getattr(decoder, "bulk", None)
    return fn if callable(fn) else None


class Sparse(Protocol):
    """An optional decoder declaration: `sparse = True` says that a block without candidates
    changes nothing for this decoder (its `prepare`, `write` and `committed` would read,
    write and keep nothing), so the store skips all three for such a block. Most blocks hold
    no oracle update, registry link or lending action: four decoders' hooks on every block
    were a measurable share of the initial sync's event loop."""

    sparse: bool


def is_sparse(decoder: object) -> bool:
    """Does the decoder declare `sparse = True`?"""
    return getattr(decoder, "sparse", False) is True


def matches(patterns: Sequence[bytes], raw_tx: bytes) -> bool:
    """The prefilter test for one raw transaction."""
    return any(p in raw_tx for p in patterns)
