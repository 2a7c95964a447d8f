"""Building real blocks: coinbase transactions, canonical ordering, headers, the genesis block.

Difficulty is regtest's (bits 0x207fffff): about two nonces per block meet the target, so every
header is a genuine 80-byte header with valid proof of work, an exact merkle root and previous
hash — a client that checks proof of work accepts the devnet's chain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bch.block import BLOCK_VERSION, Block, BlockHeader, merkle_root, serialize_block
from bch.script import OP_RETURN, push_data, push_int
from bch.tx import OutPoint, Transaction, TxInput, TxOutput

REGTEST_BITS = 0x207FFFFF
COIN = 100_000_000
INITIAL_SUBSIDY = 50 * COIN
HALVING_INTERVAL = 210_000
COINBASE_MATURITY = 100
NULL_OUTPOINT = OutPoint(b"\x00" * 32, 0xFFFFFFFF)
GENESIS_TIME = 1_735_689_600
GENESIS_MESSAGE = b"ladle devnet genesis: a local Bitcoin Cash network for Cauldron"


@dataclass(frozen=True, slots=True)
class BlockRecord:
    """A block as every node shares it: header, transactions and the exact serialization."""

    header: BlockHeader
    txs: tuple[Transaction, ...]
    raw: bytes
    hash: bytes  # wire order

    @property
    def hash_hex(self) -> str:
        return self.hash[::-1].hex()

    @property
    def header_bytes(self) -> bytes:
        return self.raw[:80]

    @property
    def prev_hash(self) -> bytes:
        return self.header.prev_hash


def block_subsidy(height: int, halving_interval: int = HALVING_INTERVAL) -> int:
    halvings = height // halving_interval
    return 0 if halvings >= 64 else INITIAL_SUBSIDY >> halvings


def is_coinbase(tx: Transaction) -> bool:
    return len(tx.inputs) == 1 and tx.inputs[0].outpoint == NULL_OUTPOINT


def coinbase_transaction(
    height: int, value: int, locking: bytes, extra_nonce: int = 0
) -> Transaction:
    """BIP34: the unlocking bytecode starts with the height, so coinbase txids never repeat;
    `extra_nonce` makes a competing block at the same height differ (reorgs)."""
    unlocking = (
        push_int(height) + push_data(extra_nonce.to_bytes(8, "little")) + push_data(b"ladle")
    )
    return Transaction.build(
        [TxInput(NULL_OUTPOINT, unlocking)], [TxOutput(value, locking)], version=1
    )


def ctor_order(txs: Sequence[Transaction]) -> list[Transaction]:
    """Canonical transaction ordering: non-coinbase transactions sorted by txid as a number
    (Bitcoin Cash nodes compare uint256 from the most significant byte: the txid's hex order,
    the wire-order bytes reversed; Bitcoin Cash Node refuses other orders as `tx-ordering`)."""
    return sorted(txs, key=lambda t: t.txid[::-1])


def assemble_block(
    prev_hash: bytes, timestamp: int, coinbase: Transaction, txs: Sequence[Transaction]
) -> BlockRecord:
    ordered = [coinbase, *ctor_order(txs)]
    root = merkle_root([t.txid for t in ordered])
    header = BlockHeader(BLOCK_VERSION, prev_hash, root, timestamp, REGTEST_BITS, 0)
    while not header.check_proof_of_work():
        header = BlockHeader(
            BLOCK_VERSION, prev_hash, root, timestamp, REGTEST_BITS, header.nonce + 1
        )
    return BlockRecord(header, tuple(ordered), serialize_block(header, ordered), header.hash)


def genesis_block() -> BlockRecord:
    """Our own genesis: its coinbase pays to an OP_RETURN, so (as in Bitcoin) it is unspendable."""
    locking = bytes((OP_RETURN,)) + push_data(GENESIS_MESSAGE)
    coinbase = coinbase_transaction(0, INITIAL_SUBSIDY, locking)
    return assemble_block(b"\x00" * 32, GENESIS_TIME, coinbase, [])


def block_record(raw: bytes) -> BlockRecord:
    """A serialized block (e.g. a real node's genesis) as the devnet keeps blocks."""
    block = Block(raw)
    txs = tuple(Transaction.from_bytes(block.tx_raw(i)) for i in range(len(block)))
    return BlockRecord(block.header, txs, block.raw, block.hash)
