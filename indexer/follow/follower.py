"""The indexer's main loop: catch up with the server's chain, mirror its mempool, wait.

One task does all the work, in order, so a block and a mempool transaction are never applied
concurrently: header notifications (`blockchain.headers.subscribe`) and scripthash
notifications only wake it. Each round is a catch-up (`ChainFollower`) followed by a mempool
refresh (`MempoolFollower`); rounds also run every `mempool_interval` seconds, which is how new
mempool transactions are seen on Rostrum (it has no mempool notification). Notifications may
skip blocks or repeat: the catch-up walks from the stored tip whatever the notice said.

Errors from the servers (all unreachable, timeouts, a lying server) end the round; the next one
starts after an exponential backoff, capped like the pool's reconnects (`MAX_RECONNECT_DELAY`)
so that a returning server is used within seconds; a failure that repeats is logged once, then
at most every `REPEAT_LOG_INTERVAL`. The pool has already tried the other servers
by then.
Errors of our own (SQLite, bugs) propagate: the index must not limp on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from indexer.electrum import ElectrumClient, ElectrumClientError, HeaderNotice
from indexer.electrum.health import MAX_RECONNECT_DELAY
from indexer.follow.chain import (
    DEFAULT_BULK_DISTANCE,
    DEFAULT_OFFLOAD_DISTANCE,
    BlockCallback,
    CatchUp,
    ChainFollower,
    default_start_height,
)
from indexer.follow.fetch import DEFAULT_MAX_BYTES, DEFAULT_WINDOW
from indexer.follow.mempool import MempoolFollower
from indexer.follow.progress import Progress
from indexer.store import ChainError, Store
from runtime.logs import fields

log = logging.getLogger("indexer.follow")

DEFAULT_MEMPOOL_INTERVAL = 2.0
REPEAT_LOG_INTERVAL = 30.0  # seconds between two warnings of one failure that repeats


class Follower:
    def __init__(
        self,
        client: ElectrumClient,
        store: Store,
        *,
        start_height: int | None = None,
        window: int = DEFAULT_WINDOW,
        max_bytes: int = DEFAULT_MAX_BYTES,
        mempool: bool = True,
        mempool_interval: float | None = DEFAULT_MEMPOOL_INTERVAL,
        progress: Progress | None = None,
        on_block: BlockCallback | None = None,
        retry_delay: float = 0.5,
        max_retry_delay: float = MAX_RECONNECT_DELAY,
        bulk_distance: int | None = DEFAULT_BULK_DISTANCE,
        offload_distance: int | None = DEFAULT_OFFLOAD_DISTANCE,
    ) -> None:
        """`start_height`: where a fresh index starts (None: 792772 on mainnet, else 0; an
        index that has blocks continues from its tip). `window`: blocks fetched ahead.
        `bulk_distance`: see `indexer.follow.chain` (None: never defer the indexes)."""
        self.client = client
        self.store = store
        self.chain = ChainFollower(
            client,
            store,
            start_height=start_height or 0,
            window=window,
            max_bytes=max_bytes,
            progress=progress,
            on_block=on_block,
            bulk_distance=bulk_distance,
            offload_distance=offload_distance,
        )
        self._start_known = start_height is not None
        self._wake = asyncio.Event()
        self.mempool = MempoolFollower(client, store, wake=self._wake.set) if mempool else None
        self.mempool_interval = mempool_interval
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.synced = asyncio.Event()  # the initial sync reached the tip
        self.rounds = 0
        self._subscribed = False

    @property
    def start_height(self) -> int:
        return self.chain.start_height

    def wake(self) -> None:
        """Run a round now (e.g. a test that just changed the chain)."""
        self._wake.set()

    async def sync(self) -> CatchUp:
        """One catch-up to the server's current tip, without subscribing or the mempool."""
        await self._resolve_start()
        return await self.chain.catch_up()

    async def run(self, *, ready: asyncio.Event | None = None, exit_at_tip: bool = False) -> None:
        """Follow forever (or, with `exit_at_tip`, until the first round reached the tip).
        `ready` is set once the initial sync and the first mempool refresh are done."""
        delay = self.retry_delay
        last_error, repeats = "", 0
        loop = asyncio.get_running_loop()
        said = -REPEAT_LOG_INTERVAL
        while True:
            self._wake.clear()
            try:
                await self._round()
            except (ElectrumClientError, ChainError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                repeats = repeats + 1 if error == last_error else 0
                # Said once, then again at most every REPEAT_LOG_INTERVAL: a round that keeps
                # failing the same way must not fill the log (the backoff is short).
                if repeats == 0 or loop.time() - said >= REPEAT_LOG_INTERVAL:
                    said = loop.time()
                    log.warning(
                        "round failed; retrying",
                        extra=fields(event="retry", error=error, delay=delay, repeats=repeats),
                    )
                last_error = error
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_retry_delay)
                continue
            last_error, repeats = "", 0
            delay = self.retry_delay
            self.rounds += 1
            if not self.synced.is_set():
                self.synced.set()
                self.chain.following = True
                tip = await self.store.tip()
                log.info(
                    "indexer ready",
                    extra=fields(
                        event="ready",
                        height=None if tip is None else tip.height,
                        tip=None if tip is None else tip.hash_hex,
                        pools=len(self.store.snapshot),
                        pending=len(self.store.mempool_txids()),
                    ),
                )
                if ready is not None:
                    ready.set()
                if exit_at_tip:
                    return
            # asyncio.timeout, not wait_for: on 3.11 wait_for swallows a cancellation that
            # arrives as the event is set, and the task would never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.mempool_interval):
                    await self._wake.wait()

    async def _round(self) -> None:
        await self._resolve_start()
        if not self._subscribed:
            notice = await self.client.subscribe_headers(self._on_header)
            self._subscribed = True
            self._on_header(notice)
        result = await self.chain.catch_up()
        if self.mempool is not None:
            if result.applied or result.undone:
                self.mempool.chain_changed()
            await self.mempool.refresh()

    async def _resolve_start(self) -> None:
        if self._start_known:
            return
        caps = await self.client.capabilities()
        self.chain.start_height = default_start_height(caps.genesis_hash)
        self._start_known = True
        log.info(
            "start height chosen",
            extra=fields(
                event="start_height", height=self.chain.start_height, genesis=caps.genesis_hash
            ),
        )

    def _on_header(self, notice: HeaderNotice) -> None:
        self.chain.server_height = max(self.chain.server_height, notice.height)
        if self.chain.progress is not None:
            self.chain.progress.retarget(notice.height)
        self._wake.set()
