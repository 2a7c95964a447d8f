"""The mempool half of the decoder interface for decoders that index confirmed blocks only
(oracle prices, registries: served from blocks, never from unconfirmed transactions)."""

from __future__ import annotations

from collections.abc import Collection

import aiosqlite

from indexer.decoders.base import BlockContext, BlockTx


class ConfirmedOnly:
    """Mixin: unconfirmed transactions never matter, so there is nothing to apply or evict."""

    async def mempool_add(
        self, conn: aiosqlite.Connection, block: BlockContext, tx: BlockTx
    ) -> bool:
        return False

    def mempool_evict(self, txids: Collection[bytes]) -> None:
        return None

    def mempool_txids(self) -> Collection[bytes]:
        return ()
