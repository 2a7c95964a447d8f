"""The state one API process shares between requests, and `answer`: the path every data
endpoint takes (synced check, ETag/304, per-version cache, one snapshot per computation).

The index watcher also keeps what is derived from the index but changes between blocks (the
registry tables the fetch job writes, the index-backed registry and USD feed, the indexer's
mempool overlay) current: each poll of the tip syncs them (`SourceWatcher`), so a request
reads their revisions from memory."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiosqlite
import orjson
from starlette.requests import Request
from starlette.responses import Response

from indexer.freshness import Lag, lag_of
from indexer.network import index_prefix
from indexer.store.heard import read_heard
from rest.cache import Entry, RawJson, ResponseCache
from rest.candles import CandleStore
from rest.config import RestConfig
from rest.db import IndexVersion, IndexWatcher, ReaderPool, Snapshot
from rest.errors import database_unavailable, not_synced
from rest.held import HeldListings
from rest.index_tokens import IndexRegistry, IndexSource, IndexUsdOracle, RegistryTables
from rest.mempool import MempoolOverlay
from rest.metrics import Metrics
from rest.middleware import accepts_gzip, json_answer, make_etag, not_modified
from rest.pages import Anchors
from rest.ratelimit import BucketTable, RateLimiter
from rest.tokenlist import TokenTable

Compute = Callable[[Snapshot], Awaitable[Any]]
# An answer from memory alone, exactly as of the given tip; None when memory is not at that tip.
FromMemory = Callable[[IndexVersion], RawJson | None]
LARGE_BODY = 64 * 1024  # compressed off the event loop

log = logging.getLogger("rest")


class SourceWatcher(IndexWatcher):
    """The index watcher that, after each read of the tip, syncs `sources` on a reader
    connection of its own (outside any request's snapshot). A failing source is logged and
    keeps what it had; the tip is unaffected."""

    def __init__(self, pool: ReaderPool, interval: float, sources: Sequence[IndexSource]) -> None:
        super().__init__(pool, interval)
        self.sources = tuple(sources)
        self._failing = False

    async def refresh(self) -> IndexVersion | None:
        tip = await super().refresh()
        if tip is None or not self.sources:
            return tip
        try:
            async with self.pool.connection() as conn:
                for source in self.sources:
                    await source.sync(conn, tip)
        except Exception:
            if not self._failing:  # once per outage, not at every poll
                log.exception("syncing the registry / USD feed from the index failed")
            self._failing = True
        else:
            self._failing = False
        return tip


@dataclass
class ApiContext:
    config: RestConfig
    pool: ReaderPool
    watcher: IndexWatcher
    cache: ResponseCache
    candles: CandleStore
    tokens: TokenTable
    metrics: Metrics
    limiter: RateLimiter | None
    registry_tables: RegistryTables  # revision of the registry tables, for /registry answers
    mempool: MempoolOverlay  # revision of the mempool overlay, for the pool listings
    anchors: Anchors = field(default_factory=Anchors)  # pages of the chain-ordered logs
    held: HeldListings = field(default_factory=HeldListings)  # listings paged from memory
    chain_height: int | None = None  # last answer of config.chain_tip (else the best heard)
    warmed_height: int | None = None  # the last index height the background warmer finished
    started: float = field(default_factory=time.time)
    network_prefix: str | None = None  # the indexed chain's network, once it holds a block

    @classmethod
    def create(cls, config: RestConfig) -> ApiContext:
        pool = ReaderPool(config.db_path, config.readers)
        tables = RegistryTables()
        mempool = MempoolOverlay()
        sources: list[IndexSource] = [tables, mempool]
        for source in (config.registry, config.usd):
            if isinstance(source, IndexRegistry | IndexUsdOracle):
                sources.append(source)
        cache = ResponseCache(config.cache_entries, config.cache_bytes)
        candles = CandleStore(config.series_tokens)
        limiter = None
        if config.rate_limit:
            table = None if config.rate_table is None else BucketTable.open(config.rate_table)
            limiter = RateLimiter(config.rate_limit, table)
        metrics = Metrics()
        metrics.follow(metrics.cache_hits, lambda: cache.hits)
        metrics.follow(metrics.cache_misses, lambda: cache.misses)
        metrics.follow(metrics.candle_rebuilds, lambda: candles.rebuilds)
        if limiter is not None:
            metrics.follow(metrics.rate_limited, lambda: limiter.refused)
        metrics.follow_size(metrics.cache_entries, lambda: len(cache))
        metrics.follow_size(metrics.cache_bytes, lambda: cache.bytes)
        return cls(
            config=config,
            pool=pool,
            watcher=SourceWatcher(pool, config.poll_interval, sources),
            cache=cache,
            candles=candles,
            tokens=TokenTable(),
            metrics=metrics,
            limiter=limiter,
            registry_tables=tables,
            mempool=mempool,
        )

    def now(self) -> int:
        return int(self.config.clock())

    async def address_prefix(self, conn: aiosqlite.Connection) -> str:
        """CashAddr prefix of owner addresses: the configured one, else the network of the
        genesis block the index holds (a test-network index starts there), else bitcoincash
        (a mainnet index starts at the CashTokens activation, past its genesis)."""
        if self.config.address_prefix is not None:
            return self.config.address_prefix
        if self.network_prefix is None:  # asked again only while the index is empty
            self.network_prefix = await index_prefix(conn)
        return self.network_prefix or "bitcoincash"

    async def refresh_chain_height(self) -> int | None:
        """The chain tip height: the configured source's, else the best the indexer heard of
        (None while neither is known)."""
        if self.config.chain_tip is not None:
            try:
                self.chain_height = await self.config.chain_tip()
            except Exception:
                self.chain_height = None
        return self.chain_height

    async def freshness(self, tip: IndexVersion | None) -> Lag | None:
        """The index's lag behind the best tip the indexer heard of (`indexer.freshness`), from
        what it wrote in the index; None when it never wrote any (or the database fails)."""
        try:
            async with self.pool.connection() as conn:
                heard = await read_heard(conn, time.time())
        except Exception:
            return None
        if heard is None:
            return None
        lag = lag_of(None if tip is None else tip.height, heard, time.time())
        if self.config.chain_tip is None:
            self.chain_height = lag.best_height
        return lag

    def synced_until(self, tip: IndexVersion, now: int) -> int:
        """Up to which time the index is complete: "now" while it is at the chain tip (or, with
        no chain tip source, while its tip is recent), else its tip's time."""
        if self.config.chain_tip is not None and self.chain_height is not None:
            return now if tip.height >= self.chain_height else tip.max_time
        if self.config.stale_after == 0 or now - tip.max_time <= self.config.stale_after:
            return max(now, tip.max_time)
        return tip.max_time

    def check_synced(self, tip: IndexVersion, requested: int | None) -> None:
        if requested is None:
            return
        now = self.now()
        until = self.synced_until(tip, now)
        if min(requested, now) > until:
            raise not_synced(
                f"the index reaches {until} (height {tip.height}); {requested} asked for: "
                "retry once the indexer has caught up"
            )

    async def version(self) -> IndexVersion:
        tip = await self.watcher.current()
        if tip is None and self.watcher.running:
            tip = await self.watcher.refresh()  # the poller saw nothing yet: look now
        if tip is None:
            if self.watcher.error is not None:
                raise database_unavailable(self.watcher.error)
            raise not_synced("the index is empty: the indexer has not stored a block yet")
        return tip

    async def answer(
        self,
        request: Request,
        key: Hashable,
        compute: Compute,
        *,
        requested_time: int | None = None,
        from_memory: FromMemory | None = None,
        mempool: bool = False,
    ) -> Response:
        """Serve `key` at the current index version: 304 if the client has it, the cached
        answer if there is one, else `from_memory(tip)` when it has the answer, else
        `compute(snapshot)`; either is serialised and cached.

        `from_memory` skips the read snapshot (BEGIN, tip, COMMIT: three hops through SQLite's
        thread, queued behind the other readers under load), which dominated a cheap miss.

        `mempool`: the answer applies the mempool overlay, so it is keyed (cache and ETag) on
        the overlay's revision too, read after the tip (the first read syncs both)."""
        cfg = self.config
        tip = await self.version()
        if mempool:
            key = (key, self.mempool.revision)
        self.check_synced(tip, requested_time)
        etag = make_etag(tip, key)
        unchanged = not_modified(request, tip, etag, cfg.max_age)
        if unchanged is not None:
            return unchanged
        entry = self.cache.get(key, tip)
        if entry is None:

            async def make() -> Entry:
                if from_memory is not None:
                    ready = from_memory(tip)
                    if ready is not None:
                        return Entry(tip, ready.data, etag, ready.gzipped)
                async with self.pool.snapshot() as snap:
                    if snap.tip != tip:
                        self.check_synced(snap.tip, requested_time)
                    result = await compute(snap)
                    raw = isinstance(result, RawJson)
                    body = result.data if raw else orjson.dumps(result)
                    gz = result.gzipped if raw else None
                    return Entry(snap.tip, body, make_etag(snap.tip, key), gz)

            entry = await self.cache.compute(key, tip, make)
        large = len(entry.body) >= max(LARGE_BODY, cfg.gzip_min_size)
        if large and accepts_gzip(request.headers.get("accept-encoding")):
            await entry.gzip_off_loop()
        return json_answer(request, entry, cfg.max_age, cfg.gzip_min_size)
