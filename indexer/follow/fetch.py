"""Fetching blocks for the follower, several at a time.

`fetch_block` gets the block at a height and checks it is exactly the one the follower linked:
on Rostrum the raw block's first 80 bytes must be the linked header and its transactions must
hash to the header's merkle root; on Fulcrum the enumerated txids must (the client checks).
Anything else is `BlockChanged` (the server moved to another chain meanwhile) or
`ElectrumProtocolError` (a server that lies), never a block we would index. The genesis block
is indexed without its coinbase from any server, so that the index is the same whichever
server built it (nodes refuse to serve that coinbase, see `indexer.electrum.capabilities`).

`BlockPipeline` keeps up to `window` fetches in flight while the store applies the previous
block, so a sync is bounded by the slower of the server and the store, not by their sum plus a
round trip per block. Big blocks shrink the window: at most about `max_bytes` are buffered.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from bch.block import Block, BlockHeader
from bch.encoding import DecodeError
from bch.tx import OutPoint, Transaction, TxOutput
from indexer.electrum import BlockChanged, ElectrumClient, ElectrumProtocolError, NotSupported
from indexer.store import AppliedBlock, Store
from runtime.tasks import cancel_and_wait

HEADER_SIZE = 80
DEFAULT_WINDOW = 32
DEFAULT_MAX_BYTES = 128 * 1024 * 1024
SIZE_SMOOTHING = 0.2  # weight of the newest block in the size estimate


@dataclass(frozen=True, slots=True)
class FetchedBlock:
    """A block ready to apply: whole (Rostrum) or as its transactions (Fulcrum fallback)."""

    height: int
    header: BlockHeader
    block: Block | None
    transactions: tuple[bytes, ...] = ()
    size: int = 0  # bytes received (serialized block, or the transactions' sum)

    @property
    def tx_count(self) -> int:
        return self.block.tx_count if self.block is not None else len(self.transactions)

    async def apply(self, store: Store, *, hold: bool = False) -> AppliedBlock:
        if self.block is not None:
            return await store.apply_block(self.height, self.block, hold=hold)
        return await store.apply_transactions(
            self.height, self.header, self.transactions, hold=hold
        )


def parse_checked_block(raw: bytes, header: bytes) -> Block:
    """`raw` as a Block, if it is the block of `header` (else BlockChanged / protocol error)."""
    if raw[:HEADER_SIZE] != header:
        raise BlockChanged("the server's block is not the one whose header was linked")
    try:
        block = Block(raw)
    except DecodeError as exc:
        raise ElectrumProtocolError(f"undecodable block: {exc}") from None
    if not block.has_valid_merkle_root():
        raise ElectrumProtocolError(f"block {block.hash_hex}: transactions do not match its root")
    return block


async def fetch_block(client: ElectrumClient, height: int, header: bytes) -> FetchedBlock:
    """The block at `height`, checked against `header` (its 80 bytes, as linked)."""
    try:
        raw = await client.get_block(height)
    except NotSupported:
        txs = await client.get_block_transactions(height, header=header)
        parsed = BlockHeader.from_bytes(header)
        return FetchedBlock(height, parsed, None, tuple(txs), sum(len(t) for t in txs))
    return fetched_block(height, raw, header)


def fetched_block(height: int, raw: bytes, header: bytes) -> FetchedBlock:
    """The serialized block `raw`, checked against `header` (linked at `height`)."""
    block = parse_checked_block(raw, header)
    if height == 0:  # the genesis coinbase, which the Fulcrum fallback cannot fetch, is left out
        rest = tuple(block.tx_raw(i) for i in range(1, block.tx_count))
        return FetchedBlock(height, block.header, None, rest, sum(len(t) for t in rest))
    return FetchedBlock(height, block.header, block, (), len(raw))


async def fetch_prevouts(
    client: ElectrumClient, outpoints: Sequence[OutPoint]
) -> dict[OutPoint, TxOutput]:
    """The outputs at `outpoints`, from their transactions on the server (each checked against
    its txid by the client); outpoints past their transaction's outputs are left out."""
    txids = list(dict.fromkeys(op.txid for op in outpoints))
    raws = await client.get_transactions([t[::-1].hex() for t in txids])
    txs = {t: Transaction.from_bytes(raw) for t, raw in zip(txids, raws, strict=True)}
    return {
        op: txs[op.txid].outputs[op.index]
        for op in outpoints
        if op.index < len(txs[op.txid].outputs)
    }


Fetch = Callable[[int, bytes], Coroutine[Any, Any, FetchedBlock]]


class BlockPipeline:
    """The blocks of `headers` ((height, 80 bytes) in chain order), in order, prefetched.

    Use as `async with BlockPipeline(...) as pipe: async for fetched in pipe: …`. A failed
    fetch raises from the iteration when its turn comes; leaving the block cancels the rest.
    """

    def __init__(
        self,
        fetch: Fetch,
        headers: Sequence[tuple[int, bytes]],
        *,
        window: int = DEFAULT_WINDOW,
        max_bytes: int = DEFAULT_MAX_BYTES,
        size_estimate: float = 1024 * 1024,
    ) -> None:
        if window < 1:
            raise ValueError("the pipeline window must be at least 1")
        self._fetch = fetch
        self._todo = deque(headers)
        self._window = window
        self._max_bytes = max_bytes
        self.size_estimate = float(size_estimate)
        self._inflight: deque[asyncio.Task[FetchedBlock]] = deque()

    def _capacity(self) -> int:
        by_size = int(self._max_bytes // max(self.size_estimate, 1.0))
        return max(1, min(self._window, by_size))

    def _fill(self) -> None:
        loop = asyncio.get_running_loop()
        while self._todo and len(self._inflight) < self._capacity():
            height, header = self._todo.popleft()
            self._inflight.append(loop.create_task(self._fetch(height, header)))

    async def __aenter__(self) -> BlockPipeline:
        self._fill()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        tasks = list(self._inflight)
        self._inflight.clear()
        self._todo.clear()
        await cancel_and_wait(tasks)

    def __aiter__(self) -> BlockPipeline:
        return self

    async def __anext__(self) -> FetchedBlock:
        if not self._inflight:
            raise StopAsyncIteration
        fetched = await self._inflight.popleft()
        self.size_estimate += SIZE_SMOOTHING * (fetched.size - self.size_estimate)
        self._fill()  # before the caller applies this block: the server works meanwhile
        return fetched
