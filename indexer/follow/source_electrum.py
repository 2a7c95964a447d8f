"""`ElectrumSource`: an Electrum server (Rostrum, or Fulcrum through the fallback) as a
`ChainSource`, on an `ElectrumClient` (failover across servers)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from bch.tx import OutPoint, TxOutput, hash_to_hex, hex_to_hash
from indexer.electrum import ElectrumClient, ElectrumError, UnknownTransaction
from indexer.electrum.results import headers_from_result
from indexer.follow.fetch import FetchedBlock, fetch_block, fetch_prevouts
from indexer.follow.source import ChainSource, MempoolPushed, TipPushed

FETCH_CHUNK = 500  # transactions per fetch call (the client batches within it)


class ElectrumSource:
    def __init__(self, client: ElectrumClient) -> None:
        self.client = client

    async def genesis_hash(self) -> str | None:
        return (await self.client.capabilities()).genesis_hash

    async def tip(self) -> tuple[int, bytes]:
        return await self.client.get_tip()

    async def header(self, height: int) -> bytes:
        return await self.client.get_header(height)

    async def headers(self, start: int, count: int) -> list[bytes]:
        return headers_from_result(
            await self.client.request("blockchain.block.headers", start, count)
        )

    async def block(self, height: int, header: bytes) -> FetchedBlock:
        return await fetch_block(self.client, height, header)

    async def prevouts(self, outpoints: Sequence[OutPoint]) -> dict[OutPoint, TxOutput]:
        return await fetch_prevouts(self.client, outpoints)

    async def subscribe(self, on_tip: TipPushed, on_mempool: MempoolPushed) -> None:
        """Header notifications; the mempool is watched per pool address by the follower."""
        notice = await self.client.subscribe_headers(lambda n: on_tip(n.height))
        on_tip(notice.height)

    async def mempool_txids(self) -> set[bytes] | None:
        if not (await self.client.capabilities()).mempool_get:
            return None  # Fulcrum: the follower watches the pool addresses instead
        return {hex_to_hash(t) for t in await self.client.mempool_txids()}

    async def mempool_transactions(self, txids: Sequence[bytes]) -> dict[bytes, bytes]:
        out: dict[bytes, bytes] = {}
        for start in range(0, len(txids), FETCH_CHUNK):
            chunk = txids[start : start + FETCH_CHUNK]
            try:
                raws = await self.client.get_transactions([hash_to_hex(t) for t in chunk])
            except ElectrumError:  # one of them, at least: find which, one by one
                each = await asyncio.gather(*(self._one(t) for t in chunk))
                out.update((t, r) for t, r in zip(chunk, each, strict=True) if r is not None)
                continue
            out.update(zip(chunk, raws, strict=True))
        return out

    async def _one(self, txid: bytes) -> bytes | None:
        """None only when the server does not know it: another error (a busy server, a daemon
        error) is raised, so that the round is retried instead of the transaction dropped."""
        try:
            return await self.client.get_transaction(hash_to_hex(txid))
        except UnknownTransaction:
            return None

    async def confirmed(self, txids: Sequence[bytes], stored_tip: bytes | None) -> set[bytes]:
        results = await self.client.batch(
            [("blockchain.transaction.get_height", [hash_to_hex(t)]) for t in txids]
        )
        return {
            t
            for t, r in zip(txids, results, strict=True)
            if isinstance(r, int) and not isinstance(r, bool) and r > 0
        }

    async def close(self) -> None:
        await self.client.close()


def chain_source(source: ChainSource | ElectrumClient) -> ChainSource:
    """`source` as a ChainSource (an Electrum client is wrapped)."""
    return ElectrumSource(source) if isinstance(source, ElectrumClient) else source
