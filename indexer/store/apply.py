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

    store = await Store.open(path, decoders=…)   # or indexer.index.open_store(path)
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bch.block import Block, BlockHeader
from bch.hashes import hash256
from bch.tx import Transaction
from indexer.snapshot import PoolSnapshot
from indexer.store import bulk
from indexer.store.batching import (
    BULK_BATCH_BLOCKS,
    BULK_BATCH_SECONDS,
    DEFAULT_BATCH_BLOCKS,
    DEFAULT_BATCH_SECONDS,
    Batch,
    BatchLimits,
)
from indexer.store.db import BULK_WAL_AUTOCHECKPOINT, WAL_AUTOCHECKPOINT, open_writer
from indexer.store.decoder import AnyDecoder, BlockContext, PrevoutFetcher
from indexer.store.heard import MIGRATIONS as HEARD_MIGRATIONS
from indexer.store.mempool import Mempool
from indexer.store.overlay import MIGRATIONS as OVERLAY_MIGRATIONS
from indexer.store.overlay import overlay_rows, write_overlay
from indexer.store.schema import CORE_MIGRATIONS, Migration, applied_versions, migrate
from indexer.store.source import BlockSource
from indexer.store.writer import Writer

_log = logging.getLogger("ladle.store")

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
    candidates: dict[str, int] = field(default_factory=dict)  # per decoder: selected candidates
    rows: dict[str, int] = field(default_factory=dict)  # per decoder: rows written
    already_applied: bool = False  # the same block was already stored at this height


