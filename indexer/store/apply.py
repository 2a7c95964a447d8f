"""The store: applies blocks, undoes them on reorgs, and feeds the mempool to live state.

Every block is applied in ONE SQLite transaction that also writes its `blocks` row, the stored
tip. So whenever the process dies — before, during or after COMMIT — the database holds the
state after some whole block, never part of one, and a restarted follower resumes from
`tip()`. During the initial sync the follower asks the store to *hold* the transaction open
across blocks (`hold=True`): several consecutive whole blocks then share one transaction,
committed after `batch_blocks` blocks or `batch_seconds`, by the next block applied without
`hold`, by `commit()`, or by any other store call that needs it. The stored tip still always
matches the stored rows; a kill loses at most the uncommitted batch, which is fetched again.
Undo is derived from the rows themselves (each row carries the height that wrote or spent it),
so a reorg rollback is exact without per-block undo blobs.

In-memory state (known owners, the pool snapshot, the mempool) changes only after COMMIT — or,
for held blocks, after the block's writes (the next block's decoding needs it): it then runs
ahead of what other connections see by at most one batch. If anything fails or is cancelled
mid-way, the open transaction (held blocks included) is rolled back and memory state is reloaded
from the database before the next call.

The store itself never waits for SQLite while applying a held block: the tip is kept in
memory, and BEGIN with the block row is `submit`ted to the writer process
(`indexer.store.writer`), which runs it (and the decoders' submitted writes) on another core
while the event loop decodes the next block. A batch's COMMIT is queued too and checked at the
next commit; the writer makes it only if every write of the batch ran, else rolls the batch
back and refuses what follows until the store has reloaded (`_commit_held`).

The follower's whole interface:

    store = await Store.open(path)
    tip = await store.tip()                      # None on a fresh database
    await store.apply_block(height, block)       # Block or raw block bytes
    await store.apply_block(height, block, hold=True)   # initial sync: batch the commits
    await store.commit()                         # end of a run of held blocks
    await store.apply_transactions(height, header, txs)   # e.g. Fulcrum's per-tx fallback
    await store.undo_to(fork_height)             # reorg: back to the last common block
    await store.apply_mempool_tx(tx)             # unconfirmed: live state only
    await store.evict(txids)                     # dropped from the node's mempool
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time as _time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite

from bch.block import HEADER_SIZE, Block, BlockHeader, TxView, parse_view, transactions_holding
from bch.hashes import hash256
from bch.tx import Transaction
from indexer.decoders.base import (
    AnyDecoder,
    BlockBytes,
    BlockContext,
    BlockTx,
    PrevoutFetcher,
    bulk_hook,
    flusher,
    is_sparse,
    matches,
    selector,
)
from indexer.snapshot import PoolSnapshot
from indexer.store import bulk
from indexer.store.db import (
    BULK_WAL_AUTOCHECKPOINT,
    WAL_AUTOCHECKPOINT,
    collect,
    commit_writes,
    open_writer,
    pace,
    submit,
)
from indexer.store.heard import MIGRATIONS as HEARD_MIGRATIONS
from indexer.store.mempool import MempoolTracker
from indexer.store.overlay import MIGRATIONS as OVERLAY_MIGRATIONS
from indexer.store.overlay import overlay_rows, write_overlay
from indexer.store.schema import CORE_MIGRATIONS, Migration, applied_versions, migrate

_log = logging.getLogger("ladle.store")

# Up to this many pending outpoints, conflicts are found by searching the raw block for each
# outpoint; beyond it every block transaction is decoded once instead.
_SEARCH_LIMIT = 256

# Held blocks are committed after this many blocks or this long since the batch began: enough
# to make COMMIT and checkpoints rare during a sync, short enough that a kill loses little.
DEFAULT_BATCH_BLOCKS = 1000
DEFAULT_BATCH_SECONDS = 0.2
# While the indexes are deferred (the bulk of an initial sync, far below the tip) batches are
# longer: a pool created and spent within one batch is then written once, already spent, instead
# of inserted and updated (`Flushing`), and COMMITs and checkpoints are rarer. A kill loses at
# most this second of work, which the restarted follower fetches again. Not longer: the big
# tables are keyed in chain order (cauldron migration #5), so a COMMIT costs only its new pages,
# and longer batches only bunch the writer's work into bursts the event loop waits for at batch
# boundaries and at the tip (docs/benchmarks.md, "Figures the code relies on").
BULK_BATCH_BLOCKS = 20_000
BULK_BATCH_SECONDS = 1.0
# Held blocks' writes go to the writer every this many blocks (one pipe write, which wakes the
# writer, per block costs the loop a context switch each on a busy machine); a COMMIT, or any
# request the store awaits, sends them at once.
PACE_BLOCKS = 8

_BULK_WAL = f"PRAGMA wal_autocheckpoint = {BULK_WAL_AUTOCHECKPOINT}"
_USUAL_WAL = f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}"
_INSERT_BLOCK = (
    "INSERT INTO blocks (height, hash, prev_hash, time, max_time, tx_count, header)"
    " VALUES (?1, ?2, ?3, ?4, max(?4, coalesce((SELECT max_time FROM blocks "
    "WHERE height = ?1 - 1), ?4)), ?5, ?6)"
)


class ChainError(Exception):
    """The block does not extend the stored tip (wrong height or parent): undo first."""


@dataclass(frozen=True, slots=True)
class ChainTip:
    height: int
    hash: bytes  # wire order
    time: int

    @property
    def hash_hex(self) -> str:
        return self.hash[::-1].hex()


@dataclass(frozen=True, slots=True)
class AppliedBlock:
    height: int
    hash: bytes  # wire order
    candidates: dict[str, int] = field(default_factory=dict)  # per decoder: prefilter hits
    rows: dict[str, int] = field(default_factory=dict)  # per decoder: rows written
    already_applied: bool = False  # the same block was already stored at this height


class _Source:
    """A block's transactions, decoded lazily and at most once."""

    def __init__(
        self,
        header: BlockHeader,
        block: Block | None,
        raws: Sequence[bytes],
        txids: Sequence[bytes],
    ) -> None:
        self.header = header
        self._block = block
        self._raws = raws
        self.txids = tuple(txids)
        self._txs: dict[int, Transaction] = {}
        self._views: dict[int, TxView] = {}
        self._bytes: BlockBytes | None = None
        # The 80 header bytes (the block's own, else encoded): its hash and its `blocks` row.
        self.header_bytes = block.raw[:HEADER_SIZE] if block is not None else header.encode()

    @classmethod
    def from_block(cls, block: Block) -> _Source:
        return cls(block.header, block, (), block.txids)

    @classmethod
    def from_transactions(cls, header: BlockHeader, txs: Sequence[Transaction | bytes]) -> _Source:
        raws = [t.to_bytes() if isinstance(t, Transaction) else bytes(t) for t in txs]
        src = cls(header, None, raws, [hash256(r) for r in raws])
        for i, t in enumerate(txs):
            if isinstance(t, Transaction):
                src._txs[i] = t
        return src

    def __len__(self) -> int:
        return len(self.txids)

    def transaction(self, i: int) -> Transaction:
        tx = self._txs.get(i)
        if tx is None:
            if self._block is not None:
                tx = self._block.transaction(i)
            else:
                tx = Transaction.from_bytes(self._raws[i])
            self._txs[i] = tx
        return tx

    def view(self, i: int) -> TxView:
        """Transaction `i`'s `TxView`: the full decode if one was made, else the lean read."""
        view: TxView | None = self._txs.get(i)
        if view is None:
            view = self._views.get(i)
        if view is None:
            block = self._block
            view = block.view(i) if block is not None else parse_view(self._raws[i])[0]
            self._views[i] = view
        return view

    def holds(self, i: int, pattern: bytes) -> bool:
        """Do transaction `i`'s bytes contain `pattern`?"""
        block = self._block
        if block is not None:
            offsets = block.offsets
            return block.raw.find(pattern, offsets[i], offsets[i + 1]) >= 0
        return pattern in self._raws[i]

    def find(self, pattern: bytes) -> list[int]:
        """Indexes of the transactions whose bytes contain `pattern`."""
        if self._block is not None:
            return self._block.find_transactions(pattern)
        return [i for i, raw in enumerate(self._raws) if pattern in raw]

    def block_bytes(self) -> BlockBytes:
        if self._bytes is None:
            if self._block is not None:
                self._bytes = BlockBytes(self._block.raw, self._block.offsets, self.txids)
            else:
                offsets = [0]
                for raw in self._raws:
                    offsets.append(offsets[-1] + len(raw))
                self._bytes = BlockBytes(b"".join(self._raws), offsets, self.txids)
        return self._bytes

    def block_txs(self, decoder: AnyDecoder) -> list[BlockTx]:
        """The prefilter: the decoder's candidates, in block order — those its `select` hook
        picks, or else those containing any of its `patterns` — each decoded on first use
        (`BlockTx.tx` fully, `BlockTx.view` lean)."""
        return self.candidates(selector(decoder), decoder.patterns)

    def candidates(
        self, select: Callable[[BlockBytes], Iterable[int]] | None, patterns: Sequence[bytes]
    ) -> list[BlockTx]:
        """`block_txs` given the decoder's `select` hook (or None) and `patterns`."""
        if select is not None:
            hits = set(select(self.block_bytes()))
        else:
            block = self._block
            if block is not None:  # (`find`, without its calls per pattern)
                raw, offsets = block.raw, block.offsets
                hits = {i for p in patterns for i in transactions_holding(raw, offsets, p)}
            else:
                hits = {i for p in patterns for i in self.find(p)}
        if not hits:
            return []
        txids = self.txids
        return [BlockTx(i, txids[i], source=self) for i in sorted(hits)]


