"""`parse_view` (the lean read of a transaction) against `parse_transaction`: on every input,
valid or not, the same fields (outpoints, unlocking bytecodes, values, locking bytecodes,
tokens) and the same end, or the same error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bch.block import Block, LeanTx, TxView, parse_view
from bch.token import NFT, Capability, TokenData
from bch.tx import OutPoint, Transaction, TxInput, TxOutput, parse_transaction
from tests.bch.test_tx import INVALID_PREFIXES, P2PKH, VMB, _few_vectors, _simple_tx, transactions


def _fields(view: TxView) -> object:
    """Everything a view offers, as plain values with their types."""
    return (
        type(view.version),
        view.version,
        [(type(i.outpoint), tuple(i.outpoint), i.unlocking) for i in view.inputs],
        [(o.value, o.locking, o.token) for o in view.outputs],
        [None if o.token is None else o.token.nft for o in view.outputs],
    )


def _outcome(parse: Any, buf: bytes, pos: int) -> object:
    try:
        tx, end = parse(buf, pos)
    except Exception as exc:  # the error itself is what is compared
        return ("error", type(exc), str(exc))
    return ("ok", _fields(tx), end)


def _assert_same(buf: bytes, pos: int = 0) -> None:
    assert _outcome(parse_view, buf, pos) == _outcome(parse_transaction, buf, pos)


def test_every_vector() -> None:
    lean = 0
    for raw in {bytes.fromhex(v[4]) for v in VMB}:
        _assert_same(raw)
        lean += isinstance(parse_view(raw)[0], LeanTx)
    assert lean > 100  # most vectors take the lean pass, so it is what was compared
    for vector in INVALID_PREFIXES:  # each malformed prefix inside an output
        _assert_same(_simple_tx([bytes.fromhex(vector["prefix"]) + P2PKH])[0])


@pytest.mark.parametrize("raw", _few_vectors(), ids=lambda r: f"{len(r)}B")
def test_every_truncation_and_mutation(raw: bytes) -> None:
    step = 1 + len(raw) // 400  # every byte of the small vectors, a spread of the largest
    for cut in range(0, len(raw), step):
        _assert_same(raw[:cut])
    for at in range(0, len(raw), step):
        for byte in (0x00, 0x10, 0xEF, 0xFD, 0xFE, 0xFF, raw[at] ^ 0x80):
            _assert_same(raw[:at] + bytes((byte,)) + raw[at + 1 :])


@settings(max_examples=100, deadline=None)
@given(transactions(), st.data())
def test_random_transactions(tx: Transaction, data: st.DataObject) -> None:
    raw = tx.to_bytes()
    _assert_same(raw)
    lead = data.draw(st.binary(max_size=3))
    _assert_same(lead + raw + data.draw(st.binary(max_size=3)), len(lead))
    _assert_same(raw[: data.draw(st.integers(min_value=0, max_value=len(raw)))])
    for _ in range(4):
        mutated = bytearray(raw)
        mutated[data.draw(st.integers(min_value=0, max_value=len(raw) - 1))] = data.draw(
            st.sampled_from([0x00, 0x10, 0x20, 0x32, 0x70, 0xEF, 0xFC, 0xFD, 0xFE, 0xFF])
        )
        _assert_same(bytes(mutated))


def _trade_like() -> Transaction:
    """The shapes of a Cauldron trade: fungible tokens (1-, 3-, 5- and 9-byte amounts), a
    69-byte redeem push, 2-byte script lengths."""
    cat = bytes(range(32))
    return Transaction.build(
        [
            TxInput(OutPoint(bytes(32), 7), b"\x44" + bytes(68)),
            TxInput(OutPoint(b"\x01" * 32, 0), b"\x41" + bytes(300)),
        ],
        [
            TxOutput(1000, b"\xaa\x20" + bytes(32) + b"\x87", TokenData(cat, 0xFFFF_FFFF_FF)),
            TxOutput(1, P2PKH, TokenData(cat, 7)),
            TxOutput(2, P2PKH, TokenData(cat, 0xFD)),
            TxOutput(3, P2PKH, TokenData(cat, 0x10000)),
            TxOutput(4, P2PKH, TokenData(cat, 1 << 40)),
            TxOutput(5, b"\x6a" + bytes(260)),
            TxOutput(0, b""),
        ],
    )


def test_common_shapes_take_the_lean_pass() -> None:
    """Otherwise the equality tests would not exercise it: a trade's shapes are lean; an NFT,
    or 253 inputs, are the full parse's (a `Transaction`, equal to `parse_transaction`'s)."""
    tx = _trade_like()
    raw = tx.to_bytes()
    view, end = parse_view(raw)
    assert isinstance(view, LeanTx) and end == len(raw)
    assert _fields(view) == _fields(tx)
    nft = TokenData(bytes(32), 5, NFT(Capability.MINTING, b"\x01\x02"))
    with_nft = tx.replace(outputs=(*tx.outputs, TxOutput(1, P2PKH, nft))).to_bytes()
    assert parse_view(with_nft)[0] == parse_transaction(with_nft)[0]
    many_inputs = tx.replace(inputs=tx.inputs[:1] * 0xFD).to_bytes()
    assert isinstance(parse_view(many_inputs)[0], Transaction)
    for raw in (with_nft, many_inputs):
        _assert_same(raw)


def test_block_view_reads_each_transaction() -> None:
    txs = [_trade_like(), parse_transaction(bytes.fromhex(VMB[0][4]))[0], _trade_like()]
    txs[2] = txs[2].replace(version=1)
    block = Block(Block.build(txs, prev_hash=bytes(32), time=1, bits=0x207FFFFF))
    for i, tx in enumerate(txs):
        assert _fields(block.view(i)) == _fields(tx)
    with pytest.raises(IndexError):
        block.view(3)


@pytest.mark.parametrize(
    "amount",
    [
        b"\x01",
        b"\xfc",
        b"\x00",  # zero: not a fungible amount
        b"\xfd\xfd\x00",  # the least 3-byte amount
        b"\xfd\xfc\x00",  # 3 bytes for a 1-byte amount: not minimal
        b"\xfd\xff\xff",
        b"\xfd\x00\x00",
        b"\xfe\x00\x00\x01\x00",  # the least 5-byte amount
        b"\xfe\xff\xff\x00\x00",  # 5 bytes for a 3-byte amount: not minimal
        b"\xfe\xff\xff\xff\xff",
        b"\xff\x00\x00\x00\x00\x01\x00\x00\x00",  # the least 9-byte amount
        b"\xff\xff\xff\xff\xff\x00\x00\x00\x00",  # not minimal
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",  # beyond 2^63 - 1
        b"\xfd\xfd",  # (with nothing after it: cut by the output's end)
        b"\xfe\x00\x00\x01",
        b"\xfd",
    ],
)
def test_fungible_amount_widths(amount: bytes) -> None:
    """The lean pass reads 1-, 3- and 5-byte amounts in place: each width at its bounds, the
    non-minimal and zero forms and amounts cut by the output's end read as the full parse
    reads them (or fail as it does)."""
    cat = bytes(range(32))
    tx = Transaction.build(
        [TxInput(OutPoint(bytes(32), 0), b"\x51")],
        [TxOutput(1000, P2PKH, TokenData(cat, 7)), TxOutput(5, P2PKH)],
    )
    raw = tx.to_bytes()
    prefix = b"\xef" + cat + b"\x10"
    at = raw.index(prefix + b"\x07")
    cut = len(amount) in (1, 2, 4) and amount[0] >= 0xFD
    script = prefix + amount + (b"" if cut else P2PKH)
    patched = (
        raw[: at - 1] + bytes((len(script),)) + script + raw[at + len(prefix) + 1 + len(P2PKH) :]
    )
    _assert_same(patched)
    if amount in (b"\x01", b"\xfd\xfd\x00", b"\xfe\x00\x00\x01\x00"):
        view = parse_view(patched)[0]
        assert isinstance(view, LeanTx)
        token = view.outputs[0].token
        assert token is not None and token.amount == int.from_bytes(amount[1:] or amount, "little")
