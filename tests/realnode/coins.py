"""Coins of a wallet of its own for a real-node test file: the session's chain is shared, so
each file mines a coinbase to its own wallet rather than spending the miner's by height."""

from __future__ import annotations

from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from tests.realnode.cauldron import Coin, Traffic
from tests.realnode.nodes import RealNodes

SPLIT_FEE = 5_000


def fund(nodes: RealNodes, wallet: Wallet, count: int, value: int) -> list[Coin]:
    """`count` confirmed coins of `value` sats (output 0 of its own transaction each, so
    any can mint a token), paid from a coinbase mined to `wallet` and matured."""
    node = nodes.bitcoind
    height = int(node.rpc("getblockcount")) + 1
    node.mine(1, wallet.address)
    node.mine(100)
    coin = Traffic(node, wallet).coinbase(height)
    coins = []
    for _ in range(count):
        change = TxOutput(coin.output.value - value - SPLIT_FEE, wallet.locking_bytecode)
        mine = TxOutput(value, wallet.locking_bytecode)
        unsigned = Transaction.build([TxInput(coin.outpoint)], [mine, change])
        tx = wallet.sign_transaction(unsigned, [coin.output])
        assert node.rpc("sendrawtransaction", tx.hex()) == tx.txid_hex
        coins.append(Coin(OutPoint(tx.txid, 0), mine))
        coin = Coin(OutPoint(tx.txid, 1), change)
    nodes.mine(1)
    return coins


def pay(wallet: Wallet, coin: Coin, to: Wallet, fee: int = 1_000) -> Transaction:
    """`coin` paid to `to`, less `fee` (different fees: different spends of one coin)."""
    unsigned = Transaction.build(
        [TxInput(coin.outpoint)], [TxOutput(coin.output.value - fee, to.locking_bytecode)]
    )
    return wallet.sign_transaction(unsigned, [coin.output])
