"""A hand-made Cauldron chain with exact amounts and times, for cases computed by hand.

Each helper builds a real transaction (pool outputs at the owner's P2SH32 pool address, the
69-byte trade-path unlocking, SUMMON markers, owner-signed-shaped withdrawals); `mine` wraps
transactions into a block at a chosen time. The index sees them like any other block.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from bch.block import Block
from bch.keys import PrivateKey
from bch.script import p2pkh_locking, push_data, push_int
from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from protocols.cauldron.contract import pool_locking_bytecode, redeem_script, trade_unlocking
from protocols.cauldron.formulas import PoolState, is_valid_pool_transition

BITS = 0x207FFFFF
NULL_OUTPOINT = OutPoint(bytes(32), 0xFFFFFFFF)
OWNERS = [PrivateKey.from_int(0x5100 + i) for i in range(4)]
TRADER = PrivateKey.from_int(0x5200)
CATEGORIES = [bytes([0xD0 + i]) * 32 for i in range(3)]  # wire order


def display(category: bytes) -> str:
    return category[::-1].hex()


@dataclass
class Pool:
    outpoint: OutPoint
    owner: int
    category: bytes
    state: PoolState
    pool_id: str = ""


@dataclass
class HandChain:
    height: int = 0
    prev: bytes = bytes(32)
    raw: list[tuple[int, bytes]] = field(default_factory=list)  # (height, block bytes)
    rng: random.Random = field(default_factory=lambda: random.Random(1))

    def _funding(self) -> TxInput:
        sig = self.rng.randbytes(64) + b"\x41"
        op = OutPoint(self.rng.randbytes(32), 0)
        return TxInput(op, push_data(sig) + push_data(TRADER.public_key))

    @staticmethod
    def _out(p: Pool) -> TxOutput:
        lock = pool_locking_bytecode(OWNERS[p.owner].pkh)
        return TxOutput(p.state.sats, lock, TokenData(p.category, p.state.tokens))

    def create(
        self, owner: int, category: bytes, sats: int, tokens: int
    ) -> tuple[Transaction, Pool]:
        pool = Pool(OutPoint(bytes(32), 0), owner, category, PoolState(sats, tokens))
        summon = TxOutput(0, b"\x6a\x06SUMMON\x14" + OWNERS[owner].pkh)
        change = TxOutput(5_000, p2pkh_locking(TRADER.pkh))
        tx = Transaction.build([self._funding()], [self._out(pool), summon, change])
        pool.outpoint = OutPoint(tx.txid, 0)
        pool.pool_id = f"{tx.txid_hex}:0"
        return tx, pool

    def move(self, pool: Pool, after: PoolState) -> Transaction:
        """A trade-path spend (trade or deposit) to `after`; updates `pool`."""
        assert is_valid_pool_transition(pool.state, after)
        new = Pool(pool.outpoint, pool.owner, pool.category, after, pool.pool_id)
        payout = TxOutput(1_000, p2pkh_locking(TRADER.pkh))
        inputs = [TxInput(pool.outpoint, trade_unlocking(OWNERS[pool.owner].pkh)), self._funding()]
        tx = Transaction.build(inputs, [self._out(new), payout])
        pool.outpoint, pool.state = OutPoint(tx.txid, 0), after
        return tx

    def withdraw(self, pool: Pool) -> Transaction:
        key = OWNERS[pool.owner]
        unlock = push_data(self.rng.randbytes(64) + b"\x41") + push_data(key.public_key)
        inputs = [TxInput(pool.outpoint, unlock + push_data(redeem_script(key.pkh)))]
        out = TxOutput(
            pool.state.sats, p2pkh_locking(key.pkh), TokenData(pool.category, pool.state.tokens)
        )
        return Transaction.build(inputs, [out])

    def mine(self, time: int, txs: list[Transaction]) -> None:
        self.height += 1
        coinbase = Transaction.build(
            [TxInput(NULL_OUTPOINT, push_int(self.height) + push_data(b"hand"))],
            [TxOutput(50 * 100_000_000, p2pkh_locking(TRADER.pkh))],
            version=1,
        )
        ordered = sorted(txs, key=lambda t: t.txid)
        raw = Block.build([coinbase, *ordered], prev_hash=self.prev, time=time, bits=BITS)
        self.prev = Block.from_bytes(raw).hash
        self.raw.append((self.height, raw))
