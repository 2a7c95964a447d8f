"""What a server can do beyond the common Electrum Cash protocol, and the Fulcrum fallback.

Rostrum (what the Cauldron operators run) serves whole blocks (`blockchain.block.get`) and the
mempool listing (`mempool.get`); Fulcrum has neither. Detection tries each once per connection,
in one batch with `server.features`: a result of the right type means supported, "method not
found" (or any other error) means not.

Without `blockchain.block.get`, a block's transactions are enumerated by position
(`blockchain.transaction.id_from_pos(height, i)` until "No transaction at position") and fetched
with `blockchain.transaction.get`, both batched. The txids are checked against the header's
merkle root, which also catches a reorg in the middle of the enumeration. Limits of that mode:

- about two round trips per batch of transactions, instead of one call per block;
- no mempool listing: unconfirmed transactions are only seen for scripthashes already known and
  subscribed to (e.g. a pool's address), so a pool *created* in the mempool is discovered when
  its block arrives;
- blocks are addressed by height only, so a reorg between fetching the header and the
  transactions surfaces as BlockChanged, to be retried by the caller;
- the genesis block's coinbase is enumerated (its txid counts in the merkle check) but not
  fetched: nodes refuse it (GenesisCoinbase), since it never entered the UTXO set. Nothing can
  spend it, so no index misses it; the genesis block is applied without transactions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

from bch.block import BlockHeader, merkle_root
from bch.tx import hex_to_hash
from indexer.electrum.connection import ElectrumConnection
from indexer.electrum.errors import (
    METHOD_NOT_FOUND,
    BlockChanged,
    ElectrumError,
    ElectrumProtocolError,
)
from indexer.electrum.fetch import fetch_transactions
from indexer.electrum.results import header_bytes, is_hash_hex

log = logging.getLogger(__name__)

END_OF_BLOCK = "no transaction at position"
# Transaction requests the fallback keeps queued at a server at once (`RequestBudget`): at
# about 1,000 a second (Fulcrum asking its node), well within the 30 s request timeout.
FALLBACK_REQUESTS = 2_000
FIRST_POSITIONS = 32  # first enumeration batch; grows ×4 up to the connection's batch limit


@dataclass(frozen=True, slots=True)
class Capabilities:
    block_get: bool  # Rostrum's blockchain.block.get
    mempool_get: bool  # Rostrum's mempool.get
    genesis_hash: str | None = None  # from server.features, when the server reports it

    @property
    def rostrum(self) -> bool:
        return self.block_get and self.mempool_get


def _supported(conn: ElectrumConnection, method: str, outcome: object, kind: type) -> bool:
    if isinstance(outcome, kind):
        return True
    if isinstance(outcome, ElectrumError) and outcome.code != METHOD_NOT_FOUND:
        log.warning("%s: probing %s failed: %s (treated as absent)", conn.address, method, outcome)
    elif not isinstance(outcome, ElectrumError):
        log.warning("%s: %s answered %.80r (treated as absent)", conn.address, method, outcome)
    return False


async def detect(conn: ElectrumConnection, *, extensions: bool = True) -> Capabilities:
    """Probe `conn` once (cached on it); `extensions=False` never uses Rostrum's methods."""
    calls: list[tuple[str, list[object]]] = [("server.features", [])]
    if extensions:
        calls += [("blockchain.block.get", [0]), ("mempool.get", [])]
    results = await conn.batch(calls)
    features = results[0] if isinstance(results[0], dict) else {}
    genesis = features.get("genesis_hash")
    caps = Capabilities(
        block_get=extensions and _supported(conn, calls[1][0], results[1], str),
        mempool_get=extensions and _supported(conn, calls[2][0], results[2], list),
        genesis_hash=genesis.lower() if isinstance(genesis, str) else None,
    )
    conn.capabilities = caps
    return caps


def _past_end(error: ElectrumError) -> bool:
    return END_OF_BLOCK in error.message.lower()


async def block_txids_by_position(
    conn: ElectrumConnection, height: int, *, timeout: float | None = None
) -> list[str]:
    """The txids of the block at `height`, in block order, via `id_from_pos`."""
    txids: list[str] = []
    chunk = FIRST_POSITIONS
    while True:
        start = len(txids)
        results = await conn.batch(
            [
                ("blockchain.transaction.id_from_pos", [height, pos])
                for pos in range(start, start + chunk)
            ],
            timeout=timeout,
        )
        for pos, result in enumerate(results, start):
            if isinstance(result, ElectrumError):
                if _past_end(result) and pos > 0:
                    return txids
                raise result
            if not is_hash_hex(result):
                raise ElectrumProtocolError(f"id_from_pos({height}, {pos}) answered {result!r}")
            txids.append(result.lower())
        chunk = min(chunk * 4, conn.max_batch)


async def block_transactions_by_position(
    conn: ElectrumConnection,
    height: int,
    header: bytes | None = None,
    *,
    timeout: float | None = None,
    budget: RequestBudget | None = None,
) -> list[bytes]:
    """Raw transactions of the block at `height` without `blockchain.block.get`.

    The enumeration is checked against the merkle root of `header` (fetched first when not
    given); a mismatch means the block at `height` is not (or no longer) that one: BlockChanged.
    With `budget`, the transactions are fetched when it has room for them.
    """
    if header is None:
        header = header_bytes(
            await conn.request("blockchain.block.header", height, timeout=timeout)
        )
    txids = await block_txids_by_position(conn, height, timeout=timeout)
    root = merkle_root([hex_to_hash(t) for t in txids])
    if root != BlockHeader.from_bytes(header).merkle_root:
        raise BlockChanged(f"block at height {height} does not match the expected header")
    wanted = txids[1:] if height == 0 else txids
    if budget is None:
        return await fetch_transactions(conn, wanted, timeout=timeout)
    async with budget.take(len(wanted)):
        return await fetch_transactions(conn, wanted, timeout=timeout)


class RequestBudget:
    """At most `limit` requests of the fallback's transaction fetches queued at the server at
    once, over every block in flight: a 32-block window of blocks of a few hundred
    transactions would otherwise queue thousands of `transaction.get` at Fulcrum (which asks
    its node for each in turn), and the last ones time out while they wait. A fetch larger than
    the limit runs alone."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the request budget must be at least 1")
        self.limit = limit
        self.used = 0
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def take(self, requests: int) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(
                lambda: not self.used or self.used + requests <= self.limit
            )
            self.used += requests
        try:
            yield
        finally:
            async with self._changed:
                self.used -= requests
                self._changed.notify_all()
