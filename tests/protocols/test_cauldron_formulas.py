"""Cauldron trade maths: the predicate against the contract text, the formulas against it.

Each formula must give an amount the predicate accepts while the amount one unit better for the
trader is rejected; for small pools an exhaustive scan of the predicate must find the same
amount. The predicate itself is checked against an independent reading of the contract.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from math import floor

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from protocols.cauldron.formulas import (
    LP_FEE_DEN,
    LP_FEE_NUM,
    PoolState,
    apply_buy_tokens_exact_in,
    apply_buy_tokens_exact_out,
    apply_sell_tokens_exact_in,
    apply_sell_tokens_exact_out,
    buy_tokens_exact_in,
    buy_tokens_exact_out,
    change_kind,
    classify_change,
    is_valid_pool_transition,
    lp_fee,
    marginal_price,
    sell_tokens_exact_in,
    sell_tokens_exact_out,
)

MAX_TOKENS = 2**63 - 1  # CashTokens: largest fungible amount an output can carry
MAX_SATS = 21_000_000 * 100_000_000

sats = st.integers(min_value=693, max_value=10**15)
tokens = st.integers(min_value=1, max_value=2**62)
pools = st.builds(PoolState, sats, tokens)


def contract_accepts(before: PoolState, after: PoolState) -> bool:
    """The trade path read straight from the contract text, with exact rationals.

    fee = floor(|in_sats − out_sats| × 3 / 1000); (out_sats − fee) × out_tokens ≥ in_sats ×
    in_tokens; and the output must exist: 1..2^63−1 tokens (no tokens = empty category ≠ the
    pool's), 0..21e14 sats.
    """
    if after.tokens < 1 or after.tokens > MAX_TOKENS or after.sats < 0 or after.sats > MAX_SATS:
        return False
    fee = floor(Fraction(3, 1000) * abs(before.sats - after.sats))
    return (after.sats - fee) * after.tokens >= before.sats * before.tokens


# --- the predicate -----------------------------------------------------------------------------


def test_fee_constants_and_examples() -> None:
    assert (LP_FEE_NUM, LP_FEE_DEN) == (3, 1000)
    # 0.3 % of the BCH delta, rounded down, in either direction.
    assert lp_fee(1000, 1333) == 0
    assert lp_fee(1000, 1334) == 1
    assert lp_fee(1334, 1000) == 1
    assert lp_fee(0, 1_000_000) == 3000
    assert lp_fee(10**15, 0) == 3 * 10**12
    assert lp_fee(5, 5) == 0


@settings(max_examples=400)
@given(
    before=pools,
    after=st.builds(
        PoolState,
        st.integers(min_value=-5, max_value=MAX_SATS + 5),
        st.integers(min_value=-5, max_value=MAX_TOKENS + 5),
    ),
)
def test_predicate_matches_contract_text(before: PoolState, after: PoolState) -> None:
    assert is_valid_pool_transition(before, after) == contract_accepts(before, after)


@settings(max_examples=400)
@given(before=pools, d_sats=st.integers(-(10**6), 10**6), d_tokens=st.integers(-5, 5))
def test_predicate_matches_contract_text_near_the_pool(
    before: PoolState, d_sats: int, d_tokens: int
) -> None:
    """Small moves, where the fee's rounding and the k inequality's boundary actually bite."""
    after = PoolState(before.sats + d_sats, before.tokens + d_tokens)
    assert is_valid_pool_transition(before, after) == contract_accepts(before, after)


def test_predicate_boundaries_by_hand() -> None:
    pool = PoolState(10_000, 100)  # K = 1,000,000
    # Buy 1 token: need (X' − floor(3(X' − X)/1000)) × 99 ≥ 1,000,000 → X' − fee ≥ 10102.
    assert is_valid_pool_transition(pool, PoolState(10_102, 99))  # fee 0: 10102 × 99 = 1000098
    assert not is_valid_pool_transition(pool, PoolState(10_101, 99))  # 999999
    # Sell 1 token: (X' − fee) × 101 ≥ 1,000,000 → X' − fee ≥ 9901.
    assert is_valid_pool_transition(pool, PoolState(9_901, 101))  # Δ = 99, fee 0
    assert not is_valid_pool_transition(pool, PoolState(9_900, 101))
    # The fee bites once |Δ| ≥ 334: 10,000 → 20,000 sats costs 30 sats of fee.
    assert is_valid_pool_transition(pool, PoolState(20_000, 51))  # 19970 × 51 = 1018470
    assert not is_valid_pool_transition(PoolState(10_000, 100), PoolState(10_334, 96))  # 10333×96
    assert is_valid_pool_transition(pool, pool)
    assert not is_valid_pool_transition(pool, PoolState(10_000, 0))
    assert not is_valid_pool_transition(pool, PoolState(-1, 10**9))
    assert not is_valid_pool_transition(pool, PoolState(10_000, MAX_TOKENS + 1))
    assert not is_valid_pool_transition(pool, PoolState(MAX_SATS + 1, 100))


# --- formulas: tight against the predicate ----------------------------------------------------


@settings(max_examples=300)
@given(pool=pools, data=st.data())
@example(pool=PoolState(693, 2), data=None)
@example(pool=PoolState(10**15, 2**62), data=None)
def test_buy_tokens_exact_out_is_tight(pool: PoolState, data: st.DataObject | None) -> None:
    if pool.tokens < 2:
        with pytest.raises(ValueError, match="must keep 1"):
            buy_tokens_exact_out(pool, 1)
        return
    top = pool.tokens - 1
    d = top if data is None else data.draw(st.integers(1, top) | st.sampled_from([1, top]))
    try:
        paid = buy_tokens_exact_out(pool, d)
    except ValueError:
        # Only when the price exceeds what an output can hold: 21e14 sats cannot pay.
        assert not is_valid_pool_transition(pool, PoolState(MAX_SATS, pool.tokens - d))
        return
    after = PoolState(pool.sats + paid, pool.tokens - d)
    assert paid >= 1
    assert is_valid_pool_transition(pool, after)
    assert not is_valid_pool_transition(pool, PoolState(after.sats - 1, after.tokens))
    assert apply_buy_tokens_exact_out(pool, d) == after
    assert classify_change(pool, after) == "buy"


@settings(max_examples=300)
@given(pool=pools, sats_in=st.integers(1, 10**15))
def test_buy_tokens_exact_in_is_tight(pool: PoolState, sats_in: int) -> None:
    got = buy_tokens_exact_in(pool, sats_in)
    after = PoolState(pool.sats + sats_in, pool.tokens - got)
    assert 0 <= got < pool.tokens
    assert is_valid_pool_transition(pool, after)
    assert not is_valid_pool_transition(pool, PoolState(after.sats, after.tokens - 1))
    assert apply_buy_tokens_exact_in(pool, sats_in) == after


@settings(max_examples=300)
@given(pool=pools, tokens_in=st.integers(1, 2**62))
def test_sell_tokens_exact_in_is_tight(pool: PoolState, tokens_in: int) -> None:
    if pool.tokens + tokens_in > MAX_TOKENS:
        with pytest.raises(ValueError, match="2\\^63-1 tokens"):
            sell_tokens_exact_in(pool, tokens_in)
        return
    got = sell_tokens_exact_in(pool, tokens_in)
    after = PoolState(pool.sats - got, pool.tokens + tokens_in)
    assert 0 <= got < pool.sats
    assert is_valid_pool_transition(pool, after)
    assert not is_valid_pool_transition(pool, PoolState(after.sats - 1, after.tokens))
    assert apply_sell_tokens_exact_in(pool, tokens_in) == after
    if got:
        assert classify_change(pool, after) == "sell"


@settings(max_examples=300)
@given(pool=pools, data=st.data())
def test_sell_tokens_exact_out_is_tight(pool: PoolState, data: st.DataObject) -> None:
    sats_out = data.draw(st.integers(1, pool.sats) | st.sampled_from([1, pool.sats - 1]))
    try:
        paid = sell_tokens_exact_out(pool, sats_out)
    except ValueError:
        # Impossible: not even the most tokens an output can hold pays for it.
        assert not is_valid_pool_transition(pool, PoolState(pool.sats - sats_out, MAX_TOKENS))
        return
    after = PoolState(pool.sats - sats_out, pool.tokens + paid)
    assert paid >= 1
    assert is_valid_pool_transition(pool, after)
    assert not is_valid_pool_transition(pool, PoolState(after.sats, after.tokens - 1))
    assert apply_sell_tokens_exact_out(pool, sats_out) == after
    assert classify_change(pool, after) == "sell"


@settings(max_examples=200)
@given(k=st.integers(1, 10**12), t=st.integers(1, 2**61))
def test_formulas_at_their_rounding_edges(k: int, t: int) -> None:
    """Pools built so each formula's rounding step sits exactly on a multiple of its divisor."""
    # Selling T tokens into (X, T) halves the needed sats: the pool can spare X/2 = 1003k − 1
    # sats including fee, where 1000·(spare + 1) is a multiple of 1003.
    pool = PoolState(2 * (1003 * k - 1), t)
    got = sell_tokens_exact_in(pool, t)
    assert is_valid_pool_transition(pool, PoolState(pool.sats - got, 2 * t))
    assert not is_valid_pool_transition(pool, PoolState(pool.sats - got - 1, 2 * t))
    # Buying T of 2T tokens doubles the needed sats: m = X = 997k + 1 sats are missing after fee.
    pool = PoolState(997 * k + 1, 2 * t)
    paid = buy_tokens_exact_out(pool, t)
    assert is_valid_pool_transition(pool, PoolState(pool.sats + paid, t))
    assert not is_valid_pool_transition(pool, PoolState(pool.sats + paid - 1, t))
    # Paying exactly 1000k sats (fee exactly 3k) into (X, T) with X + 997k dividing K.
    pool = PoolState(997 * k, t)
    got = buy_tokens_exact_in(pool, 1000 * k)
    assert got == t // 2  # net = 2X, so T/2 rounded up must stay: T − ceil(T/2) = floor(T/2)
    assert is_valid_pool_transition(pool, PoolState(pool.sats + 1000 * k, t - got))
    assert not is_valid_pool_transition(pool, PoolState(pool.sats + 1000 * k, t - got - 1))


def test_formulas_with_products_beyond_64_bits() -> None:
    """K = X·T far above 2^63 (the VM's big integers since 2025): still exact."""
    pool = PoolState(10**15, 2**62)
    assert pool.k > 2**100
    paid = buy_tokens_exact_out(pool, 2**61)
    assert is_valid_pool_transition(pool, PoolState(pool.sats + paid, 2**61))
    assert not is_valid_pool_transition(pool, PoolState(pool.sats + paid - 1, 2**61))


# --- formulas: exhaustive scan of the predicate on small pools --------------------------------

# Small enough to scan, large enough that the 0.3 % fee (0 below |Δ| = 334) and its rounding
# matter: the fee thresholds sit at multiples of 1000/3. (2004 sats selling T tokens into a
# T-token pool can spare 1002 = 1003 − 1 sats: the sell formula's rounding edge.)
SMALL_SATS = [*range(1, 121), 332, 333, 334, 335, 500, 666, 667, 997, 999, 1000, 1001, 1003, 2004]
SMALL_TOKENS = range(1, 7)


def scan_least_payment_to_buy(pool: PoolState, d: int) -> int:
    """Smallest sats payment the predicate accepts for taking `d` tokens (counting up from 0)."""
    pay = 0
    while not is_valid_pool_transition(pool, PoolState(pool.sats + pay, pool.tokens - d)):
        pay += 1
    return pay


def scan_most_tokens_for(pool: PoolState, pay: int) -> int:
    """Largest token take the predicate accepts for paying `pay` sats (every take tried)."""
    return max(
        d
        for d in range(pool.tokens + 1)
        if is_valid_pool_transition(pool, PoolState(pool.sats + pay, pool.tokens - d))
    )


def scan_most_sats_for(pool: PoolState, s: int) -> int:
    """Largest sats take the predicate accepts for paying `s` tokens (every take tried)."""
    return max(
        got
        for got in range(pool.sats + 1)
        if is_valid_pool_transition(pool, PoolState(pool.sats - got, pool.tokens + s))
    )


def scan_least_tokens_to_take(pool: PoolState, out: int) -> int:
    """Smallest token payment the predicate accepts for taking `out` sats (counting up from 0)."""
    s = 0
    while not is_valid_pool_transition(pool, PoolState(pool.sats - out, pool.tokens + s)):
        s += 1
    return s


def test_buy_tokens_exact_out_matches_scan() -> None:
    checked = 0
    for x in SMALL_SATS:
        for t in SMALL_TOKENS:
            pool = PoolState(x, t)
            for d in range(1, t):
                assert buy_tokens_exact_out(pool, d) == scan_least_payment_to_buy(pool, d), (
                    x,
                    t,
                    d,
                )
                checked += 1
            with pytest.raises(ValueError):
                buy_tokens_exact_out(pool, t)
    assert checked > 1000


def test_buy_tokens_exact_in_matches_scan() -> None:
    for x in SMALL_SATS[::3]:
        for t in SMALL_TOKENS:
            pool = PoolState(x, t)
            for pay in range(1, 1500, 7):
                assert buy_tokens_exact_in(pool, pay) == scan_most_tokens_for(pool, pay), (
                    x,
                    t,
                    pay,
                )


def test_sell_tokens_exact_in_matches_scan() -> None:
    for x in SMALL_SATS:
        for t in SMALL_TOKENS[:4]:
            pool = PoolState(x, t)
            for s in range(1, 6):
                assert sell_tokens_exact_in(pool, s) == scan_most_sats_for(pool, s), (x, t, s)


def test_sell_tokens_exact_out_matches_scan() -> None:
    impossible = 0
    for x in SMALL_SATS:
        for t in SMALL_TOKENS[:4]:
            pool = PoolState(x, t)
            for out in range(1, x + 1):
                if not is_valid_pool_transition(pool, PoolState(x - out, MAX_TOKENS)):
                    # More tokens never hurt, so no amount works: the formula must refuse.
                    with pytest.raises(ValueError, match="cannot take"):
                        sell_tokens_exact_out(pool, out)
                    impossible += 1
                    continue
                assert sell_tokens_exact_out(pool, out) == scan_least_tokens_to_take(pool, out), (
                    x,
                    t,
                    out,
                )
    assert impossible > 0


# --- errors, price, classification ------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: buy_tokens_exact_out(PoolState(1000, 10), 10), "must keep 1"),
        (lambda: buy_tokens_exact_out(PoolState(1000, 10), 0), "at least 1"),
        (lambda: buy_tokens_exact_in(PoolState(1000, 10), 0), "at least 1"),
        (lambda: sell_tokens_exact_in(PoolState(1000, 10), -3), "at least 1"),
        (lambda: sell_tokens_exact_out(PoolState(1000, 10), 1000), "cannot take"),
        (lambda: sell_tokens_exact_out(PoolState(1000, 10), 998), "cannot take"),
        (lambda: buy_tokens_exact_in(PoolState(0, 10), 5), "not a tradable pool"),
        (lambda: sell_tokens_exact_in(PoolState(1000, 0), 5), "not a tradable pool"),
        (lambda: sell_tokens_exact_in(PoolState(1000, 2**62), 2**62), "2\\^63-1 tokens"),
        (lambda: buy_tokens_exact_in(PoolState(MAX_SATS, 10), 1), "21e14"),
    ],
)
def test_impossible_trades_raise(call: Callable[[], int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_sell_tokens_exact_out_largest_possible() -> None:
    # X = 1000: taking 997 leaves 3 sats − fee floor(2.991) = 1, so 10,000 tokens must remain
    # (1 × T' ≥ K = 10,000); taking 998 leaves 2 − 2 = 0, which no amount of tokens can fix.
    pool = PoolState(1000, 10)
    assert sell_tokens_exact_out(pool, 997) == 10_000 - 10


def test_marginal_price() -> None:
    assert marginal_price(PoolState(10, 4)) == 2.5
    assert marginal_price(PoolState(1, 3)) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        marginal_price(PoolState(10, 0))


@pytest.mark.parametrize(
    ("after", "kind"),
    [
        (PoolState(1100, 9), "buy"),
        (PoolState(900, 11), "sell"),
        (PoolState(1100, 11), "deposit"),
        (PoolState(1100, 10), "deposit"),
        (PoolState(1000, 11), "deposit"),
        (PoolState(1000, 10), "unchanged"),
        (PoolState(900, 9), "drain"),
        (PoolState(900, 10), "drain"),
        (PoolState(1000, 9), "drain"),
    ],
)
def test_classify_change(after: PoolState, kind: str) -> None:
    before = PoolState(1000, 10)
    assert classify_change(before, after) == kind
    # Deposits and no-ops pass the trade path; drains never do.
    if kind in ("deposit", "unchanged"):
        assert is_valid_pool_transition(before, after)
    if kind == "drain":
        assert not is_valid_pool_transition(before, after)


def test_pool_state_k_and_immutability() -> None:
    pool = PoolState(3, 7)
    assert pool.k == 21
    with pytest.raises(AttributeError):
        pool.sats = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    ("d_sats", "d_tokens", "kind"),
    [
        (5, -1, "buy"),
        (-5, 1, "sell"),
        (5, 0, "deposit"),
        (0, 3, "deposit"),
        (5, 3, "deposit"),
        (0, 0, "unchanged"),
        (-5, 0, "drain"),
        (0, -1, "drain"),
        (-5, -1, "drain"),
    ],
)
def test_change_kind_names_every_sign_pair(d_sats: int, d_tokens: int, kind: str) -> None:
    """The docstring's table of `classify_change`, from the deltas and from the two states."""
    assert change_kind(d_sats, d_tokens) == kind
    before = PoolState(10_000, 500)
    assert classify_change(before, PoolState(10_000 + d_sats, 500 + d_tokens)) == kind
