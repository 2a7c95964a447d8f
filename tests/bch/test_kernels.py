"""`bch.kernels`: the compiled output loop is the source's, writes `TxOutput.encode`'s bytes,
leaves what it cannot write in 63 bits to the caller, and runs where a compiler is; which
build runs is `bch.compiled`'s choice."""

from __future__ import annotations

import importlib
from types import ModuleType, SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bch.kernels as kernels
from bch import compiled
from bch.hashes import sha256
from bch.kernels import source
from bch.token import TokenData
from bch.tx import FungibleTemplate, TxOutput, fungible_encodings
from tests.bch.test_tx_fungible_pack import AMOUNTS
from tests.conftest import c_compiler

# Values up to 63 bits, and their edges.
_VALUES = st.one_of(st.integers(0, 2**63 - 1), st.sampled_from([0, 2**62 - 1, 2**62, 2**63 - 1]))
# Outside what the loop writes: negative, zero amounts, past 63 bits.
_OUTSIDE = st.sampled_from([-1, 2**63, 2**64, 2**80])


def _compiled_module() -> ModuleType:
    if not kernels.COMPILED:
        pytest.skip("bch's kernels run interpreted here: nothing compiled to compare")
    return importlib.import_module(kernels.COMPILED_MODULE)


def test_the_kernels_run_compiled_where_a_compiler_is() -> None:
    if c_compiler() is None:
        pytest.skip("no C compiler on this machine: the kernels run interpreted")
    assert kernels.COMPILED, "run `make` (scripts/compile_kernels.py) to compile them"
    assert kernels.fungible_outputs is not source.fungible_outputs


def test_a_module_made_from_another_source_is_not_used() -> None:
    digest = compiled.source_digest(source)
    assert compiled.made_from_source(SimpleNamespace(SOURCE_DIGEST=digest), source)
    assert not compiled.made_from_source(SimpleNamespace(SOURCE_DIGEST="0" * 64), source)
    assert not compiled.made_from_source(SimpleNamespace(), source)
    assert compiled.compiled_or_source(source, "bch.kernels._no_such_module") is source


def _templates(rows: list[tuple[bytes, int, int]]) -> tuple[FungibleTemplate, ...]:
    return tuple(FungibleTemplate(lock, sha256(lock)) for lock, _, _ in rows)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.binary(min_size=0, max_size=300), _VALUES, AMOUNTS), min_size=0, max_size=8
    )
)
def test_the_outputs_are_the_plain_encoding_compiled_or_not(
    rows: list[tuple[bytes, int, int]],
) -> None:
    templates = _templates(rows)
    values = tuple(value for _, value, _ in rows)
    amounts = tuple(amount for _, _, amount in rows)
    plain = [
        TxOutput(value, t.locking, TokenData(t.category, amount)).encode()
        for t, value, amount in zip(templates, values, amounts, strict=True)
    ]
    assert source.fungible_outputs(templates, values, amounts) == plain
    if kernels.COMPILED:
        assert _compiled_module().fungible_outputs(templates, values, amounts) == plain


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(_VALUES, AMOUNTS), min_size=1, max_size=4),
    st.integers(0, 3),
    _OUTSIDE,
    st.booleans(),
)
def test_what_63_bits_cannot_hold_is_left_to_the_caller(
    rows: list[tuple[int, int]], at: int, outside: int, in_value: bool
) -> None:
    """A value or an amount outside 0..2^63−1 (1.. for amounts) gives None, compiled or not,
    and `fungible_encodings` then writes it with its packers or refuses it as they do."""
    at %= len(rows)
    value, amount = rows[at]
    rows[at] = (outside, amount) if in_value else (value, 0 if outside == -1 else outside)
    templates = _templates([(b"\xaa" * 35, 0, 0)] * len(rows))
    values = tuple(v for v, _ in rows)
    amounts = tuple(a for _, a in rows)
    modules = [source, _compiled_module()] if kernels.COMPILED else [source]
    for module in modules:
        assert module.fungible_outputs(templates, values, amounts) is None
    try:
        plain = [
            TxOutput(v, t.locking, TokenData(t.category, a)).encode()
            for t, v, a in zip(templates, values, amounts, strict=True)
        ]
    except Exception as refused:  # (what the plain objects refuse, the packers refuse too)
        with pytest.raises(type(refused)):
            fungible_encodings(templates, values, amounts)
    else:
        assert fungible_encodings(templates, values, amounts) == plain


def test_columns_of_other_lengths_are_refused() -> None:
    template = FungibleTemplate(b"\xaa" * 35, sha256(b"cat"))
    for module in {source, kernels}:
        with pytest.raises(ValueError, match="columns"):
            module.fungible_outputs((template, template), (1, 2), (3,))
