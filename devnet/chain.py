"""One node's view of the best chain: blocks, the UTXO set (with token data), a transaction
index and the Electrum scripthash index (history and unspent outputs).

Blocks can be disconnected from the tip (undo data is kept per block), which is all a reorg
needs. Consensus checks here are the ones a block's own structure can break (missing or double
spent inputs, coinbase maturity, value); scripts and policy are the mempool's business, since
every transaction in a devnet block has already passed it or been injected on purpose.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bch.script import OP_RETURN, scripthash
from bch.tx import OutPoint, Transaction, TxOutput
from devnet.blocks import (
    COINBASE_MATURITY,
    HALVING_INTERVAL,
    BlockRecord,
    block_subsidy,
    is_coinbase,
)

MTP_SPAN = 11


class ChainError(Exception):
    """A block (or a transaction injected into one) breaks a consensus rule."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Coin:
    output: TxOutput
    height: int
    coinbase: bool


def is_unspendable(locking: bytes) -> bool:
    return bool(locking) and locking[0] == OP_RETURN


@dataclass(slots=True)
class _Undo:
    spent: list[tuple[OutPoint, Coin]]  # coins from earlier blocks, restored on disconnect
    created: list[OutPoint]
    touched: set[bytes]


class Chain:
    def __init__(self, genesis: BlockRecord, *, halving_interval: int = HALVING_INTERVAL) -> None:
        self.halving_interval = halving_interval
        self.blocks: list[BlockRecord] = []
        self.heights: dict[bytes, int] = {}
        self.utxos: dict[OutPoint, Coin] = {}
        self.sh_utxos: dict[bytes, set[OutPoint]] = {}
        self.tx_index: dict[bytes, tuple[int, int]] = {}
        self.sh_history: dict[bytes, list[tuple[int, bytes]]] = {}
        self._undo: list[_Undo] = []
        self._connect(genesis, genesis_block=True)

    # --- queries ------------------------------------------------------------------------

    @property
    def height(self) -> int:
        return len(self.blocks) - 1

    @property
    def tip(self) -> BlockRecord:
        return self.blocks[-1]

    def block_at(self, height: int) -> BlockRecord | None:
        return self.blocks[height] if 0 <= height < len(self.blocks) else None

    def height_of(self, block_hash: bytes) -> int | None:
        return self.heights.get(block_hash)

    def get_tx(self, txid: bytes) -> tuple[Transaction, int] | None:
        """A confirmed transaction and its height."""
        loc = self.tx_index.get(txid)
        if loc is None:
            return None
        return self.blocks[loc[0]].txs[loc[1]], loc[0]

    def history(self, sh: bytes) -> list[tuple[int, bytes]]:
        """(height, txid) in block order; within a block in transaction order."""
        return self.sh_history.get(sh, [])

    def unspent(self, sh: bytes) -> list[tuple[OutPoint, Coin]]:
        return [(op, self.utxos[op]) for op in self.sh_utxos.get(sh, ())]

    def median_time_past(self) -> int:
        times = sorted(b.header.time for b in self.blocks[-MTP_SPAN:])
        return times[len(times) // 2]

    # --- connect / disconnect -------------------------------------------------------------

    def connect(self, block: BlockRecord) -> set[bytes]:
        """Connect `block` on top of the tip; return the scripthashes it touches."""
        if block.prev_hash != self.tip.hash:
            raise ChainError("bad-prevblk")
        return self._connect(block)

    def _connect(self, block: BlockRecord, *, genesis_block: bool = False) -> set[bytes]:
        height = len(self.blocks)
        txs = block.txs
        if not txs or not is_coinbase(txs[0]) or any(is_coinbase(t) for t in txs[1:]):
            raise ChainError("bad-cb-missing")
        created: dict[OutPoint, Coin] = {}
        txids = [t.txid for t in txs]
        for txid, tx in zip(txids, txs, strict=True):
            if txid in self.tx_index:
                raise ChainError("bad-txns-BIP30")
            cb = tx is txs[0]
            for i, out in enumerate(tx.outputs):
                if not is_unspendable(out.locking):
                    created[OutPoint(txid, i)] = Coin(out, height, cb)
        spent_per_tx: list[list[Coin]] = [[]]
        seen: set[OutPoint] = set()
        fees = 0
        for tx in txs[1:]:
            coins = []
            for inp in tx.inputs:
                op = inp.outpoint
                coin = self.utxos.get(op) or created.get(op)
                if coin is None or op in seen:
                    raise ChainError("bad-txns-inputs-missingorspent")
                if coin.coinbase and height - coin.height < COINBASE_MATURITY:
                    raise ChainError("bad-txns-premature-spend-of-coinbase")
                seen.add(op)
                coins.append(coin)
            value_in = sum(c.output.value for c in coins)
            value_out = sum(o.value for o in tx.outputs)
            if value_out > value_in:
                raise ChainError("bad-txns-in-belowout")
            fees += value_in - value_out
            spent_per_tx.append(coins)
        if (
            not genesis_block
            and sum(o.value for o in txs[0].outputs)
            > block_subsidy(height, self.halving_interval) + fees
        ):
            raise ChainError("bad-cb-amount")
        # Validated: apply.
        for op, coin in created.items():
            self._add_utxo(op, coin)
        undo = _Undo([], list(created), set())
        for op in seen:
            coin = self._remove_utxo(op)
            if op not in created:
                undo.spent.append((op, coin))
        for pos, (txid, tx) in enumerate(zip(txids, txs, strict=True)):
            self.tx_index[txid] = (height, pos)
            touched = _touched(tx.outputs, spent_per_tx[pos])
            for sh in touched:
                self.sh_history.setdefault(sh, []).append((height, txid))
            undo.touched |= touched
        self.blocks.append(block)
        self.heights[block.hash] = height
        self._undo.append(undo)
        return undo.touched

    def disconnect_tip(self) -> tuple[BlockRecord, set[bytes]]:
        """Undo the tip block; return it and the scripthashes it touched."""
        if self.height == 0:
            raise ChainError("cannot disconnect the genesis block")
        height = self.height
        block = self.blocks.pop()
        undo = self._undo.pop()
        del self.heights[block.hash]
        for op in undo.created:
            if op in self.utxos:
                self._remove_utxo(op)
        for op, coin in undo.spent:
            self._add_utxo(op, coin)
        for tx in block.txs:
            self.tx_index.pop(tx.txid, None)
        for sh in undo.touched:
            entries = self.sh_history[sh]
            while entries and entries[-1][0] == height:
                entries.pop()
            if not entries:
                del self.sh_history[sh]
        return block, undo.touched

    def _add_utxo(self, op: OutPoint, coin: Coin) -> None:
        self.utxos[op] = coin
        self.sh_utxos.setdefault(scripthash(coin.output.locking), set()).add(op)

    def _remove_utxo(self, op: OutPoint) -> Coin:
        coin = self.utxos.pop(op)
        sh = scripthash(coin.output.locking)
        ops = self.sh_utxos[sh]
        ops.discard(op)
        if not ops:
            del self.sh_utxos[sh]
        return coin


def _touched(outputs: Iterable[TxOutput], spent: Iterable[Coin]) -> set[bytes]:
    shs = {scripthash(o.locking) for o in outputs if not is_unspendable(o.locking)}
    shs.update(scripthash(c.output.locking) for c in spent)
    return shs
