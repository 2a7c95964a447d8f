"""Fetching transactions and blocks over one connection, verified against their hashes.

Whatever arrives is checked before it is returned (a transaction must hash to the txid asked for,
a block to the hash asked for), so a faulty or lying server yields ElectrumProtocolError rather
than a corrupt index.
"""

from __future__ import annotations

from collections.abc import Sequence

from bch.hashes import hash256
from indexer.electrum.connection import ElectrumConnection
from indexer.electrum.errors import ElectrumError, ElectrumProtocolError
from indexer.electrum.results import HEADER_SIZE, check_hash_hex, checked_transaction, hex_bytes


async def fetch_transactions(
    conn: ElectrumConnection, txids: Sequence[str], *, timeout: float | None = None
) -> list[bytes]:
    """Raw transactions in the order of `txids`, fetched in batches of at most
    `conn.max_batch`. The first server error (e.g. an unknown txid) is raised."""
    wanted = [check_hash_hex(t, "txid") for t in txids]
    results = await conn.batch(
        [("blockchain.transaction.get", [t]) for t in wanted], timeout=timeout
    )
    out = []
    for txid, result in zip(wanted, results, strict=True):
        if isinstance(result, ElectrumError):
            raise result
        out.append(checked_transaction(result, txid))
    return out


async def fetch_block(
    conn: ElectrumConnection, block: int | str, *, timeout: float | None = None
) -> bytes:
    """Rostrum's `blockchain.block.get` by height or display-order block hash: the raw block."""
    if isinstance(block, str):
        block = check_hash_hex(block, "block hash")
    elif isinstance(block, bool) or block < 0:
        raise ValueError(f"block height must be a non-negative integer, got {block!r}")
    raw = hex_bytes(
        await conn.request("blockchain.block.get", block, timeout=timeout), f"block {block}"
    )
    if len(raw) <= HEADER_SIZE:
        raise ElectrumProtocolError(f"block {block}: only {len(raw)} bytes")
    if isinstance(block, str) and hash256(raw[:HEADER_SIZE])[::-1].hex() != block:
        raise ElectrumProtocolError(f"the server sent a block that is not {block}")
    return raw
