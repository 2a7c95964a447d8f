"""`BitcoindClient`: the typed calls the chain follower makes of a BCHN node.

Everything returned is checked before use: hex decodes, a header hashes to the block hash it
was asked for, a block's first 80 bytes are its header, a transaction hashes to its txid. A
node that answers otherwise raises RpcProtocolError, never feeds the index.
"""

from __future__ import annotations

from collections.abc import Sequence

from bch.hashes import hash256
from indexer.bitcoind.errors import (
    HeightOutOfRange,
    RpcError,
    RpcProtocolError,
    UnknownTransaction,
)
from indexer.bitcoind.rpc import BitcoindRpc

HEADER_SIZE = 80
BATCH = 500  # calls per JSON-RPC batch: small calls, one HTTP request


def _hash_hex(value: object, what: str) -> str:
    if not isinstance(value, str) or len(value) != 64:
        raise RpcProtocolError(f"{what}: expected a block hash, got {value!r}")
    try:
        bytes.fromhex(value)
    except ValueError:
        raise RpcProtocolError(f"{what}: not hex: {value!r}") from None
    return value.lower()


def _hex(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise RpcProtocolError(f"{what}: expected hex, got {type(value).__name__}")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise RpcProtocolError(f"{what}: not hex: {value[:80]!r}") from None


def checked_header(value: object, block_hash: str) -> bytes:
    raw = _hex(value, f"header {block_hash}")
    if len(raw) != HEADER_SIZE or hash256(raw)[::-1].hex() != block_hash:
        raise RpcProtocolError(f"the node sent a header that is not {block_hash}")
    return raw


def checked_transaction(value: object, txid: str) -> bytes:
    raw = _hex(value, f"transaction {txid}")
    if hash256(raw)[::-1].hex() != txid:
        raise RpcProtocolError(f"the node sent a transaction that is not {txid}")
    return raw


class BitcoindClient(BitcoindRpc):
    # --- chain ----------------------------------------------------------------------------------

    async def tip(self) -> tuple[int, str]:
        """(height, block hash) of the node's best chain, read together."""
        info = await self.call("getblockchaininfo")
        if not isinstance(info, dict) or not isinstance(info.get("blocks"), int):
            raise RpcProtocolError("getblockchaininfo: no height")
        return int(info["blocks"]), _hash_hex(info.get("bestblockhash"), "bestblockhash")

    async def block_hash(self, height: int) -> str:
        """The hash of the best chain's block at `height`; HeightOutOfRange above the tip."""
        return _hash_hex(await self.call("getblockhash", height), f"getblockhash({height})")

    async def block_hashes(self, start: int, count: int) -> list[str]:
        """Hashes of the best chain's blocks from `start`, in one batch; fewer (down to none)
        when the chain ends first."""
        results = await self.batch([("getblockhash", [h]) for h in range(start, start + count)])
        out: list[str] = []
        for height, result in enumerate(results, start):
            if isinstance(result, HeightOutOfRange):
                break
            if isinstance(result, RpcError):
                raise result
            out.append(_hash_hex(result, f"getblockhash({height})"))
        return out

    async def header(self, block_hash: str) -> bytes:
        """The 80-byte header of `block_hash` (any branch the node knows)."""
        return checked_header(await self.call("getblockheader", block_hash, False), block_hash)

    async def headers(self, hashes: Sequence[str]) -> list[bytes]:
        out: list[bytes] = []
        for start in range(0, len(hashes), BATCH):
            chunk = hashes[start : start + BATCH]
            results = await self.batch([("getblockheader", [h, False]) for h in chunk])
            for block_hash, result in zip(chunk, results, strict=True):
                if isinstance(result, RpcError):
                    raise result
                out.append(checked_header(result, block_hash))
        return out

    async def block(self, block_hash: str) -> bytes:
        """The serialized block `block_hash` (`getblock … 0`); its header is checked here, its
        transactions against the merkle root by the caller, who parses it anyway."""
        raw = _hex(await self.call("getblock", block_hash, 0), f"block {block_hash}")
        if len(raw) <= HEADER_SIZE or hash256(raw[:HEADER_SIZE])[::-1].hex() != block_hash:
            raise RpcProtocolError(f"the node sent a block that is not {block_hash}")
        return raw

    # --- transactions ---------------------------------------------------------------------------

    async def mempool_txids(self) -> list[str]:
        result = await self.call("getrawmempool")
        if not isinstance(result, list):
            raise RpcProtocolError("getrawmempool: expected a list")
        return [_hash_hex(t, "getrawmempool") for t in result]

    async def transactions(self, txids: Sequence[str]) -> list[bytes | None]:
        """Raw transactions in the order of `txids`; None for one the node does not know
        (left its mempool; confirmed, without -txindex). Other errors are raised."""
        out: list[bytes | None] = []
        for start in range(0, len(txids), BATCH):
            chunk = txids[start : start + BATCH]
            results = await self.batch([("getrawtransaction", [t, False]) for t in chunk])
            for txid, result in zip(chunk, results, strict=True):
                if isinstance(result, UnknownTransaction):
                    out.append(None)
                elif isinstance(result, RpcError):
                    raise result
                else:
                    out.append(checked_transaction(result, txid))
        return out
