"""`BitcoindSource`: a BCHN node as a `ChainSource`, over JSON-RPC with optional ZMQ pushes.

- **Headers**: the best chain's block hashes by height (`getblockhash`, one JSON-RPC batch per
  step) and their headers (`getblockheader … false`, batched). The follower links them, so a
  reorg between two calls is found like any other.
- **Blocks** by the hash of the header the follower linked (`getblock <hash> 0`): the node
  serves a block of any branch it knows, so the block is always the one linked; our own parser
  checks it against its header and merkle root. Fetches run concurrently up to the follower's
  window, at most `connections` at the node at once (its `-rpcthreads`).
- **Mempool**: the whole listing (`getrawmempool`), transactions by `getrawtransaction` or from
  the ZMQ `rawtx` pushes. A transaction gone from the listing can be confirmed by a block the
  store lacks only if the node's tip is no longer the store's (the listing is read after the
  catch-up); then its eviction waits for the next round, which applies that block first.
- **Pushes** (`--zmq`): `hashblock` and `rawtx` wake the follower at once; without them (or
  while ZMQ is down) it polls every round interval.
- **Prevouts** (outputs the index never saw) come from `getrawtransaction`, which needs the
  node's `-txindex` for confirmed transactions; without it they are left out, as the decoders
  allow, and a warning says so once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from bch.hashes import hash256
from bch.tx import OutPoint, Transaction, TxOutput, hash_to_hex, hex_to_hash
from indexer.bitcoind import BitcoindClient, HeightOutOfRange, UnknownBlock, ZmqListener
from indexer.electrum import BlockChanged
from indexer.follow.fetch import FetchedBlock, fetched_block
from indexer.follow.source import MempoolPushed, TipPushed

log = logging.getLogger("indexer.follow")


class BitcoindSource:
    def __init__(self, client: BitcoindClient, *, zmq: Sequence[str] = ()) -> None:
        self.client = client
        self.zmq_urls = tuple(zmq)
        self.listener: ZmqListener | None = None
        self._warned_prevouts = False

    async def genesis_hash(self) -> str | None:
        return await self.client.block_hash(0)

    async def tip(self) -> tuple[int, bytes]:
        height, block_hash = await self.client.tip()
        return height, await self.client.header(block_hash)

    async def header(self, height: int) -> bytes:
        try:
            return await self.client.header(await self.client.block_hash(height))
        except HeightOutOfRange:
            raise BlockChanged(f"the node's chain no longer reaches height {height}") from None

    async def headers(self, start: int, count: int) -> list[bytes]:
        height, _ = await self.client.tip()
        count = min(count, height - start + 1)
        if count <= 0:
            return []
        return await self.client.headers(await self.client.block_hashes(start, count))

    async def block(self, height: int, header: bytes) -> FetchedBlock:
        try:
            raw = await self.client.block(hash256(header)[::-1].hex())
        except UnknownBlock:
            raise BlockChanged(f"the node no longer has the block at height {height}") from None
        return fetched_block(height, raw, header)

    async def prevouts(self, outpoints: Sequence[OutPoint]) -> dict[OutPoint, TxOutput]:
        txids = list(dict.fromkeys(op.txid for op in outpoints))
        raws = await self.client.transactions([hash_to_hex(t) for t in txids])
        txs = {t: Transaction.from_bytes(r) for t, r in zip(txids, raws, strict=True) if r}
        if len(txs) < len(txids) and not self._warned_prevouts:
            self._warned_prevouts = True
            log.warning(
                "the node does not serve confirmed transactions (no -txindex?): outputs the "
                "index never saw are left out"
            )
        return {
            op: txs[op.txid].outputs[op.index]
            for op in outpoints
            if op.txid in txs and op.index < len(txs[op.txid].outputs)
        }

    async def subscribe(self, on_tip: TipPushed, on_mempool: MempoolPushed) -> None:
        if self.listener is None and self.zmq_urls:
            self.listener = ZmqListener(
                self.zmq_urls, on_block=lambda: on_tip(None), on_tx=lambda _: on_mempool()
            )
            self.listener.start()
        height, _ = await self.client.tip()
        on_tip(height)

    async def mempool_txids(self) -> set[bytes] | None:
        return {hex_to_hash(t) for t in await self.client.mempool_txids()}

    async def mempool_transactions(self, txids: Sequence[bytes]) -> dict[bytes, bytes]:
        out: dict[bytes, bytes] = {}
        if self.listener is not None:
            for txid in txids:
                raw = self.listener.pushed(txid)
                if raw is not None:
                    out[txid] = raw
        missing = [t for t in txids if t not in out]
        raws = await self.client.transactions([hash_to_hex(t) for t in missing])
        out.update((t, r) for t, r in zip(missing, raws, strict=True) if r is not None)
        return out

    async def confirmed(self, txids: Sequence[bytes], stored_tip: bytes | None) -> set[bytes]:
        _, best = await self.client.tip()
        moved = stored_tip is None or hex_to_hash(best) != stored_tip
        return set(txids) if moved else set()

    async def close(self) -> None:
        if self.listener is not None:
            await self.listener.close()
            self.listener = None
        await self.client.close()
