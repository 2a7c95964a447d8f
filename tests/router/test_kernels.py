"""`router.kernels`: the compiled loops are the source's, run where they can be, and never
when they were made from another version of the source."""

from __future__ import annotations

import heapq
import importlib
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import router.kernels as kernels
from router.kernels import source
from tests.conftest import c_compiler

# Integers either side of a compiled loop's machine words (63-bit tagged, 64-bit).
_WIDE = st.one_of(
    st.integers(0, 10**16),
    st.integers(2**62 - 3, 2**62 + 3),
    st.integers(2**63 - 3, 2**63 + 3),
    st.integers(0, 2**80),
)


def _compiled_module() -> object:
    if not kernels.COMPILED:
        pytest.skip("the kernels run interpreted here: nothing compiled to compare")
    return importlib.import_module(kernels.COMPILED_MODULE)


def test_the_kernels_run_compiled_where_a_compiler_is() -> None:
    if c_compiler() is None:
        pytest.skip("no C compiler on this machine: the kernels run interpreted")
    assert kernels.COMPILED, "run `make` (scripts/compile_kernels.py) to compile them"
    assert kernels.predicate_holds is not source.predicate_holds


def test_a_module_made_from_another_source_is_not_used() -> None:
    assert kernels.made_from_source(SimpleNamespace(SOURCE_DIGEST=kernels.source_digest()))
    assert not kernels.made_from_source(SimpleNamespace(SOURCE_DIGEST="0" * 64))
    assert not kernels.made_from_source(SimpleNamespace())
    if kernels.COMPILED:
        assert kernels.made_from_source(importlib.import_module(kernels.COMPILED_MODULE))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_WIDE, _WIDE, _WIDE, _WIDE), max_size=12))
def test_the_compiled_predicate_is_the_source(legs: list[tuple[int, int, int, int]]) -> None:
    compiled = _compiled_module()
    # All the legs at once, and each on its own (the loop stops at the first failing leg).
    for rows in [legs, *([leg] for leg in legs)]:
        x0, t0, x1, t1 = (tuple(row[k] for row in rows) for k in range(4))
        expected = source.predicate_holds(x0, t0, x1, t1, 3, 1000)
        assert compiled.predicate_holds(x0, t0, x1, t1, 3, 1000) == expected  # type: ignore[attr-defined]


def test_columns_of_other_lengths_are_refused() -> None:
    for module in {source, kernels}:
        with pytest.raises(ValueError, match="columns"):
            module.predicate_holds((1, 2), (1, 2), (1,), (1, 2), 3, 1000)
        with pytest.raises(ValueError, match="columns"):
            module.legs_after([0, 1], [5], [5, 6], [10, 20], [30, 40], True)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_WIDE, _WIDE), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), _WIDE, _WIDE), max_size=20),
    st.booleans(),
)
def test_the_compiled_legs_after_are_the_source(
    pools: list[tuple[int, int]], legs: list[tuple[int, int, int]], buying: bool
) -> None:
    compiled = _compiled_module()
    sats, tokens = [x for x, _ in pools], [t for _, t in pools]
    legs = [(i % len(pools), paid, got) for i, paid, got in legs]
    indices, paid, got = ([leg[k] for leg in legs] for k in range(3))
    expected = source.legs_after(indices, paid, got, sats, tokens, buying)
    assert compiled.legs_after(indices, paid, got, sats, tokens, buying) == expected  # type: ignore[attr-defined]
    # What the legs say, pool by pool: sats in and tokens out buying, the other way selling.
    after = [
        (sats[i] + p, tokens[i] - g) if buying else (sats[i] - g, tokens[i] + p) for i, p, g in legs
    ]
    assert list(zip(*expected, strict=True)) == after


@settings(max_examples=200, deadline=None)
@given(st.lists(_WIDE, max_size=40), _WIDE)
def test_the_compiled_count_above_is_the_source(values: list[int], top: int) -> None:
    compiled = _compiled_module()
    expected = source.count_above(values, top)
    assert compiled.count_above(values, top) == expected  # type: ignore[attr-defined]
    assert expected == len([v for v in values if v > top])


