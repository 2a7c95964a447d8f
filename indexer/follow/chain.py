"""The chain side of the follower: walk the server's chain from the stored tip, detect reorgs,
roll back, and apply blocks.

Headers are linked by hash: every header fetched must name the previous one (or the stored tip)
as its parent, and meet the proof of work its `bits` claim. The first header that does not
connect to the stored tip means the server's chain is not ours above some height — a reorg, or
a server on another branch — and the fork point is found by comparing stored hashes with the
server's headers (exponential probing, then bisection: hashes commit to all their ancestors, so
"same block at height h" holds for every h up to the fork and for none above). `Store.undo_to`
removes everything above it in one transaction; the blocks of the server's chain are then
applied, each in one transaction with the tip — or, more than `HOLD_DISTANCE` blocks below the
server's tip, several consecutive whole blocks per transaction (`Store.apply_block(hold=True)`;
the run is committed when it ends). A crash at any moment leaves the index at some whole block
of some chain, and the next run continues from there the same way.

More than `DEFAULT_BULK_DISTANCE` blocks below the server's tip, the store's secondary indexes
are dropped for the run and built again near the tip (`Store.defer_indexes`,
`indexer.store.bulk`): nobody reads the index that far behind, and keeping every index up to
date row by row costs the writer more than building them once. The build is queued with the
blocks about `RESTORE_AHEAD` below the tip, so the writer makes it while the event loop decodes
the last ones, and the walk returns once it is committed.

With `offload_distance` set (off by default, see `DEFAULT_OFFLOAD_DISTANCE`), a walk starting
more than that many blocks below the server's tip fetches its blocks in a child process
(`indexer.follow.fetch_process`), which also checks and scans them: the event loop is left the
decoding.

The server's chain is authoritative (the pool talks to one server at a time): when it is behind
us on our own chain we wait; when it is on another branch we follow it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bch.block import BlockHeader
from bch.hashes import hash256
from indexer.electrum import (
    BlockChanged,
    ElectrumClient,
    ElectrumClientError,
    ElectrumError,
    ElectrumProtocolError,
    GenesisCoinbase,
    ServerBusy,
    UnknownTransaction,
    UnsupportedMethod,
)
from indexer.electrum.errors import BAD_REQUEST
from indexer.follow.fetch import (
    DEFAULT_MAX_BYTES,
    DEFAULT_WINDOW,
    BlockPipeline,
    Fetch,
    FetchedBlock,
)
from indexer.follow.fetch_process import FetchProcess
from indexer.follow.progress import Progress
from indexer.follow.settings import ClientSettings
from indexer.follow.source import ChainSource
from indexer.follow.source_electrum import ElectrumSource, chain_source
from indexer.store import AppliedBlock, ChainTip, Store
from runtime.logs import fields

log = logging.getLogger("indexer.follow")

MAINNET_GENESIS = "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f"
CASHTOKENS_HEIGHT = 792_772  # mainnet activation (May 2023): nothing Cauldron exists before it
HEADERS_PER_CALL = 2016  # one call per walk step; servers may answer fewer (their maximum)
MAX_RESTARTS = 8  # walks in a row that change nothing before the round gives up
# Blocks further than this below the server's tip are applied with `hold` (the store batches
# their commits); the last ones, and every block while following, commit one by one.
HOLD_DISTANCE = 8
# Further than this below the server's tip, a walk defers the secondary indexes (see above).
DEFAULT_BULK_DISTANCE = 5_000
# The writer starts building the deferred indexes when the walk fetches the headers that end
# this close to the tip, so the build runs beside the decoding of the last blocks, not after.
RESTORE_AHEAD = 2_000
# Off by default (None): a walk starting further than `offload_distance` below the server's tip
# fetches in a child process (see the module doc). When the server shares the machine's cores
# the child costs more CPU than it saves the loop, so the sync is slower with it
# (docs/benchmarks.md); it is a tested option for a server on another machine.
DEFAULT_OFFLOAD_DISTANCE: int | None = None

BlockCallback = Callable[[AppliedBlock, FetchedBlock], None]


def default_start_height(genesis_hash: str | None) -> int:
    """Where a fresh index starts: CashTokens activation on mainnet, else the genesis (the
    devnet, test networks)."""
    return CASHTOKENS_HEIGHT if genesis_hash == MAINNET_GENESIS else 0


def chain_moved(exc: ElectrumClientError) -> bool:
    """Whether an error met during a walk means the server's chain changed under it, so that
    walking again can succeed: BlockChanged, a height the server no longer has (code 1), a
    transaction of the walked block it no longer knows. Anything else (a daemon error, an
    overloaded server, the genesis coinbase) would fail the same way again at once: a walk
    that retried it would spin; the round fails instead and the follower backs off."""
    if isinstance(exc, BlockChanged | UnknownTransaction):
        return True
    return (
        isinstance(exc, ElectrumError)
        and not isinstance(exc, ServerBusy | GenesisCoinbase | UnsupportedMethod)
        and exc.code == BAD_REQUEST
    )


def link_headers(
    prev_hash: bytes | None, first_height: int, headers: Sequence[bytes]
) -> list[tuple[int, bytes]] | None:
    """(height, header) pairs for the longest prefix of `headers` (fetched from `first_height`)
    that forms one chain on top of `prev_hash` (wire order; None: a fresh index, no parent to
    check). A break after the first header (the server switched chains between two calls) ends
    the prefix there: the next walk finds the fork.

    None when the first header does not connect (the server's chain forks below it).
    ElectrumProtocolError when a header fails its proof of work: a server that sends one is
    not following any chain.
    """
    linked: list[tuple[int, bytes]] = []
    expected = prev_hash
    for i, raw in enumerate(headers):
        header = BlockHeader.from_bytes(raw)
        if expected is not None and header.prev_hash != expected:
            return linked if i else None
        if not header.check_proof_of_work():
            raise ElectrumProtocolError(
                f"header {header.hash_hex} at height {first_height + i} fails its proof of work"
            )
        linked.append((first_height + i, raw))
        expected = hash256(raw)
    return linked


@dataclass(frozen=True, slots=True)
class CatchUp:
    """What one catch-up did."""

    applied: int  # blocks applied
    undone: int  # blocks rolled back (reorgs)
    height: int | None  # the stored tip afterwards


class ChainFollower:
    def __init__(
        self,
        source: ChainSource | ElectrumClient,
        store: Store,
        *,
        start_height: int = 0,
        window: int = DEFAULT_WINDOW,
        max_bytes: int = DEFAULT_MAX_BYTES,
        progress: Progress | None = None,
        on_block: BlockCallback | None = None,
        fetch: Fetch | None = None,
        bulk_distance: int | None = DEFAULT_BULK_DISTANCE,
        offload_distance: int | None = DEFAULT_OFFLOAD_DISTANCE,
    ) -> None:
        """`bulk_distance`: how far below the server's tip a walk defers the secondary indexes
        (None: never). `offload_distance`: how far below it a walk fetches in a child process
        (None: never; never either with a `fetch` of the caller's, or from a node)."""
        if start_height < 0:
            raise ValueError("the start height cannot be negative")
        self.source = source = chain_source(source)
        self.store = store
        self.start_height = start_height
        self.window = window
        self.max_bytes = max_bytes
        self.progress = progress
        self.on_block = on_block
        self.bulk_distance = bulk_distance
        self._restore_began: float | None = None  # when the indexes were queued to be built
        self.fetch: Fetch = fetch or source.block
        self.offload_distance = None if fetch is not None else offload_distance
        self._offload: FetchProcess | None = None  # the walk's fetch process, while it runs
        self.offloaded = 0  # blocks fetched by a child process, over every walk
        if store.prevouts is None:  # decoders may ask the server for outputs never indexed
            store.prevouts = source.prevouts
        self.server_height = -1  # best server tip height seen (notifications, header walks)
        self.following = False  # past the initial sync: log every block
        self.blocks_applied = 0  # since this follower was created
        self._size_estimate = 1024.0 * 1024.0

    # --- the walk -------------------------------------------------------------------------------

    async def catch_up(self) -> CatchUp:
        """Apply the server's chain up to its tip (rolling back first where it differs)."""
        first = self.blocks_applied
        undone = 0
        stalls = 0  # walks in a row that changed nothing
        try:
            while True:
                if stalls > MAX_RESTARTS:
                    raise ElectrumProtocolError(
                        "the server's chain keeps changing under the walk; giving up this round"
                    )
                tip = await self.store.tip()
                start = self.start_height if tip is None else tip.height + 1
                before = self.blocks_applied
                try:
                    headers = await self.source.headers(start, HEADERS_PER_CALL)
                    if not headers:
                        if tip is None:
                            return CatchUp(self.blocks_applied - first, undone, None)
                        done, removed = await self._at_server_tip(tip)
                        if done:
                            await self._restore_indexes()
                            return CatchUp(self.blocks_applied - first, undone, tip.height)
                        undone += removed
                        stalls = 0 if removed else stalls + 1
                        continue
                    self.server_height = max(self.server_height, start + len(headers) - 1)
                    linked = link_headers(None if tip is None else tip.hash, start, headers)
                    if linked is None:
                        assert tip is not None  # a fresh index links anything
                        undone += await self._roll_back(tip.height, tip.height)
                        stalls = 0
                        continue
                    if not self.following:  # the initial sync
                        await self._defer_indexes(start)
                        await self._start_offload(start)
                        if start + len(headers) + RESTORE_AHEAD > self.server_height:
                            self._restore_indexes_soon()  # the last stretch below the tip
                    await self._apply(linked, tip)
                except (BlockChanged, ElectrumError) as exc:
                    if not chain_moved(exc):
                        raise  # the server cannot serve this walk: the round fails, backs off
                    # The chain moved under us (or a height vanished): walk again from the tip.
                    stalls = 0 if self.blocks_applied != before else stalls + 1
                    log.info(
                        "chain changed during catch-up; walking again",
                        extra=fields(event="restart", reason=str(exc)),
                    )
                    continue
                stalls = 0
        finally:
            try:
                await self.store.commit()  # whole blocks, whatever ended the walk
            finally:
                if self._offload is not None:
                    offload, self._offload = self._offload, None
                    await offload.close()
                    self.offloaded += offload.fetched
                if self.progress is not None:
                    self.progress.end()

    async def _start_offload(self, next_height: int) -> None:
        """Fetch in a child process from here to the tip, if that is far enough (see the
        module doc) and the client's settings can be given to another process."""
        distance = self.offload_distance
        if distance is None or self._offload is not None:
            return
        if self.server_height - next_height < distance:
            return
        source = self.source
        settings = ClientSettings.of(source.client) if isinstance(source, ElectrumSource) else None
        if settings is None:
            return
        self._offload = FetchProcess(settings, self.fetch)
        await self._offload.start()
        log.info(
            "fetching blocks in a child process",
            extra=fields(event="fetch_process", height=next_height, alive=self._offload.alive),
        )

    async def _defer_indexes(self, next_height: int) -> None:
        distance = self.bulk_distance
        if distance is None or self.store.indexes_deferred:
            return
        if self.server_height - next_height < distance:  # headers come 2,016 at a time
            height, _ = await self.source.tip()
            self.server_height = max(self.server_height, height)
        if self.server_height - next_height >= distance:
            dropped = await self.store.defer_indexes()
            log.info(
                "secondary indexes deferred for the initial sync",
                extra=fields(
                    event="indexes_deferred",
                    indexes=dropped,
                    behind=self.server_height - next_height + 1,
                ),
            )

    def _restore_indexes_soon(self) -> None:
        """Near the tip: the writer builds the indexes while the loop decodes the last blocks."""
        if self._restore_began is None and self.store.restore_indexes_soon():
            self._restore_began = time.monotonic()
            log.info(
                "near the tip: building the secondary indexes",
                extra=fields(event="indexes_building"),
            )

    async def _restore_indexes(self) -> None:
        """At the tip: the indexes are built (and committed) before the walk returns."""
        began, self._restore_began = self._restore_began, None
        if began is not None:  # queued with the last blocks: wait for their commit
            await self.store.commit()
        if self.store.indexes_deferred:  # never queued, or its batch failed and was undone
            log.info(
                "at the tip: building the secondary indexes",
                extra=fields(event="indexes_building"),
            )
            began = time.monotonic()
            await self.store.restore_indexes()
        if began is not None:
            log.info(
                "secondary indexes built",
                extra=fields(event="indexes_built", seconds=round(time.monotonic() - began, 2)),
            )

    async def _at_server_tip(self, tip: ChainTip) -> tuple[bool, int]:
        """Nothing above our tip: (True, 0) if we are at the server's tip (or ahead of a server
        that lags on our chain); (False, blocks undone) to walk again — new blocks arrived, or
        the server is on another branch and we rolled back to the fork."""
        height, header = await self.source.tip()
        self.server_height = max(self.server_height, height)
        if height > tip.height:
            return False, 0  # blocks arrived since the headers call
        stored = await self.store.block_hash(height)
        if stored is None or stored == hash256(header):
            return True, 0  # (None: the server lags below our first block; nothing to compare)
        return False, await self._roll_back(tip.height, height)

    async def _roll_back(self, tip_height: int, mismatch: int) -> int:
        """Undo down to the fork point with the server's chain; `mismatch` is a height known
        to differ (or absent on the server). Returns the number of blocks undone."""
        fork = await self.find_fork(mismatch)
        removed = await self.store.undo_to(fork)
        log.warning(
            "reorg: rolled back to the fork point",
            extra=fields(event="reorg", fork=fork, depth=tip_height - fork, undone=removed),
        )
        return removed

    async def find_fork(self, mismatch: int) -> int:
        """The highest height at which the stored block is the server's (−1: none is). Heights
        below the first stored block count as shared (nothing there to undo)."""
        server_tip, _ = await self.source.tip()
        self.server_height = max(self.server_height, server_tip)

        async def same(height: int) -> bool:
            if height < 0:
                return True
            stored = await self.store.block_hash(height)
            if stored is None:
                return True
            if height > server_tip:
                return False
            return hash256(await self.source.header(height)) == stored

        high = mismatch  # known to differ
        low = -1  # known (or defined) to be shared
        step = 1
        while high - step > low:
            probe = high - step
            if await same(probe):
                low = probe
                break
            high = probe
            step *= 2
        while high - low > 1:
            middle = (low + high) // 2
            if await same(middle):
                low = middle
            else:
                high = middle
        return low

    # --- applying -------------------------------------------------------------------------------

    async def _apply(self, linked: list[tuple[int, bytes]], tip: ChainTip | None) -> None:
        progress = self.progress
        if progress is not None:
            progress.begin(
                -1 if tip is None else tip.height, max(self.server_height, linked[-1][0])
            )
        pipe = BlockPipeline(
            self.fetch if self._offload is None else self._offload.fetch,
            linked,
            window=self.window,
            max_bytes=self.max_bytes,
            size_estimate=self._size_estimate,
        )
        try:
            async with pipe:
                async for fetched in pipe:
                    hold = self.server_height - fetched.height > HOLD_DISTANCE
                    self._applied(await fetched.apply(self.store, hold=hold), fetched)
        except BaseException:
            await self.store.commit()  # whole blocks, whatever ended the run
            raise
        finally:
            self._size_estimate = pipe.size_estimate
        # A chunk that ends normally leaves its held blocks to the batch: the next chunk's
        # blocks join it (waiting here for the writer at every 2,016 blocks left it idle while
        # the next chunk began), and `catch_up` commits when the walk ends.

    def _applied(self, result: AppliedBlock, fetched: FetchedBlock) -> None:
        self.blocks_applied += 1
        if self.progress is not None:
            self.progress.retarget(self.server_height)
            self.progress.block(result.height, fetched.tx_count)
        if self.following and not (self.progress is not None and self.progress.active):
            log.info(
                "block applied",
                extra=fields(
                    event="block",
                    height=result.height,
                    hash=result.hash[::-1].hex(),
                    txs=fetched.tx_count,
                    rows=sum(result.rows.values()),
                ),
            )
        if self.on_block is not None:
            self.on_block(result, fetched)
