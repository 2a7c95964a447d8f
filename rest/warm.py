"""Background work after each new index version, so requests find the expensive answers ready:
the token list (which integrates 30 days of pool activity for every token) and the hourly
candle series of the busiest tokens (extended by the new blocks; built once at start-up).

Each step reads its own short snapshot; a failure is logged and retried at the next version.
Requests never wait for the warmer — they compute what is missing themselves (single flight).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from rest.context import ApiContext
from rest.db import IndexVersion

log = logging.getLogger("rest")


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
                await asyncio.wait_for(self._stopping.wait(), self.ctx.config.poll_interval)

    async def warm(self) -> None:
        ctx, cfg = self.ctx, self.ctx.config
        async with ctx.pool.snapshot() as snap:
            tip = snap.tip
            objs = await ctx.tokens.get(snap.conn, tip, cfg.registry, cfg.usd)
        busiest = sorted(objs, key=lambda o: (-o["trade_count"], -o["score"], o["token_id"]))
        for obj in busiest[: ctx.candles.capacity]:
            if self._stopping.is_set():
                return
            async with ctx.pool.snapshot() as snap:
                if snap.tip != tip:
                    return  # a newer block: start over with it
                await ctx.candles.ensure(snap.conn, tip, obj["token_id"])
        self.warmed = tip
        ctx.warmed_height = tip.height