class Store:
    """The indexer's SQLite store (single writer). Methods are serialized by a lock."""

    def __init__(
        self,
        conn: aiosqlite.Connection,
        decoders: Sequence[AnyDecoder],
        snapshot: PoolSnapshot,
        *,
        batch_blocks: int = DEFAULT_BATCH_BLOCKS,
        batch_seconds: float = DEFAULT_BATCH_SECONDS,
        bulk_batch_blocks: int = BULK_BATCH_BLOCKS,
        bulk_batch_seconds: float = BULK_BATCH_SECONDS,
    ) -> None:
        names = [d.name for d in decoders]
        if len(set(names)) != len(names):
            raise ValueError(f"decoder names must be unique: {names}")
        if batch_blocks < 1 or bulk_batch_blocks < 1:
            raise ValueError("a batch holds at least one block")
        self.conn = conn
        self.decoders = tuple(decoders)
        self.snapshot = snapshot
        self.batch_blocks = batch_blocks
        self.batch_seconds = batch_seconds
        self.bulk_batch_blocks = bulk_batch_blocks
        self.bulk_batch_seconds = bulk_batch_seconds
        self._flushers = [f for d in self.decoders if (f := flusher(d)) is not None]
        self._selectors = [(d, selector(d)) for d in self.decoders]
        self._sparse = frozenset(d.name for d in self.decoders if is_sparse(d))
        self._bulk_hooks = [b for d in self.decoders if (b := bulk_hook(d)) is not None]
        self._lock = asyncio.Lock()
        self._mempool = MempoolTracker()
        self._dirty = True  # in-memory state not yet loaded
        self._tip_now: ChainTip | None = None  # valid while not dirty
        self._held = 0  # blocks applied in the open transaction, not yet committed
        self._held_since = 0.0  # monotonic time the open transaction began
        # The deferred indexes' definitions (`defer_indexes`; empty when none are deferred).
        self._deferred_defs: list[tuple[str, str]] = []
        self._restore_soon = False  # `restore_indexes_soon`: built by the next block's batch
        # Bulk-length batches, from a batch begun with the indexes deferred until the run of
        # held blocks ends (`commit`): the blocks after an early rebuild batch as before it.
        self._bulk_run = False
        self._bulk_wal = False  # checkpoints spaced for a bulk run (`_BULK_WAL`)
        # A batch's COMMIT queued on the writer and not yet checked (see `_commit_held`).
        self._pending_commit: asyncio.Future[BaseException | None] | None = None
        # What the mempool overlay holds now (rows, base tip); None: rewrite at the next call.
        self._overlay_written: tuple[list[tuple[object, ...]], tuple[int, bytes] | None] | None = (
            None
        )
        # Where decoders may fetch outputs the index never saw (the follower sets its server).
        self.prevouts: PrevoutFetcher | None = None

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        snapshot: PoolSnapshot | None = None,
        decoders: Sequence[AnyDecoder] | None = None,
        batch_blocks: int = DEFAULT_BATCH_BLOCKS,
        batch_seconds: float = DEFAULT_BATCH_SECONDS,
        bulk_batch_blocks: int = BULK_BATCH_BLOCKS,
        bulk_batch_seconds: float = BULK_BATCH_SECONDS,
    ) -> Store:
        """Open (creating and migrating as needed) and load in-memory state.

        Default decoders: every registered one, sharing `snapshot`. Explicit `decoders` must
        have been created with the same snapshot (`create_decoders(snapshot=…)`).
        `batch_blocks`/`batch_seconds`: when held blocks are committed (see the module doc);
        `bulk_…`: the same while the indexes are deferred (`defer_indexes`).
        """
        # In the function: the decoders import the store's tables, so a module-level import is
        # a cycle (the one `lint-imports` still ignores, see pyproject.toml).
        from indexer.decoders import create_decoders

        snap = snapshot if snapshot is not None else PoolSnapshot()
        chosen = list(decoders) if decoders is not None else create_decoders(snapshot=snap)
        conn = await open_writer(path)
        try:
            migrations = [
                *CORE_MIGRATIONS,
                *OVERLAY_MIGRATIONS,
                *HEARD_MIGRATIONS,
                *(m for d in chosen for m in d.migrations),
            ]
            if await bulk.deferred(conn) and await _pending(conn, migrations):
                await bulk.restore(conn)  # migrations find the schema they wrote
            await migrate(conn, migrations)
            store = cls(
                conn,
                chosen,
                snap,
                batch_blocks=batch_blocks,
                batch_seconds=batch_seconds,
                bulk_batch_blocks=bulk_batch_blocks,
                bulk_batch_seconds=bulk_batch_seconds,
            )
            await store._reload()
            await store._sync_overlay()  # a previous run's overlay is stale: start empty
        except BaseException:
            await conn.close()
            raise
        return store

    async def close(self) -> None:
        """Commit any held blocks (they are whole) and close."""
        try:
            async with self._lock:
                if not self._dirty:
                    await self._commit_held()
        finally:
            await self.conn.close()

    async def commit(self) -> None:
        """Commit the blocks applied with `hold=True` so far, and check the batches committed
        along the way (no-op if there are none), then let SQLite checkpoint the WAL without
        waiting for readers."""
        async with self._lock:
            self._bulk_run = False
            if (self._held or self._pending_commit is not None) and not self._dirty:
                await self._commit_held()
                await self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            await self._end_bulk_wal()
            await self._sync_overlay()

    async def _end_bulk_wal(self) -> None:
        """Back to the usual checkpoints once a bulk run ends (`indexer.store.db`): the next
        COMMIT past them copies the run's WAL into the database."""
        if self._bulk_wal:
            self._bulk_wal = False
            await self.conn.execute(_USUAL_WAL)

    async def defer_indexes(self) -> int:
        """Drop the secondary indexes for a long initial sync (`indexer.store.bulk`); how many.
        Held blocks are committed first."""
        async with self._lock:
            await self._ensure_loaded()
            await self._commit_held()
            dropped = await bulk.defer(self.conn)
            self._set_deferred(await bulk.definitions(self.conn))
            return dropped

    async def restore_indexes(self) -> int:
        """Build the deferred secondary indexes again (no-op if none are); how many."""
        async with self._lock:
            if not self.indexes_deferred:
                return 0
            await self._ensure_loaded()
            await self._commit_held()
            built = await bulk.restore(self.conn)
            self._set_deferred([])
            return built

    def restore_indexes_soon(self) -> bool:
        """Have the deferred indexes built in the batch of the next block applied, without
        waiting: the writer builds them while the event loop decodes the blocks that follow
        (the last stretch below the tip). The batch's COMMIT makes the rebuild, like its
        blocks, all or nothing; if the batch fails, the indexes are still deferred (reloaded
        from the database). True if a rebuild is now due."""
        self._restore_soon = self.indexes_deferred
        return self._restore_soon

    def _set_deferred(self, defs: list[tuple[str, str]]) -> None:
        """Deferred indexes mark the initial sync's bulk mode, which decoders hear of
        (`indexer.decoders.base.Bulk`: live state may lag until it ends)."""
        was = self.indexes_deferred
        self._deferred_defs = defs
        self._restore_soon = False
        if self.indexes_deferred != was:
            for hook in self._bulk_hooks:
                hook(self.indexes_deferred)

    @property
    def indexes_deferred(self) -> bool:
        """The secondary indexes are dropped (`defer_indexes`): the initial sync's bulk mode."""
        return bool(self._deferred_defs)

    @property
    def held_blocks(self) -> int:
        """Blocks applied but not yet committed (only ever non-zero with `hold=True`)."""
        return self._held

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- chain ---------------------------------------------------------------------------------

    async def tip(self) -> ChainTip | None:
        """The last applied block (None on an empty index); held blocks count as applied."""
        async with self._lock:  # never read a block that is being applied
            await self._ensure_loaded()
            return self._tip_now

    async def block_hash(self, height: int) -> bytes | None:
        """Wire-order hash of the stored block at `height` (to find a reorg's fork point)."""
        async with self._lock:
            return await self._block_hash(height)

    async def _stored_tip(self) -> ChainTip | None:
        rows = list(
            await self.conn.execute_fetchall(
                "SELECT height, hash, time FROM blocks ORDER BY height DESC LIMIT 1"
            )
        )
        if not rows:
            return None
        height, hash_, time = rows[0]
        return ChainTip(height, bytes(hash_)[::-1], time)

    async def _block_hash(self, height: int) -> bytes | None:
        rows = list(
            await self.conn.execute_fetchall("SELECT hash FROM blocks WHERE height = ?", (height,))
        )
        return bytes(rows[0][0])[::-1] if rows else None

    async def apply_block(
        self, height: int, block: Block | bytes, *, time: int | None = None, hold: bool = False
    ) -> AppliedBlock:
        """Apply a whole block at `height`; `time` defaults to the header's. With `hold`, the
        transaction may stay open for the next blocks (see the module doc)."""
        parsed = block if isinstance(block, Block) else Block.from_bytes(block)
        return await self._apply(height, _Source.from_block(parsed), time, hold)

    async def apply_transactions(
        self,
        height: int,
        header: BlockHeader,
        txs: Sequence[Transaction | bytes],
        *,
        time: int | None = None,
        hold: bool = False,
    ) -> AppliedBlock:
        """Apply a block given as its header and its transactions (in block order)."""
        return await self._apply(height, _Source.from_transactions(header, txs), time, hold)

    async def undo_to(self, height: int) -> int:
        """Roll back every block above `height` in one transaction; returns how many."""
        async with self._lock:
            await self._ensure_loaded()
            await self._commit_held()
            rows = await self.conn.execute_fetchall(
                "SELECT count(*) FROM blocks WHERE height > ?", (height,)
            )
            removed = int(next(iter(rows))[0])
            if not removed:
                return 0
            self._dirty = True
            await self.conn.execute("BEGIN IMMEDIATE")
            try:
                for d in reversed(self.decoders):
                    await d.undo_to(self.conn, height)
                await self.conn.execute("DELETE FROM blocks WHERE height > ?", (height,))
                await self.conn.execute("COMMIT")
            except BaseException:
                await self._recover()
                raise
            await self._reload()
            await self._sync_overlay()
            return removed

    # --- mempool -------------------------------------------------------------------------------

    async def apply_mempool_tx(self, tx: Transaction | bytes) -> bool:
        """Apply an unconfirmed transaction to live state (never to the tables). True if some
        decoder uses it (now or already); False if irrelevant or conflicting."""
        raw = tx.to_bytes() if isinstance(tx, Transaction) else bytes(tx)
        parsed = tx if isinstance(tx, Transaction) else Transaction.from_bytes(raw)
        txid = hash256(raw)
        async with self._lock:
            await self._ensure_loaded()
            if txid in self._mempool:
                return True
            tip = self._tip_now
            ctx = BlockContext(0 if tip is None else tip.height + 1, int(_time.time()), b"")
            btx = BlockTx(-1, txid, parsed)
            used = False
            for d in self.decoders:
                if matches(d.patterns, raw) and await d.mempool_add(self.conn, ctx, btx):
                    used = True
            if used:
                self._mempool.add(txid, parsed)
                await self._sync_overlay()
            return used

    async def evict(self, txids: Iterable[bytes]) -> set[bytes]:
        """Drop unconfirmed transactions (and their descendants) from live state."""
        async with self._lock:
            await self._ensure_loaded()
            gone = {t for t in txids if t in self._mempool}
            gone |= self._mempool.descendants(gone)
            if gone:
                for d in self.decoders:
                    d.mempool_evict(gone)
                self._retain_mempool()
                await self._sync_overlay()
            return gone

    def mempool_txids(self) -> set[bytes]:
        return self._mempool.txids()

    # --- internals -----------------------------------------------------------------------------

    async def _apply(self, height: int, src: _Source, time: int | None, hold: bool) -> AppliedBlock:
        header = src.header
        block_hash = hash256(src.header_bytes)
        async with self._lock:
            await self._ensure_loaded()
            tip = self._tip_now
            if tip is not None and height <= tip.height:
                stored = await self._block_hash(height)
                if stored == block_hash:
                    return AppliedBlock(height, block_hash, already_applied=True)
                shown = "nothing" if stored is None else stored[::-1].hex()
                raise ChainError(
                    f"height {height} holds {shown}, not {header.hash_hex}: undo_to first"
                )
            if tip is not None and (height != tip.height + 1 or header.prev_hash != tip.hash):
                raise ChainError(
                    f"block {header.hash_hex} at height {height} does not extend the tip "
                    f"{tip.hash_hex} at height {tip.height}"
                )
            ctx = BlockContext(
                height,
                header.time if time is None else time,
                block_hash,
                src.txids,
                self.prevouts,
            )
            work = [(d, src.candidates(select, d.patterns)) for d, select in self._selectors]
            sparse = self._sparse
            block_row = (
                *(height, block_hash[::-1], header.prev_hash[::-1], ctx.time),
                *(len(src), src.header_bytes),
            )
            self._dirty = True
            try:
                begin = not self._held
                if begin:
                    self._held_since = _time.monotonic()
                # Open the transaction, or check the held one is still open (SQLite ends a
                # transaction itself on some errors, and nothing may then run in autocommit).
                opening = ("begin",) if begin else ("need_tx", "the batch's transaction ended")
                submit(self.conn, (opening, ("exec", _INSERT_BLOCK, block_row)))
                if begin and self.indexes_deferred:
                    self._bulk_run = True
                    if not self._bulk_wal:  # (a connection setting: kept if the batch fails)
                        submit(self.conn, [("exec", _BULK_WAL, ())])
                        self._bulk_wal = True
                self._held += 1
                if self._restore_soon:
                    # The rows kept back in the batch go in before the indexes are built, not
                    # through them (a long batch keeps back most of the sync's pool rows).
                    self._flush_kept()
                    submit(self.conn, bulk.restore_steps(self._deferred_defs))
                    self._set_deferred([])
                results: list[Sequence[Any]] = []
                for d, txs in work:
                    if not txs and d.name in sparse:
                        results.append(())  # nothing to read, write or keep (`Sparse`)
                        continue
                    order, context = await d.prepare(self.conn, ctx, txs)
                    rows: list[Any] = (
                        [row for t in order for row in d.decode(t, context)] if order else []
                    )
                    await d.write(self.conn, ctx, rows)
                    results.append(rows)
                if not hold or self._batch_full():
                    await self._commit_held(wait=not hold)
                elif self._held % PACE_BLOCKS == 0:
                    await pace(self.conn)
            except BaseException:
                await self._recover()
                raise
            tracked = len(self._mempool) > 0  # (none during an initial sync)
            evicted = self._block_conflicts(src) if tracked else set()
            candidates: dict[str, int] = {}
            written: dict[str, int] = {}
            for (d, txs), block_rows in zip(work, results, strict=True):
                if txs or d.name not in sparse:
                    d.committed(ctx, block_rows, evicted)
                candidates[d.name] = len(txs)
                written[d.name] = len(block_rows)
            if tracked:
                self._mempool.discard(src.txids)
                self._retain_mempool()
            self._tip_now = ChainTip(height, block_hash, ctx.time)
            self._dirty = False
            await self._sync_overlay()
            return AppliedBlock(height, block_hash, candidates, written)

    def _batch_full(self) -> bool:
        if self._bulk_run:
            blocks, seconds = self.bulk_batch_blocks, self.bulk_batch_seconds
        else:
            blocks, seconds = self.batch_blocks, self.batch_seconds
        return self._held >= blocks or _time.monotonic() - self._held_since >= seconds

    async def _commit_held(self, *, wait: bool = True) -> None:
        """Commit the held blocks; the writer makes the COMMIT only if every write of the batch
        ran, else rolls the batch back (its kept-back rows with it) and this raises.

        `wait=False` (a batch boundary of the initial sync) queues the COMMIT and checks it at
        the next commit: the event loop goes on decoding while the writer catches up, and is
        never more than one batch ahead of it. A batch found to have failed then is gone from
        the database with every block after it (the writer refuses them), and the in-memory
        state is reloaded from the database, as after any failed write."""
        try:
            await self._check_commit()
            if self._held:
                self._flush_kept()
                self._held = 0
                self._pending_commit = commit_writes(self.conn)
                if wait:
                    await self._check_commit()
        except BaseException:
            await self._recover()
            raise

    def _flush_kept(self) -> None:
        """Queue the rows decoders kept back within the batch (`Flushing`)."""
        for flush in self._flushers:
            flush(self.conn)

    async def _check_commit(self) -> None:
        pending, self._pending_commit = self._pending_commit, None
        if pending is not None:
            error = await pending
            if error is not None:
                raise error

    def _block_conflicts(self, src: _Source) -> set[bytes]:
        """Pending txs that a block transaction double-spends, plus their descendants."""
        in_block = set(src.txids)
        pending = {op: t for op, t in self._mempool.spenders().items() if t not in in_block}
        if not pending:
            return set()
        losers: set[bytes] = set()
        if len(pending) <= _SEARCH_LIMIT:
            for op, txid in pending.items():
                for i in src.find(op.encode()):
                    if any(inp.outpoint == op for inp in src.transaction(i).inputs):
                        losers.add(txid)
        else:
            for i in range(len(src)):
                for inp in src.transaction(i).inputs:
                    loser = pending.get(inp.outpoint)
                    if loser is not None:
                        losers.add(loser)
        return losers | self._mempool.descendants(losers)

    async def _sync_overlay(self) -> None:
        """Rewrite the mempool overlay (`indexer.store.overlay`) if the snapshot's unconfirmed
        part or the tip it sits on changed since the last write. Not while blocks are held
        (their transaction is open; no mempool is tracked during a sync anyway): the next call
        after their commit writes it. An overlay that cannot be written is logged and retried
        at the next call: it is beside the index, which it never holds back."""
        if self._held or self._dirty:
            return
        rows = overlay_rows(self.snapshot)
        tip = self._tip_now
        base = None if tip is None else (tip.height, tip.hash)
        if self._overlay_written is not None:
            last_rows, last_base = self._overlay_written
            if last_rows == rows and (last_base == base or not rows):
                return  # unchanged, or empty before and after: readers see nothing either way
        try:
            await write_overlay(self.conn, rows, *(base or (None, None)))
        except Exception:
            _log.exception("writing the mempool overlay failed (retried at the next change)")
            self._overlay_written = None
            return
        self._overlay_written = (rows, base)

    def _retain_mempool(self) -> None:
        keep: set[bytes] = set()
        for d in self.decoders:
            keep.update(d.mempool_txids())
        self._mempool.retain(keep)

    async def _ensure_loaded(self) -> None:
        if self._dirty:
            await self._recover()

    async def _recover(self) -> None:
        """After a failure or cancellation: end any open transaction, reload memory state."""
        self._dirty = True
        self._held = 0
        self._bulk_run = False
        pending, self._pending_commit = self._pending_commit, None
        with contextlib.suppress(Exception):  # already reported, or about to be rolled back
            if pending is not None:
                await pending
            await collect(self.conn)
        await self.conn.execute("SELECT 1")  # queued behind whatever was in flight
        if self.conn.in_transaction:
            await self.conn.execute("ROLLBACK")
        await self._end_bulk_wal()
        await self._reload()

    async def _reload(self) -> None:
        for d in self.decoders:
            await d.load(self.conn)
        # Whether the indexes are deferred is the database's word (a failed batch may have
        # rolled back their rebuild).
        self._set_deferred(await bulk.definitions(self.conn))
        self._retain_mempool()
        self._tip_now = await self._stored_tip()
        self._dirty = False


async def _pending(conn: aiosqlite.Connection, migrations: Sequence[Migration]) -> bool:
    applied = await applied_versions(conn)
    return any(m.version > applied.get(m.component, 0) for m in migrations)
