"""The devnet faucet: pays from the miner's wallet (mature coinbases and their change)."""

from __future__ import annotations

from collections.abc import Iterator

from bch.script import scripthash
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from devnet.blocks import COINBASE_MATURITY
from devnet.node import Node

FEE_PER_BYTE = 2
_P2PKH_INPUT_SIZE = 148
_OVERHEAD = 10
DUST_CHANGE = 1_000


class FaucetEmpty(Exception):  # noqa: N818 (a state, reported to the caller)
    """The miner has no mature coins for this amount: mine more blocks first."""


def _spendable(node: Node, wallet: Wallet) -> Iterator[tuple[OutPoint, TxOutput]]:
    """Plain coins of `wallet`, lazily: unconfirmed change first (it is usually large), then
    mature confirmed coins, oldest first. Lazy because the miner owns one coin per block mined;
    ordered (not set order) so the same chain pays the same way in every process."""
    sh = scripthash(wallet.locking_bytecode)
    spends = node.mempool.spends
    for txid in sorted(node.mempool.sh_index.get(sh, ())):
        tx = node.mempool.entries[txid].tx
        for i, out in enumerate(tx.outputs):
            op = OutPoint(txid, i)
            if out.locking == wallet.locking_bytecode and out.token is None and op not in spends:
                yield op, out
    next_height = node.chain.height + 1
    utxos = node.chain.utxos
    coins = sorted(
        node.chain.sh_utxos.get(sh, ()), key=lambda op: (utxos[op].height, op.txid, op.index)
    )
    for op in coins:
        coin = utxos[op]
        if op in spends or coin.output.token is not None:
            continue
        if coin.coinbase and next_height - coin.height < COINBASE_MATURITY:
            continue
        yield op, coin.output


def build_payment(node: Node, wallet: Wallet, locking: bytes, amount: int) -> Transaction:
    """A signed transaction paying `amount` sats to `locking`, change back to the wallet."""
    if amount <= 0:
        raise ValueError("amount must be positive")
    payee = TxOutput(amount, locking)
    chosen: list[tuple[OutPoint, TxOutput]] = []
    total = 0
    for op, out in _spendable(node, wallet):
        chosen.append((op, out))
        total += out.value
        fee = FEE_PER_BYTE * (_OVERHEAD + _P2PKH_INPUT_SIZE * len(chosen) + payee.size() + 34)
        if total >= amount + fee:
            break
    else:
        raise FaucetEmpty(f"the faucet cannot pay {amount} sats: mine more blocks")
    outputs = [payee]
    change = total - amount - fee
    if change >= DUST_CHANGE:
        outputs.append(TxOutput(change, wallet.locking_bytecode))
    unsigned = Transaction.build([TxInput(op) for op, _ in chosen], outputs)
    return wallet.sign_transaction(unsigned, [out for _, out in chosen])
