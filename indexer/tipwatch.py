"""The best chain tip heard of: a header subscription on every configured Electrum server, not
only the one the indexer syncs from, so that a lagging or stuck sync server cannot hide a newer
tip. Each server has its own connection, reconnected with the pool's capped backoff (a returning
server is heard again within `MAX_RECONNECT_DELAY`).

`heard()` is the state `indexer.freshness.lag_of` reads; `changed` is set on every change of
it (a tip heard, a server connected or lost), for whoever persists it (`indexer.store.heard`).
Servers on another chain are not filtered out here: configure servers of one network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any

from indexer.electrum.address import ServerAddress
from indexer.electrum.connection import ElectrumConnection
from indexer.electrum.errors import ElectrumClientError, ElectrumProtocolError
from indexer.electrum.health import Backoff
from indexer.electrum.results import HeaderNotice
from indexer.freshness import Heard
from runtime.lifecycle import Service
from runtime.tasks import cancel_and_wait

log = logging.getLogger(__name__)

HEADERS = "blockchain.headers.subscribe"
KEEP_TIPS = 200  # heights remembered below the best (enough for any lag worth reporting)


class TipWatch(Service):
    def __init__(
        self,
        servers: Sequence[str | ServerAddress],
        *,
        client_name: str = "ladle-tips",
        ssl_ctx: ssl.SSLContext | None = None,
        connect_timeout: float = 5.0,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.servers = tuple(ServerAddress.parse(s) if isinstance(s, str) else s for s in servers)
        self.client_name = client_name
        self.ssl_ctx = ssl_ctx
        self.connect_timeout = connect_timeout
        self.backoff = backoff or Backoff()
        self.clock = clock
        self.changed = asyncio.Event()
        self.server_heights: dict[ServerAddress, int] = {}
        self._tips: dict[int, tuple[str, int, float]] = {}
        self._connected: set[ServerAddress] = set()
        self._offline_since: float | None = clock()
        self._tasks: list[asyncio.Task[None]] = []
        self._rng = random.Random()

    async def start(self) -> None:
        if not self._tasks:
            self._tasks = [
                asyncio.create_task(self._follow(a), name=f"tips {a}") for a in self.servers
            ]

    async def close(self) -> None:
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks)

    @property
    def connected(self) -> int:
        return len(self._connected)

    def heard(self) -> Heard:
        return Heard(dict(self._tips), len(self.servers), len(self._connected), self._offline_since)

    def record(self, server: ServerAddress, notice: HeaderNotice) -> None:
        """A tip `server` announced. A height is dated when it is first heard; a server going
        back (a reorg to a shorter chain) drops what no connected server still claims."""
        previous = self.server_heights.get(server)
        self.server_heights[server] = notice.height
        if previous is not None and notice.height < previous:
            top = max(self.server_heights.values())
            for height in [h for h in self._tips if h > top]:
                del self._tips[height]
        known = self._tips.get(notice.height)
        if known is None or known[0] != notice.hash_hex:
            header_time = int.from_bytes(notice.header[68:72], "little")
            self._tips[notice.height] = (notice.hash_hex, header_time, self.clock())
            floor = max(self._tips) - KEEP_TIPS
            for height in [h for h in self._tips if h < floor]:
                del self._tips[height]
        self.changed.set()

    def _up(self, server: ServerAddress) -> None:
        self._connected.add(server)
        self._offline_since = None
        self.changed.set()

    def _down(self, server: ServerAddress) -> None:
        self._connected.discard(server)
        self.server_heights.pop(server, None)
        if not self._connected and self._offline_since is None:
            self._offline_since = self.clock()
        self.changed.set()

    async def _follow(self, server: ServerAddress) -> None:
        failures = 0
        while True:
            try:
                conn = await ElectrumConnection.open(
                    server,
                    client_name=self.client_name,
                    connect_timeout=self.connect_timeout,
                    ssl_ctx=self.ssl_ctx,
                    on_notification=lambda m, p: self._notified(server, m, p),
                )
            except ElectrumClientError as exc:
                failures += 1
                delay = self.backoff.delay(failures, self._rng)
                log.debug("%s: %s (next attempt in %.2fs)", server, exc, delay)
                await asyncio.sleep(delay)
                continue
            failures = 0
            try:
                self.record(server, HeaderNotice.from_json(await conn.request(HEADERS)))
                self._up(server)
                await conn.wait_closed()
            except ElectrumClientError as exc:
                log.debug("%s: %s", server, exc)
            finally:
                self._down(server)
                with contextlib.suppress(Exception):
                    await conn.close()
            await asyncio.sleep(self.backoff.delay(1, self._rng))

    def _notified(self, server: ServerAddress, method: str, params: list[Any]) -> None:
        if method != HEADERS or not params:
            return
        try:
            notice = HeaderNotice.from_json(params[0])
        except ElectrumProtocolError as exc:
            log.warning("%s: bad header notification: %s", server, exc)
            return
        self.record(server, notice)