class Store:
    """The indexer's SQLite store (single writer). Methods are serialized by a lock."""

    def __init__(
        self,
        conn: Writer,
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
        self.conn = conn
        self.decoders = tuple(decoders)
        self.snapshot = snapshot
        self._batch = Batch(
            BatchLimits(batch_blocks, batch_seconds),
            BatchLimits(bulk_batch_blocks, bulk_batch_seconds),
        )
        self._lock = asyncio.Lock()
        self._mempool = Mempool(self.decoders)
        self._dirty = True  # in-memory state not yet loaded
        self._tip_now: ChainTip | None = None  # valid while not dirty
        # The deferred indexes' definitions (`defer_indexes`; empty when none are deferred).
        self._deferred_defs: list[tuple[str, str]] = []
        self._restore_soon = False  # `restore_indexes_soon`: built by the next block's batch
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
        decoders: Sequence[AnyDecoder],
        snapshot: PoolSnapshot | None = None,
        batch_blocks: int = DEFAULT_BATCH_BLOCKS,
        batch_seconds: float = DEFAULT_BATCH_SECONDS,
        bulk_batch_blocks: int = BULK_BATCH_BLOCKS,
        bulk_batch_seconds: float = BULK_BATCH_SECONDS,
    ) -> Store:
        """Open (creating and migrating as needed) and load in-memory state.

        The `decoders` must have been created with `snapshot` (`create_decoders(snapshot=…)`;
        `indexer.index.open_store` opens the store with every registered decoder).
        `batch_blocks`/`batch_seconds`: when held blocks are committed (see the module doc);
        `bulk_…`: the same while the indexes are deferred (`defer_indexes`).
        """
        snap = snapshot if snapshot is not None else PoolSnapshot()
        chosen = list(decoders)
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
            self._batch.bulk_run = False
            if (self._batch.held or self._pending_commit is not None) and not self._dirty:
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
        (`Decoder.bulk`: live state may lag until it ends)."""
        was = self.indexes_deferred
        self._deferred_defs = defs
        self._restore_soon = False
        if self.indexes_deferred != was:
            for d in self.decoders:
                d.bulk(self.indexes_deferred)

    @property
    def indexes_deferred(self) -> bool:
        """The secondary indexes are dropped (`defer_indexes`): the initial sync's bulk mode."""
        return bool(self._deferred_defs)

    @property
    def held_blocks(self) -> int:
        """Blocks applied but not yet committed (only ever non-zero with `hold=True`)."""
        return self._batch.held

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
        return await self._apply(height, BlockSource.from_block(parsed), time, hold)

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
        return await self._apply(height, BlockSource.from_transactions(header, txs), time, hold)

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
            height = 0 if tip is None else tip.height + 1
            used = await self._mempool.add(self.conn, height, txid, parsed, raw)
            if used:
                await self._sync_overlay()
            return used

    async def evict(self, txids: Iterable[bytes]) -> set[bytes]:
        """Drop unconfirmed transactions (and their descendants) from live state."""
        async with self._lock:
            await self._ensure_loaded()
            gone = self._mempool.evict(txids)
            if gone:
                await self._sync_overlay()
            return gone

    def mempool_txids(self) -> set[bytes]:
        return self._mempool.tracker.txids()

    # --- internals -----------------------------------------------------------------------------

    async def _apply(
        self, height: int, src: BlockSource, time: int | None, hold: bool
    ) -> AppliedBlock:
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
            work = [(d, src.candidates(d)) for d in self.decoders]
            batch = self._batch
            conn = self.conn
            block_row = (
                *(height, block_hash[::-1], header.prev_hash[::-1], ctx.time),
                *(len(src), src.header_bytes),
            )
            self._dirty = True
            try:
                begin = not batch.held
                if begin:
                    batch.begin()
                # Open the transaction, or check the held one is still open (SQLite ends a
                # transaction itself on some errors, and nothing may then run in autocommit).
                opening = ("begin",) if begin else ("need_tx", "the batch's transaction ended")
                conn.submit((opening, ("exec", _INSERT_BLOCK, block_row)))
                if begin and self.indexes_deferred:
                    batch.bulk_run = True
                    if not self._bulk_wal:  # (a connection setting: kept if the batch fails)
                        conn.submit([("exec", _BULK_WAL, ())])
                        self._bulk_wal = True
                batch.held += 1
                if self._restore_soon:
                    # The rows kept back in the batch go in before the indexes are built, not
                    # through them (a long batch keeps back most of the sync's pool rows).
                    self._flush_kept()
                    conn.submit(bulk.restore_steps(self._deferred_defs))
                    self._set_deferred([])
                results: list[Sequence[Any]] = []
                for d, txs in work:
                    if not txs and d.sparse:
                        results.append(())  # nothing to read, write or keep
                        continue
                    order, state = await d.prepare(conn, ctx, txs)
                    rows: list[Any] = d.decode_block(order, state) if order else []
                    await d.write(conn, ctx, rows)
                    results.append(rows)
                if not hold or batch.full():
                    await self._commit_held(wait=not hold)
                elif batch.pace_due():
                    await conn.pace()
            except BaseException:
                await self._recover()
                raise
            tracked = len(self._mempool) > 0  # (none during an initial sync)
            evicted = self._mempool.conflicts(src) if tracked else set()
            candidates: dict[str, int] = {}
            written: dict[str, int] = {}
            for (d, txs), block_rows in zip(work, results, strict=True):
                if txs or not d.sparse:
                    d.committed(ctx, block_rows, evicted)
                candidates[d.name] = len(txs)
                written[d.name] = len(block_rows)
            if tracked:
                self._mempool.settled(src.txids)
            self._tip_now = ChainTip(height, block_hash, ctx.time)
            self._dirty = False
            await self._sync_overlay()
            return AppliedBlock(height, block_hash, candidates, written)

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
            if self._batch.held:
                self._flush_kept()
                self._batch.reset()
                self._pending_commit = self.conn.commit_queued()
                if wait:
                    await self._check_commit()
        except BaseException:
            await self._recover()
            raise

    def _flush_kept(self) -> None:
        """Queue the rows decoders kept back within the batch (`Decoder.flush`)."""
        for d in self.decoders:
            d.flush(self.conn)

    async def _check_commit(self) -> None:
        pending, self._pending_commit = self._pending_commit, None
        if pending is not None:
            error = await pending
            if error is not None:
                raise error

    async def _sync_overlay(self) -> None:
        """Rewrite the mempool overlay (`indexer.store.overlay`) if the snapshot's unconfirmed
        part or the tip it sits on changed since the last write. Not while blocks are held
        (their transaction is open; no mempool is tracked during a sync anyway): the next call
        after their commit writes it. An overlay that cannot be written is logged and retried
        at the next call: it is beside the index, which it never holds back."""
        if self._batch.held or self._dirty:
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

    async def _ensure_loaded(self) -> None:
        if self._dirty:
            await self._recover()

    async def _recover(self) -> None:
        """After a failure or cancellation: end any open transaction, reload memory state."""
        self._dirty = True
        self._batch.reset()
        self._batch.bulk_run = False
        pending, self._pending_commit = self._pending_commit, None
        with contextlib.suppress(Exception):  # already reported, or about to be rolled back
            if pending is not None:
                await pending
            await self.conn.collect()
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
        self._mempool.retain()
        self._tip_now = await self._stored_tip()
        self._dirty = False


async def _pending(conn: Writer, migrations: Sequence[Migration]) -> bool:
    applied = await applied_versions(conn)
    return any(m.version > applied.get(m.component, 0) for m in migrations)
