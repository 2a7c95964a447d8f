"""A template's outputs written by one struct call per output (`FungibleTemplate._packs`)
are `TxOutput.encode`'s bytes at every CompactSize width of the amount and for bytecodes of
any length; a template copies and pickles as the same template."""

from __future__ import annotations

import copy
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from bch.hashes import sha256
from bch.token import MAX_TOKEN_AMOUNT, TokenData
from bch.tx import MAX_SATS, FungibleTemplate, TxOutput, fungible_encodings

# Amounts at every CompactSize width and its edges (`tests/bch/test_kernels.py` too).
AMOUNTS = st.one_of(
    st.integers(1, 0xFC),
    st.integers(0xFD, 0xFFFF),
    st.integers(0x10000, 0xFFFFFFFF),
    st.integers(0x100000000, MAX_TOKEN_AMOUNT),
    st.sampled_from([1, 0xFC, 0xFD, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x100000000]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.binary(min_size=0, max_size=300), st.integers(0, MAX_SATS), AMOUNTS),
        min_size=0,
        max_size=6,
    )
)
def test_packed_outputs_are_the_plain_encoding(rows: list[tuple[bytes, int, int]]) -> None:
    templates = [FungibleTemplate(lock, sha256(lock)) for lock, _, _ in rows]
    values = [value for _, value, _ in rows]
    amounts = [amount for _, _, amount in rows]
    plain = [
        TxOutput(value, t.locking, TokenData(t.category, amount)).encode()
        for t, value, amount in zip(templates, values, amounts, strict=True)
    ]
    assert fungible_encodings(templates, values, amounts) == plain


def test_a_template_copies_and_pickles() -> None:
    t = FungibleTemplate(b"\xaa" * 35, sha256(b"cat"))
    for again in (copy.copy(t), copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert again == t
        assert fungible_encodings([again], [1_000], [0x10000]) == fungible_encodings(
            [t], [1_000], [0x10000]
        )
