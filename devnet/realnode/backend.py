"""The devnet's chain written through to a real regtest node.

Every transaction the devnet node accepts goes to the real node with `sendrawtransaction`, and
every block it builds with `submitblock`, so the real node holds exactly the scenario's chain
(block contents, order and timestamps included) and judges each piece with its own consensus
and policy rules: its refusal becomes the devnet's (`TxRejected`, `ChainError`) with the node's
message. Simulated time is the node's mock time (`setmocktime`), moved to each block's timestamp
while the history is laid down, so the node never finds a block too new nor thinks itself in
initial block download.
"""

from __future__ import annotations

import time
from collections.abc import Collection

from bch.tx import Transaction
from devnet.acceptance import TxRejected
from devnet.blocks import BlockRecord, block_record
from devnet.chain import ChainError
from devnet.realnode.rpc import BitcoindRpc, RpcError

REGTEST_HALVING_INTERVAL = 150
RPC_VERIFY_ALREADY_IN_CHAIN = -27
MAX_FUTURE_BLOCK_TIME = 2 * 3600  # a node refuses blocks further ahead of its clock
ACCEPTED = (None, "duplicate", "inconclusive")  # BIP22: stored (a side branch: inconclusive)


class RealNodeBackend:
    def __init__(self, rpc: BitcoindRpc) -> None:
        chain = rpc.call("getblockchaininfo")["chain"]
        if chain != "regtest":
            raise ValueError(f"the devnet runs on a regtest node, not on {chain}")
        self.rpc = rpc
        self._genesis = block_record(
            bytes.fromhex(rpc.call("getblock", rpc.call("getblockhash", 0), 0))
        )
        self._mocktime = 0
        self._follow = True

    @property
    def genesis(self) -> BlockRecord:
        return self._genesis

    @property
    def halving_interval(self) -> int:
        return REGTEST_HALVING_INTERVAL

    def submit_tx(self, tx: Transaction) -> None:
        try:
            self.rpc.call("sendrawtransaction", tx.to_bytes().hex())
        except RpcError as exc:
            if exc.code != RPC_VERIFY_ALREADY_IN_CHAIN:
                raise TxRejected(exc.message) from None

    def foreign_txs(self, known: Collection[bytes]) -> list[Transaction]:
        txids = [bytes.fromhex(t)[::-1] for t in self.rpc.call("getrawmempool")]
        out = []
        for txid in txids:
            if txid in known:
                continue
            try:
                out.append(
                    Transaction.from_hex(self.rpc.call("getrawtransaction", txid[::-1].hex()))
                )
            except RpcError:  # mined or evicted since the listing
                continue
        return out

    def submit_block(self, block: BlockRecord, *, tip: bool = True) -> None:
        when = block.header.time
        if when > self._mocktime and (
            self._follow or when > time.time() + MAX_FUTURE_BLOCK_TIME / 2
        ):
            self.set_time(when)
        result = self.rpc.call("submitblock", block.raw.hex())
        if result not in ACCEPTED:
            raise ChainError(f"the node refused block {block.hash_hex}: {result}")
        if tip:
            best = self.rpc.call("getbestblockhash")
            if best != block.hash_hex:
                raise ChainError(f"the node's best block is {best}, not {block.hash_hex}")

    def set_time(self, timestamp: int) -> None:
        self.rpc.call("setmocktime", timestamp)
        self._mocktime = timestamp

    def release_time(self) -> None:
        """The history is laid down: the node keeps the wall clock from now on, unless the
        history ends ahead of it (a `--start-time` in the future), then it stays there."""
        self._follow = False
        if self._mocktime <= time.time():
            self.rpc.call("setmocktime", 0)
            self._mocktime = 0
