"""The tip watch of an index read from a BCHN node (`NodeTipWatch`): the node's best tip, asked
every `interval` seconds on its own RPC connection, in the form the freshness checks read
(`indexer.tipwatch.TipWatch.heard`). A node has no header subscription; its ZMQ pushes wake
the follower, and a poll a second costs the node two small calls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from indexer.bitcoind import BitcoindClient, BitcoindClientError
from indexer.electrum.address import ServerAddress
from indexer.electrum.results import HeaderNotice
from indexer.tipwatch import TipWatch

POLL_INTERVAL = 1.0


class NodeTipWatch(TipWatch):
    def __init__(
        self,
        client: BitcoindClient,
        *,
        interval: float = POLL_INTERVAL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__((), clock=clock)
        self.client = client
        self.interval = interval
        # The watch keys what it heard by server: the node's endpoint stands for it.
        self.node = ServerAddress("tcp", client.address.host, client.address.port)
        self.servers = (self.node,)

    async def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._poll(), name=f"tips {self.node}")]

    async def close(self) -> None:
        await super().close()
        await self.client.close()

    async def _poll(self) -> None:
        up = False
        while True:
            try:
                height, block_hash = await self.client.tip()
                header = await self.client.header(block_hash)
            except BitcoindClientError:
                if up:
                    self._down(self.node)
                    up = False
            else:
                self.record(self.node, HeaderNotice(height, header))
                if not up:
                    self._up(self.node)
                    up = True
            await asyncio.sleep(self.interval)
