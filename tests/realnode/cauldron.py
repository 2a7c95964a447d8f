"""Cauldron traffic on a regtest BCHN: pools created and traded by one wallet, sent with
`sendrawtransaction` (in JSON-RPC batches) and mined with `generatetoaddress`.

Every transaction is built and signed here with our `bch` wallet, so a few thousand take
seconds. Each pool is created from a coin at output 0 (a CashTokens genesis needs one) with a
SUMMON marker; a trade buys tokens with a little BCH on the trade path, the pool at input and
output 0. The wallet's change chains from one transaction to the next (BCHN has no unconfirmed
chain limit), so no coin selection is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from bch.script import OP_RETURN, push_data
from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from bch.wallet import Wallet
from protocols.cauldron.contract import pool_locking_bytecode, trade_unlocking
from protocols.cauldron.formulas import PoolState, apply_buy_tokens_exact_in
from tests.realnode.nodes import MINER, Bitcoind

FEE = 2_000  # sats per transaction: well above 1 sat/byte for these sizes
TOKEN_OUT = 1_000  # sats on the output carrying bought tokens (above its dust limit)
POOL_SATS = 1_000_000
POOL_TOKENS = 1_000_000_000
SEND_BATCH = 200


@dataclass(frozen=True, slots=True)
class Coin:
    outpoint: OutPoint
    output: TxOutput


@dataclass(frozen=True, slots=True)
class Pool:
    owner_pkh: bytes
    outpoint: OutPoint
    output: TxOutput

    @property
    def state(self) -> PoolState:
        assert self.output.token is not None
        return PoolState(self.output.value, self.output.token.amount)


def summon(owner_pkh: bytes) -> bytes:
    return bytes((OP_RETURN,)) + push_data(b"SUMMON") + push_data(owner_pkh)


class Traffic:
    """Builds and sends Cauldron transactions of `wallet` (the node's miner by default)."""

    def __init__(self, node: Bitcoind, wallet: Wallet = MINER) -> None:
        self.node = node
        self.wallet = wallet
        self.unsent: list[Transaction] = []

    def coinbase(self, height: int) -> Coin:
        """The (mature) coinbase output the wallet got at `height`."""
        block = self.node.rpc("getblock", self.node.rpc("getblockhash", height), 2)
        coinbase = block["tx"][0]
        out = coinbase["vout"][0]
        value = int(Decimal(str(out["value"])) * 100_000_000)
        output = TxOutput(value, bytes.fromhex(out["scriptPubKey"]["hex"]))
        assert output.locking == self.wallet.locking_bytecode
        return Coin(OutPoint.from_hex(coinbase["txid"], 0), output)

    def open_pools(self, count: int) -> tuple[list[Pool], Coin]:
        """A coinbase mined to the wallet and matured (101 blocks), then `count` pools of the
        wallet created from it and sent (not mined); the change left."""
        height = int(self.node.rpc("getblockcount")) + 1
        self.node.mine(1, self.wallet.address)
        self.node.mine(100)
        coin = self.coinbase(height)
        pools = []
        for _ in range(count):
            pool, coin = self.create_pool(coin)
            pools.append(pool)
        self.send()
        return pools, coin

    def _signed(self, tx: Transaction, spent: list[TxOutput]) -> Transaction:

        signed = self.wallet.sign_transaction(tx, spent)
        self.unsent.append(signed)
        return signed

    def create_pool(self, coin: Coin, owner_pkh: bytes | None = None) -> tuple[Pool, Coin]:
        """A new pool of `owner_pkh` (default: the wallet's), its token minted from `coin`
        (which must be an output 0); the change at output 0."""
        assert coin.outpoint.index == 0, "a token genesis spends an output 0"
        owner = owner_pkh or self.wallet.pkh
        token = TokenData(coin.outpoint.txid, POOL_TOKENS)
        pool_out = TxOutput(POOL_SATS, pool_locking_bytecode(owner), token)
        change = TxOutput(coin.output.value - POOL_SATS - FEE, self.wallet.locking_bytecode)
        unsigned = Transaction.build(
            [TxInput(coin.outpoint)], [change, pool_out, TxOutput(0, summon(owner))]
        )
        tx = self._signed(unsigned, [coin.output])
        return Pool(owner, OutPoint(tx.txid, 1), pool_out), Coin(OutPoint(tx.txid, 0), change)

    def trade(self, pool: Pool, coin: Coin, sats_in: int = 10_000) -> tuple[Pool, Coin]:
        """Buy tokens from `pool` for `sats_in`, paid from `coin`; the pool's continuation and
        the change."""
        after = apply_buy_tokens_exact_in(pool.state, sats_in)
        assert pool.output.token is not None
        category = pool.output.token.category
        continuation = TxOutput(after.sats, pool.output.locking, TokenData(category, after.tokens))
        bought = TxOutput(
            TOKEN_OUT,
            self.wallet.locking_bytecode,
            TokenData(category, pool.state.tokens - after.tokens),
        )
        change = TxOutput(
            coin.output.value - sats_in - TOKEN_OUT - FEE, self.wallet.locking_bytecode
        )
        unsigned = Transaction.build(
            [TxInput(pool.outpoint, trade_unlocking(pool.owner_pkh)), TxInput(coin.outpoint)],
            [continuation, bought, change],
        )
        tx = self._signed(unsigned, [pool.output, coin.output])
        return (
            Pool(pool.owner_pkh, OutPoint(tx.txid, 0), continuation),
            Coin(OutPoint(tx.txid, 2), change),
        )

    def pay(self, coin: Coin, to: bytes, value: int = 10_000) -> Coin:
        """A plain payment of `value` to the locking bytecode `to` from `coin`; the change."""
        change = TxOutput(coin.output.value - value - FEE, self.wallet.locking_bytecode)
        unsigned = Transaction.build([TxInput(coin.outpoint)], [TxOutput(value, to), change])
        tx = self._signed(unsigned, [coin.output])
        return Coin(OutPoint(tx.txid, 1), change)

    def send(self) -> list[str]:
        """Send every transaction built since the last call, in order; their txids."""
        txs, self.unsent = self.unsent, []
        txids: list[str] = []
        for start in range(0, len(txs), SEND_BATCH):
            chunk = txs[start : start + SEND_BATCH]
            results = self.node.rpc_batch([("sendrawtransaction", [tx.hex()]) for tx in chunk])
            for tx, result in zip(chunk, results, strict=True):
                assert result == tx.txid_hex, (tx.txid_hex, result)
                txids.append(result)
        return txids
