"""Background work after each new index version, so requests find the expensive answers ready:
the token list (which integrates 30 days of pool activity for every token), the anchors of the
trade feed and the lending action logs (`rest.pages`: built once at start-up, a walk through
the whole feed; then extended by the new rows), and the hourly candle series of the busiest
tokens (extended by the new blocks; built once at start-up).

Each step reads its own short snapshot; a failure is logged and retried at the next version.
Requests never wait for the warmer — they compute what is missing themselves (single flight).

After a warm that built large series, the process's objects are frozen out of the cyclic GC
(`gc.freeze`): the series' ~50,000 hourly buckets are long-lived and acyclic (freed by reference
counting when dropped), and traversing them makes every full collection a 40–70 ms stall of
the event loop under load — the tail of the candle latencies (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging

from indexer.store import queries as q
from indexer.store import queries_lending as ql
from rest.context import ApiContext
from rest.db import IndexVersion

log = logging.getLogger("rest")

FREEZE_BUCKETS = 10_000  # hourly buckets held from which a full GC pass costs milliseconds


class Warmer:
    def __init__(self, ctx: ApiContext) -> None:
        self.ctx = ctx
        self.warmed: IndexVersion | None = None  # the last version fully warmed
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="rest-warmer")

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        while not self._stopping.is_set():
            tip = self.ctx.watcher.version
            if tip is not None and tip != self.warmed:
                try:
                    await self.warm()
                except Exception:
                    log.exception("warming the caches failed; retrying at the next version")
                    self.warmed = tip
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.ctx.config.poll_interval):
                    await self._stopping.wait()

    async def warm(self) -> None:
        ctx, cfg = self.ctx, self.ctx.config
        async with ctx.pool.snapshot() as snap:
            tip = snap.tip
            objs = await ctx.tokens.get(snap.conn, tip, cfg.registry, cfg.usd)
            for listing in (
                q.trades_listing(),
                ql.history_listing("v1"),
                ql.history_listing("v11"),
            ):
                await ctx.anchors.prepare(snap.conn, tip, listing)
        rebuilds = ctx.candles.rebuilds
        busiest = sorted(objs, key=lambda o: (-o["trade_count"], -o["score"], o["token_id"]))
        for obj in busiest[: ctx.candles.capacity]:
            if self._stopping.is_set():
                return
            async with ctx.pool.snapshot() as snap:
                if snap.tip != tip:
                    return  # a newer block: start over with it
                await ctx.candles.ensure(snap.conn, tip, obj["token_id"])
        if ctx.candles.rebuilds != rebuilds and ctx.candles.buckets() >= FREEZE_BUCKETS:
            gc.collect()  # garbage is not frozen with the rest
            gc.freeze()
        self.warmed = tip
        ctx.warmed_height = tip.height
        ctx.metrics.warmed_height.set(tip.height)
