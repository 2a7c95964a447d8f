"""`TemplatedTransaction.with_inputs` keeps the bytes before the first input that changed and
splices the rest: the result is byte for byte the transaction serialized afresh, whichever
inputs change (none, the last few, the first, all) or how many there are, and it can be
re-spliced in turn."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bch.hashes import sha256
from bch.script import p2pkh_locking
from bch.tx import FungibleTemplate, OutPoint, TemplatedTransaction, Transaction, TxInput, TxOutput

_LOCK = bytes([0xAA, 0x20]) + sha256(b"templated inputs: pool")[:32] + bytes([0x87])
_CATEGORY = sha256(b"templated inputs: category")


def _input(tag: int, unlocking_size: int) -> TxInput:
    return TxInput(OutPoint(sha256(tag.to_bytes(4, "big")), tag % 3), bytes(unlocking_size))


def _fresh(tx: Transaction) -> bytes:
    return Transaction(tx.version, tuple(tx.inputs), tuple(tx.outputs), tx.locktime).to_bytes()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 300), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(0, 300)), max_size=6),
    st.integers(-3, 3),
    st.lists(st.integers(1, 2**40), min_size=1, max_size=5),
)
def test_spliced_inputs_are_the_transaction_serialized_afresh(
    sizes: list[int],
    changes: list[tuple[int, int]],
    count_change: int,
    amounts: list[int],
) -> None:
    inputs = [_input(n, size) for n, size in enumerate(sizes)]
    templates = [FungibleTemplate(_LOCK, _CATEGORY)] * len(amounts)
    values = [1_000 + n for n in range(len(amounts))]
    rest = [TxOutput(5_000, p2pkh_locking(bytes(20)))]
    tx = TemplatedTransaction(inputs, templates, values, amounts, rest, locktime=9)
    other = list(inputs)
    for k, (where, size) in enumerate(changes):
        other[where % len(other)] = _input(1_000 + k, size)
    if count_change > 0:
        other += [_input(2_000 + k, 107) for k in range(count_change)]
    elif count_change < 0:
        other = other[: max(1, len(other) + count_change)]
    for before, after in ((tx, other), (tx, inputs)):
        made = before.with_inputs(after)
        assert isinstance(made, TemplatedTransaction)
        assert made.inputs == tuple(after)
        assert made.to_bytes() == _fresh(made)
        back = made.with_inputs(inputs)  # the splice point of `made` is right too
        assert back.to_bytes() == tx.to_bytes() and back == tx


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 300), min_size=1, max_size=12),
    st.dictionaries(st.integers(0, 11), st.integers(0, 300), max_size=6),
)
def test_new_unlockings_are_the_transaction_serialized_afresh(
    sizes: list[int], unlockings: dict[int, int]
) -> None:
    inputs = [_input(n, size) for n, size in enumerate(sizes)]
    tx = TemplatedTransaction(
        inputs, [FungibleTemplate(_LOCK, _CATEGORY)], [1_000], [7], [], locktime=3
    )
    chosen = {i % len(inputs): bytes([0x51]) * size for i, size in unlockings.items()}
    made = tx.with_unlocking(chosen)
    want = [
        TxInput(txin.outpoint, chosen[i], txin.sequence) if i in chosen else txin
        for i, txin in enumerate(inputs)
    ]
    assert made.inputs == tuple(want)
    assert made.to_bytes() == _fresh(made) == tx.with_inputs(want).to_bytes()
    assert made.with_unlocking({}).to_bytes() == made.to_bytes()
    with pytest.raises(IndexError):
        tx.with_unlocking({len(inputs): b""})