@settings(max_examples=200, deadline=None)
@given(st.lists(_WIDE, max_size=40))
def test_the_compiled_fees_are_the_source(moved: list[int]) -> None:
    compiled = _compiled_module()
    assert compiled.lp_fees(moved, 3, 1000) == source.lp_fees(moved, 3, 1000)  # type: ignore[attr-defined]


class _Costs:
    """What `y` units cost pool `i`: convex, times `scale` (from 2^28 some next units cost
    2^31 or more, from 2^40 every key is past 64 bits), with a dip at every third unit when
    `dips` (that unit then costs less than nothing: a negative key)."""

    def __init__(self, scale: int, dips: bool) -> None:
        self.scale, self.dips = scale, dips

    def __call__(self, i: int, y: int) -> int:
        dip = 4 * (i + 1) + 8 if self.dips and y % 3 == 2 else 0
        return self.scale * ((i + 1) * y * y + 3 * y - dip)


_Made = tuple[list[int], list[int], list[int], list[int], list[int], _Costs]


@st.composite
def _purchases(draw: st.DrawFn) -> _Made:
    costs = _Costs(draw(st.sampled_from([1, 1, 2**20, 2**28, 2**40])), draw(st.booleans()))
    n = draw(st.integers(1, 12))
    index = sorted(draw(st.sets(st.integers(0, 30), min_size=n, max_size=n)))
    get = [draw(st.integers(0, 5)) for _ in index]
    caps = [draw(st.integers(1, 9)) for _ in range(31)]
    get = [min(y, caps[i] - 1) for y, i in zip(get, index, strict=True)]
    pay = [costs(i, y) for i, y in zip(index, get, strict=True)]
    heap = [
        (costs(i, y + 1) - paid) << source.KEY_SHIFT | p
        for p, (i, y, paid) in enumerate(zip(index, get, pay, strict=True))
    ]
    heapq.heapify(heap)
    return heap, index, get, pay, caps, costs


def _polish(
    buy: Callable[..., int], made: _Made, spare: int
) -> tuple[int, list[int], list[int], list[int]]:
    heap, index, get, pay, caps, costs = made
    heap, get, pay = list(heap), list(get), list(pay)
    left = buy(heap, index, get, pay, spare * costs.scale, caps, costs)
    return left, heap, get, pay


# One pool whose first unit's key fits 64 bits and whose next does not (2^30, then 6·2^28 ≥
# 2^31): the native heap hands over to `heapq` mid-loop.
_CROSSING = _Costs(2**28, dips=False)
_CROSSING_PURCHASE: _Made = ([_CROSSING(0, 1) << source.KEY_SHIFT], [0], [0], [0], [9], _CROSSING)


@settings(max_examples=300, deadline=None)
@given(_purchases(), st.integers(0, 3_000))
@example(_CROSSING_PURCHASE, 20)
def test_the_native_heap_buys_as_heapq_does(made: _Made, spare: int) -> None:
    """`buy_cheapest_units` sifts 64-bit keys as `heapq` sifts Python integers (and hands
    over to it past 64 bits): the same units bought, the same heap left."""
    outcome = _polish(source.buy_cheapest_units_boxed, made, spare)
    assert _polish(source.buy_cheapest_units, made, spare) == outcome
    left, heap, get, pay = outcome
    # What it bought is what the costs say: every unit paid for, the next one unaffordable.
    assert sum(pay) + left == sum(made[3]) + spare * made[5].scale
    assert all(y <= made[4][i] for y, i in zip(get, made[1], strict=True))  # within caps
    assert not heap or heap[0] >> source.KEY_SHIFT > left
    if not kernels.COMPILED:  # interpreted, `heapq` is the faster
        assert kernels.buy_cheapest_units is source.buy_cheapest_units_boxed


