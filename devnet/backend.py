"""Where a devnet node's chain lives: only in this process (embedded), or also on a real node.

The node keeps its own chain and mempool in both cases (the scenario and the Electrum front read
them); a backend is told of every transaction the node accepts and every block it connects, and
may refuse them with the real node's own reasons. The embedded backend refuses nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from bch.tx import Transaction
from devnet.blocks import HALVING_INTERVAL, BlockRecord, genesis_block


class ChainBackend(Protocol):
    @property
    def genesis(self) -> BlockRecord:
        """The chain's first block (the real node's, when there is one)."""
        ...

    @property
    def halving_interval(self) -> int:
        """Blocks between subsidy halvings (regtest halves every 150)."""
        ...

    def submit_tx(self, tx: Transaction) -> None:
        """The node accepted `tx`; raises TxRejected with the backend's reason to refuse it."""
        ...

    def foreign_txs(self, known: Collection[bytes]) -> list[Transaction]:
        """Transactions the backend holds unconfirmed that are not in `known` (txids, wire
        order): sent to a real node directly (through Fulcrum, bitcoin-cli), not to us."""
        ...

    def submit_block(self, block: BlockRecord, *, tip: bool = True) -> None:
        """The node is connecting `block` (`tip`: it becomes the best block, else it is part of
        a branch that does once its last block arrives); raises ChainError to refuse it."""
        ...


class EmbeddedBackend:
    """The devnet's own chain: its genesis, mainnet's halving interval, nothing to tell."""

    def __init__(self) -> None:
        self._genesis = genesis_block()

    @property
    def genesis(self) -> BlockRecord:
        return self._genesis

    @property
    def halving_interval(self) -> int:
        return HALVING_INTERVAL

    def submit_tx(self, tx: Transaction) -> None:
        return None

    def foreign_txs(self, known: Collection[bytes]) -> list[Transaction]:
        return []

    def submit_block(self, block: BlockRecord, *, tip: bool = True) -> None:
        return None
