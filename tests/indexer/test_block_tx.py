"""`BlockTx` decoding its transaction on first use from the store's block source: the lean
view and the full decode read alike, from a parsed block or from raw transactions."""

from __future__ import annotations

import pytest

from bch.block import Block, LeanTx, TxView
from bch.token import TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput
from indexer.store.decoder import BlockTx
from indexer.store.source import BlockSource

P2PKH = bytes.fromhex("76a914" + "22" * 20 + "88ac")


def _txs() -> list[Transaction]:
    coinbase = Transaction.build([TxInput(OutPoint(bytes(32), 0xFFFFFFFF), b"\x01\x01")], [])
    cat = bytes([0x42]) * 32
    trade = Transaction.build(
        [TxInput(OutPoint(bytes([1]) * 32, 3), b"\x44" + bytes(68)), TxInput(OutPoint(cat, 0))],
        [TxOutput(1000, P2PKH, TokenData(cat, 70_000)), TxOutput(5, b"\x6a")],
    )
    return [coinbase, trade, trade.replace(version=1)]


def _fields(view: TxView) -> object:
    return (
        view.version,
        [(i.outpoint, i.unlocking) for i in view.inputs],
        [(o.value, o.locking, o.token) for o in view.outputs],
    )


def _sources() -> list[BlockSource]:
    txs = _txs()
    raw = Block.build(txs, prev_hash=bytes(32), time=7, bits=0x207FFFFF)
    block = Block(raw)
    return [BlockSource.from_block(block), BlockSource.from_transactions(block.header, txs)]


@pytest.mark.parametrize("kind", ["block", "transactions"])
def test_view_and_tx_read_alike(kind: str) -> None:
    src = _sources()[kind == "transactions"]
    for i, tx in enumerate(_txs()):
        lazy = BlockTx(i, src.txids[i], source=src)
        view = lazy.view
        assert _fields(view) == _fields(tx)
        assert lazy.view is view  # read once
        assert lazy.tx == tx and lazy.txid == tx.txid
        assert lazy == BlockTx(i, tx.txid, tx)
    # A view asked after the full decode is that decode (nothing read twice).
    assert BlockTx(1, src.txids[1], source=src).view is src.transaction(1)


def test_view_is_lean_until_the_full_decode_is_asked() -> None:
    src = _sources()[0]
    first = BlockTx(1, src.txids[1], source=src)
    assert isinstance(first.view, LeanTx)
    assert isinstance(first.tx, Transaction)
    assert isinstance(first.view, LeanTx)  # (each kept as read)


def test_given_a_transaction_both_are_it() -> None:
    tx = _txs()[1]
    btx = BlockTx(-1, tx.txid, tx)
    assert btx.tx is tx and btx.view is tx
    assert btx != BlockTx(0, tx.txid, tx)
    assert hash(btx) == hash(BlockTx(-1, tx.txid, tx))
    with pytest.raises(ValueError):
        BlockTx(0, tx.txid)


@pytest.mark.parametrize("kind", ["block", "transactions"])
def test_may_hold_searches_the_transactions_own_bytes(kind: str) -> None:
    """Patterns inside the transaction, in its neighbours only, or across its boundary."""
    src = _sources()[kind == "transactions"]
    raws = [tx.to_bytes() for tx in _txs()]
    joined = b"".join(raws)
    patterns = [b"\x44" + bytes(8), P2PKH, b"\x6a", bytes([0x42]) * 32, b"\x01\x01", b"\xaa\x20"]
    patterns.append(raws[0][-3:] + raws[1][:3])  # straddles transactions 0 and 1
    assert patterns[-1] in joined
    for i, raw in enumerate(raws):
        btx = BlockTx(i, src.txids[i], source=src)
        for pattern in patterns:
            assert btx.may_hold(pattern) == (pattern in raw) == src.holds(i, pattern)
    tx = _txs()[1]
    assert BlockTx(-1, tx.txid, tx).may_hold(b"\xaa\x20")  # no source: it may