@settings(max_examples=300, deadline=None)
@given(_purchases(), st.integers(0, 3_000))
@example(_CROSSING_PURCHASE, 20)
def test_the_compiled_polish_is_the_source(made: _Made, spare: int) -> None:
    compiled = _compiled_module()
    outcome = _polish(source.buy_cheapest_units_boxed, made, spare)
    assert _polish(compiled.buy_cheapest_units, made, spare) == outcome  # type: ignore[attr-defined]
    assert _polish(compiled.buy_cheapest_units_boxed, made, spare) == outcome  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(
    # Tokens no cheaper than a sat, as where the route polishes (`_worth_polishing`): every
    # unit costs ≥ 1 sat, so at most `spare` are bought.
    st.lists(
        st.tuples(st.integers(706, 10**12), st.integers(2, 10**9)).map(
            lambda state: (state[0], min(state[0], state[1]))
        ),
        min_size=1,
        max_size=10,
    ),
    st.integers(0, 2_000),
    st.lists(st.integers(1, 50), min_size=10, max_size=10),
)
def test_the_compiled_token_polish_is_the_source(
    states: list[tuple[int, int]], spare: int, units: list[int]
) -> None:
    """The buying form, with its purchase arithmetic inline, against the source on pools'
    states (and `in_for_out` for what it does not price inline)."""
    compiled = _compiled_module()
    sats = [x for x, _ in states]
    tokens = [t for _, t in states]
    purchase = ([x * t - 1 for x, t in states], sats, tokens, [2**62 - x for x in sats])
    caps = [t - 1 for t in tokens]

    def in_for_out(i: int, y: int) -> int:
        missing = -(-(sats[i] * tokens[i]) // (tokens[i] - y)) - sats[i]
        return (1000 * (missing - 1)) // 997 + 1

    index = list(range(len(states)))
    get = [min(y, cap) for y, cap in zip(units, caps, strict=False)]
    pay = [in_for_out(i, y) for i, y in zip(index, get, strict=True)]
    heap = [
        (in_for_out(i, y + 1) - paid) << source.KEY_SHIFT | i
        for i, y, paid in zip(index, get, pay, strict=True)
        if y < caps[i]
    ]
    heapq.heapify(heap)
    outcomes = []
    for buy in (
        source.buy_cheapest_units_boxed,
        source.buy_cheapest_units,
        compiled.buy_cheapest_units,  # type: ignore[attr-defined]
    ):
        h, g, p = list(heap), list(get), list(pay)
        left = buy(h, index, g, p, spare, caps, in_for_out, purchase, 1000, 997)
        outcomes.append((left, h, g, p))
    assert outcomes[0] == outcomes[1] == outcomes[2]
    # Inline or not, each pool paid exactly what `in_for_out` says its units cost.
    left, _, g, p = outcomes[0]
    assert p == [in_for_out(i, y) for i, y in zip(index, g, strict=True)]
    assert sum(p) + left == sum(pay) + spare


# A leg's six constant pieces: any bytes but `%` (the `%` form reads it as a conversion).
_PIECE = st.binary(max_size=40).map(lambda b: b.replace(b"%", b"p"))
_LEG = st.tuples(*[_PIECE] * 6)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_LEG, max_size=8).flatmap(
        lambda legs: st.tuples(
            st.just(tuple(legs)),
            st.lists(
                st.one_of(st.integers(0, 10**7), _WIDE, st.integers(-5, -1)),
                min_size=5 * len(legs),
                max_size=5 * len(legs),
            ),
        )
    )
)
def test_the_legs_text_is_what_percent_writes(
    made: tuple[tuple[tuple[bytes, ...], ...], list[int]],
) -> None:
    pieces, numbers = made
    expected = b",".join(b"%d".join(leg) for leg in pieces) % tuple(numbers)
    writable = all(0 <= x < 2**62 for x in numbers)
    builds = [source]
    if kernels.COMPILED:
        builds.append(_compiled_module())  # type: ignore[arg-type]
    for module in builds:
        text = module.legs_text(pieces, list(numbers))
        assert text == (expected if writable else None)


def test_the_legs_text_refuses_other_shapes() -> None:
    leg = (b"a", b"b", b"c", b"d", b"e", b"f")
    for module in {
        source,
        importlib.import_module(kernels.COMPILED_MODULE) if kernels.COMPILED else source,
    }:
        with pytest.raises(ValueError, match="columns"):
            module.legs_text((leg,), [1, 2, 3, 4])
        with pytest.raises(ValueError, match="pieces"):
            module.legs_text((leg[:5],), [1, 2, 3, 4, 5])
    assert (kernels.legs_text is None) == (not kernels.COMPILED)
