"""Route search: exactness, quality against an independent continuous optimum, the single-pool
floor, byte costs, reserves, the standard-size cap and the router fee arithmetic."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from bch.token import MAX_TOKEN_AMOUNT
from protocols.cauldron.formulas import (
    PoolState,
    buy_tokens_exact_in,
    buy_tokens_exact_out,
    is_valid_pool_transition,
    sell_tokens_exact_in,
    sell_tokens_exact_out,
)
from router import wire
from router.errors import ErrorCode, RouterError
from router.params import QuoteRequest, RouterConfig, Side
from router.pools import BCH, Pool, PoolBook
from router.quotes import fee_on, gross_for_net, quote
from router.route import Direction, Hop, solve_hop
from router.txsize import max_pools_for
from tests.router.helpers import (
    FEE_WALLET,
    LARGEST_POOL_DUST,
    TOKEN_A,
    TOKEN_B,
    Curve,
    continuation_dust,
    even_pools,
    optimum,
    pools_from,
)
from tests.router.schemas import ValidationError, validator

# ROUTER_EXAMPLES=2000 for a deeper search; the default keeps the suite fast.
EXAMPLES = int(os.environ.get("ROUTER_EXAMPLES", "40"))
FAST = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def pool_states(draw: st.DrawFn, max_pools: int = 7) -> list[tuple[int, int]]:
    """Pools with sats from dust to 100 BCH and prices from 1e-6 to 1e4 sats per token."""
    n = draw(st.integers(1, max_pools))
    states = []
    for _ in range(n):
        sats = draw(st.integers(LARGEST_POOL_DUST, 10**10))
        log_price = draw(st.floats(-6, 4))
        tokens = max(1, min(10**15, round(sats / 10**log_price)))
        states.append((sats, tokens))
    return states


def _hop(
    states: Sequence[tuple[int, int]],
    direction: Direction,
    amount: int,
    *,
    exact_in: bool,
    fee_per_byte: float = 0.0,
    max_pools: int = 1000,
) -> Hop:
    book = PoolBook(pools_from(TOKEN_A, states))
    return solve_hop(
        book,
        TOKEN_A,
        direction,
        amount,
        exact_in=exact_in,
        fee_per_byte=fee_per_byte,
        max_pools=max_pools,
    )


def _curves(states: Sequence[tuple[int, int]], direction: Direction) -> list[Curve]:
    return [Curve(x, t, direction is Direction.BUY) for x, t in states]


def _check_legs(hop: Hop) -> None:
    """Every leg is accepted by the contract and keeps the router's reserves."""
    for leg in hop.legs:
        assert is_valid_pool_transition(leg.pool.state, leg.after)
        assert leg.after.tokens >= 1 and leg.after.sats >= continuation_dust(leg.after.tokens)
        assert leg.amount_in >= 1 and leg.amount_out >= 1
        assert leg.direction is hop.direction


def _single_out(state: tuple[int, int], direction: Direction, amount: int) -> int:
    """Exact output of one pool for the whole input, straight from the formulas; 0 if the pool
    cannot use it all (a reserve would bind first) or gives nothing."""
    pool = PoolState(*state)
    tokens = state[1]
    try:
        if direction is Direction.BUY:
            if tokens < 2:
                return 0
            out = buy_tokens_exact_in(pool, amount)
            if out == tokens - 1 and amount > buy_tokens_exact_out(pool, tokens - 1):
                return 0
            return out
        out = sell_tokens_exact_in(pool, amount)
        cap = _max_payout(state)
        if out > cap or (out == cap and amount > sell_tokens_exact_out(pool, cap)):
            return 0
        return out
    except ValueError:
        return 0


def _capped_out(state: tuple[int, int], direction: Direction, amount: int) -> int:
    """What one pool pays for all of `amount`, even past the point where more buys nothing."""
    pool = PoolState(*state)
    try:
        if direction is Direction.BUY:
            return buy_tokens_exact_in(pool, amount) if state[1] >= 2 else 0
        keep = continuation_dust(state[1] + amount)
        return max(0, min(sell_tokens_exact_in(pool, amount), state[0] - keep))
    except ValueError:
        return 0


def _usable_input(state: tuple[int, int], direction: Direction) -> int:
    """Most input a pool turns into output: the input its largest payout needs, the payout
    found by binary search over what the exact formulas accept within the reserves."""
    pool = PoolState(*state)
    sats, tokens = state
    if direction is Direction.BUY:
        if tokens < 2:
            return 0
        try:
            return buy_tokens_exact_out(pool, tokens - 1)
        except ValueError:
            return 21 * 10**14 - sats

    payout = _max_payout(state)
    return sell_tokens_exact_out(pool, payout) if payout else 0


def _max_payout(state: tuple[int, int]) -> int:
    """Largest payout of a sale the exact formulas accept and the sats reserve allows
    (binary search)."""
    pool = PoolState(*state)

    def accepted(payout: int) -> bool:
        try:
            paid = sell_tokens_exact_out(pool, payout)
        except ValueError:
            return False
        return state[0] - payout >= continuation_dust(state[1] + paid)

    lo, hi = 0, state[0]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if accepted(mid):
            lo = mid
        else:
            hi = mid - 1
    return max(lo, 0)


def _single_cost(state: tuple[int, int], direction: Direction, amount: int) -> float:
    pool = PoolState(*state)
    try:
        if direction is Direction.BUY:
            return buy_tokens_exact_out(pool, amount)
        paid = sell_tokens_exact_out(pool, amount)
        if state[0] - amount < continuation_dust(state[1] + paid):
            return math.inf
        return paid
    except ValueError:
        return math.inf


directions = st.sampled_from([Direction.BUY, Direction.SELL])


# --- quality ---------------------------------------------------------------------------------


@FAST
@given(states=pool_states(), direction=directions, scale=st.floats(1e-6, 3.0))
def test_exact_in_is_within_a_unit_per_pool_of_the_continuous_optimum(
    states: list[tuple[int, int]], direction: Direction, scale: float
) -> None:
    """With free bytes the exact route is within one base unit per pool of the continuous
    optimum: at least what the optimum gets from one input unit less per pool, minus one
    output unit per pool (integer parts, contract rounding), and at most the optimum for two
    more input units per pool plus one output unit per pool (the contract rounds its fee down,
    which can favour the trader)."""
    depth = sum(x if direction is Direction.BUY else t for x, t in states)
    amount = max(1, int(depth * scale))
    curves = _curves(states, direction)
    try:
        hop = _hop(states, direction, amount, exact_in=True)
    except RouterError as exc:
        # Too small to buy a unit anywhere, or more than the pools can use.
        assert exc.code is ErrorCode.ROUTE_FAILED
        event("exact in: route_failed")
        assert all(_single_out(s, direction, amount) == 0 for s in states)
        usable = sum(_usable_input(s, direction) for s in states)
        if usable == 0:
            assert "no usable pools" in exc.message
        elif amount > usable:
            assert exc.data is not None and exc.data["max_amount"] == str(usable)
        else:  # too little: no pool pays a unit even for all of it
            assert "too little" in exc.message
            assert all(_capped_out(s, direction, amount) == 0 for s in states)
        return
    _check_legs(hop)
    event(f"exact in: {min(len(hop.legs), 3)}+ legs")
    assert hop.amount_in == amount
    got = hop.amount_out
    xs = optimum(curves, amount, exact_in=True)
    used = sum(1 for x in xs if x > 0)
    lower = sum(c.out(max(0.0, x - 1)) for c, x in zip(curves, xs, strict=True)) - used
    assert got >= lower * (1 - 1e-9) - 1e-6
    n = len(hop.legs)
    xs_more = optimum(curves, amount + 2 * n, exact_in=True)
    upper = sum(c.out(x) for c, x in zip(curves, xs_more, strict=True)) + n
    assert got <= upper * (1 + 1e-9) + 1e-6


@FAST
@given(states=pool_states(), direction=directions, share=st.floats(1e-9, 0.95))
def test_exact_out_delivers_exactly_and_near_the_continuous_optimum(
    states: list[tuple[int, int]], direction: Direction, share: float
) -> None:
    curves = _curves(states, direction)
    capacity = sum(c.out(c.cap) for c in curves)
    amount = int(capacity * share)
    assume(amount >= 1)
    try:
        hop = _hop(states, direction, amount, exact_in=False)
    except RouterError as exc:
        # Only when integer caps (one unit below the continuous ones) cannot deliver it.
        assert exc.code is ErrorCode.ROUTE_FAILED
        assert amount > capacity - 2 * len(states)
        return
    _check_legs(hop)
    event(f"exact out: {min(len(hop.legs), 3)}+ legs")
    assert hop.amount_out == amount  # exactly what was asked
    paid = hop.amount_in
    n = len(hop.legs)
    # At least the optimum for one output unit less per pool, less one input unit per pool
    # (the contract's fee floor can save a unit of the output side, cdiv one of the input).
    if amount > n:
        cheaper = sum(optimum(curves, amount - n, exact_in=False))
        assert paid >= cheaper * (1 - 1e-9) - 1.01 * n - 1e-6
    xs = optimum(curves, amount, exact_in=False)
    # No more than the optimum's pools each giving one more unit, plus one unit each.
    ys = [c.out(x) for c, x in zip(curves, xs, strict=True)]
    used = sum(1 for y in ys if y > 0)
    upper = (
        sum(
            c.input_for(min(y + 1 + used * y / amount, c.out(c.cap)))
            for c, y in zip(curves, ys, strict=True)
            if y > 0
        )
        + n
    )
    assert paid <= upper * (1 + 1e-9) + 1e-6


@FAST
@given(states=pool_states(), direction=directions, scale=st.floats(1e-7, 2.0))
def test_exact_in_never_worse_than_the_best_single_pool(
    states: list[tuple[int, int]], direction: Direction, scale: float
) -> None:
    depth = sum(x if direction is Direction.BUY else t for x, t in states)
    amount = max(1, int(depth * scale))
    best_single = max(_single_out(s, direction, amount) for s in states)
    try:
        hop = _hop(states, direction, amount, exact_in=True)
    except RouterError:
        assert best_single == 0
        return
    assert hop.amount_out >= best_single


@FAST
@given(states=pool_states(), direction=directions, share=st.floats(1e-9, 0.9))
def test_exact_out_never_costs_more_than_the_best_single_pool(
    states: list[tuple[int, int]], direction: Direction, share: float
) -> None:
    amount = max(1, int(max(c.out(c.cap) for c in _curves(states, direction)) * share))
    cheapest = min(_single_cost(s, direction, amount) for s in states)
    assume(cheapest < math.inf)
    hop = _hop(states, direction, amount, exact_in=False)
    assert hop.amount_out == amount
    assert hop.amount_in <= cheapest


# --- byte costs --------------------------------------------------------------------------------


def _net_tokens(hop: Hop, fee_per_byte: float, sats_per_token: float) -> float:
    """Tokens bought minus the pools' miner fee valued in tokens."""
    byte_sats = fee_per_byte * sum(leg.pool.trade_size for leg in hop.legs)
    return hop.amount_out - byte_sats / sats_per_token


def test_pools_whose_bytes_cost_more_than_they_gain_are_dropped() -> None:
    # One deep pool and thirty tiny ones a shade cheaper: with free bytes the tiny ones are
    # worth a few tokens each; at 1 sat/byte each costs ~197 sats, far more than it saves.
    big = [(10**9, 10**9 * 50)]
    tiny = [(10_000, 10_000 * 51) for _ in range(30)]
    states = big + tiny
    free = _hop(states, Direction.BUY, 200_000, exact_in=True)
    paid = _hop(states, Direction.BUY, 200_000, exact_in=True, fee_per_byte=1.0)
    assert len(free.legs) > 1
    assert len(paid.legs) == 1
    price = 1 / 50  # sats per token
    assert _net_tokens(paid, 1.0, price) > _net_tokens(free, 1.0, price)


def test_a_pool_worth_its_bytes_is_kept() -> None:
    # Two deep pools at the same price: splitting a large order saves far more than 197 sats.
    states = [(10**9, 5 * 10**10), (10**9, 5 * 10**10)]
    hop = _hop(states, Direction.BUY, 10**8, exact_in=True, fee_per_byte=1.0)
    assert len(hop.legs) == 2
    a, b = (leg.amount_in for leg in hop.legs)
    # Equal pools, equal shares up to rounding units: the best integer split of two identical
    # step functions need not be the middle one (here it is 3 units off it).
    assert abs(a - b) <= 8


@FAST
@given(states=pool_states(max_pools=10), scale=st.floats(1e-5, 1.0), rate=st.sampled_from([1, 5]))
def test_byte_aware_route_beats_the_byte_blind_one_net_of_fees(
    states: list[tuple[int, int]], scale: float, rate: int
) -> None:
    depth = sum(x for x, _ in states)
    amount = max(1, int(depth * scale))
    try:
        blind = _hop(states, Direction.BUY, amount, exact_in=True)
        aware = _hop(states, Direction.BUY, amount, exact_in=True, fee_per_byte=rate)
    except RouterError:
        return
    _check_legs(aware)
    price = amount / blind.amount_out  # value tokens at the blind route's average price
    blind_net = _net_tokens(blind, rate, price)
    aware_net = _net_tokens(aware, rate, price)
    # The margin covers rounding (a unit per pool) and pricing bytes at the margin, not average.
    slack = len(blind.legs) + 0.01 * abs(blind_net)
    assert aware_net >= blind_net - slack


# --- reserves, caps and failures ------------------------------------------------------------


def test_selling_into_small_pools_leaves_their_dust_threshold() -> None:
    states = [(1_000, 1_000), (5_000, 10_000), (200_000, 10**6)]
    # More tokens than the pools can pay for: refused rather than paying pools for nothing.
    with pytest.raises(RouterError) as info:
        _hop(states, Direction.SELL, 10**12, exact_in=True)
    assert info.value.code is ErrorCode.ROUTE_FAILED
    assert info.value.data is not None
    usable = int(info.value.data["max_amount"])
    hop = _hop(states, Direction.SELL, usable, exact_in=True)
    _check_legs(hop)
    assert hop.amount_in == usable
    # Every pool drained down to (not below) the dust threshold of its output as re-created.
    assert [leg.after.sats for leg in hop.legs] == [
        continuation_dust(leg.after.tokens) for leg in hop.legs
    ]
    assert [continuation_dust(leg.after.tokens) for leg in hop.legs] == [687, 693, 693]


def test_buying_everything_leaves_one_token() -> None:
    states = [(1_000, 3), (2_000, 5)]
    hop = _hop(states, Direction.BUY, 6, exact_in=False)
    assert hop.amount_out == 6
    assert sorted(leg.after.tokens for leg in hop.legs) == [1, 1]
    with pytest.raises(RouterError) as info:
        _hop(states, Direction.BUY, 7, exact_in=False)
    assert info.value.code is ErrorCode.ROUTE_FAILED
    assert "at most 6" in info.value.message


def test_max_pools_caps_the_legs() -> None:
    states = [(10**6, 10**8)] * 20
    hop = _hop(states, Direction.BUY, 10**7, exact_in=True, max_pools=3)
    assert len(hop.legs) == 3
    _check_legs(hop)
    with pytest.raises(RouterError) as info:
        _hop(states, Direction.BUY, 3 * 10**8, exact_in=False, max_pools=3)
    assert info.value.code is ErrorCode.ROUTE_FAILED
    assert "more than 3 pools" in info.value.message


def test_an_order_needing_too_many_pools_fails_with_a_clear_message() -> None:
    book = PoolBook(pools_from(TOKEN_A, [(10_000, 10)] * 600))  # 9 tokens each to give
    request = QuoteRequest(BCH, TOKEN_A, 5_000, Side.BUY)
    with pytest.raises(RouterError) as info:
        quote(book, request, RouterConfig())
    assert info.value.code is ErrorCode.ROUTE_FAILED
    cap = max_pools_for(1)
    assert f"more than {cap} pools" in info.value.message
    assert "100,000 bytes" in info.value.message
    assert info.value.data is not None and info.value.data["max_pools"] == cap
    # The same order in a size that fits is routed.
    ok = quote(book, QuoteRequest(BCH, TOKEN_A, 9 * (cap - 10), Side.BUY), RouterConfig())
    assert ok.output_amount == 9 * (cap - 10)
    assert len(ok.legs) <= cap


def test_unknown_token_and_too_small_orders_fail() -> None:
    book = PoolBook(pools_from(TOKEN_A, [(10**6, 1_000)]))
    with pytest.raises(RouterError) as info:
        quote(book, QuoteRequest(BCH, TOKEN_B, 10_000), RouterConfig())
    assert info.value.code is ErrorCode.ROUTE_FAILED and TOKEN_B in info.value.message
    with pytest.raises(RouterError) as info:
        quote(book, QuoteRequest(BCH, TOKEN_A, 5), RouterConfig())  # a token costs ~1000 sats
    assert info.value.code is ErrorCode.ROUTE_FAILED
    assert "too little" in info.value.message


def test_pools_below_the_reserves_are_not_used() -> None:
    pools = pools_from(TOKEN_A, [(continuation_dust(10**6) - 1, 10**6), (10**6, 0), (10**6, 10**6)])
    book = PoolBook(pools)
    assert [p.sats for p in book.pools(TOKEN_A)] == [10**6]
    hop = solve_hop(
        book, TOKEN_A, Direction.SELL, 1_000, exact_in=True, fee_per_byte=1, max_pools=10
    )
    assert [leg.pool for leg in hop.legs] == [pools[2]]


# --- router fee arithmetic ---------------------------------------------------------------------


@given(
    net=st.integers(1, 5_000),
    bps=st.integers(0, 1000),
    minimum=st.sampled_from([1, 546]),
)
def test_gross_for_net_is_the_smallest_gross_that_nets_exactly(
    net: int, bps: int, minimum: int
) -> None:
    gross = gross_for_net(net, bps, minimum)
    assert gross - fee_on(gross, bps, minimum) == net
    for smaller in range(net, gross):
        assert smaller - fee_on(smaller, bps, minimum) != net


def test_fee_is_floored_and_omitted_below_its_minimum() -> None:
    assert fee_on(999_999, 10, 546) == 999
    assert fee_on(545_999, 10, 546) == 0  # 545 sats would be a dust output
    assert fee_on(546_000, 10, 546) == 546
    assert fee_on(12_345, 10, 1) == 12
    assert fee_on(99, 10, 1) == 0


def _book() -> PoolBook:
    pools = even_pools(TOKEN_A, 40, 2_000_000, 0.02, "a") + even_pools(
        TOKEN_B, 30, 3_000_000, 5.0, "b"
    )
    return PoolBook(pools, version=42, height=812_345)


FEE = RouterConfig(fee_bps=10, fee_address=FEE_WALLET.token_address)


def test_bch_to_token_fee_comes_out_of_the_input() -> None:
    q = quote(_book(), QuoteRequest(BCH, TOKEN_A, 3_000_000), FEE)
    assert q.fee.asset == BCH and q.fee.amount == 3_000 and q.fee.sats == 3_000
    assert q.input_amount == 3_000_000
    assert q.hops[0].amount_in == 3_000_000 - 3_000
    assert q.output_amount == q.hops[0].amount_out
    free = quote(_book(), QuoteRequest(BCH, TOKEN_A, 3_000_000), RouterConfig(fee_bps=0))
    assert free.fee.amount == 0 and free.hops[0].amount_in == 3_000_000
    assert free.output_amount > q.output_amount
    # No fee address, no fee, whatever fee_bps says.
    nowhere = quote(_book(), QuoteRequest(BCH, TOKEN_A, 3_000_000), RouterConfig(fee_bps=50))
    assert nowhere.fee.amount == 0 and nowhere.output_amount == free.output_amount


def test_exact_out_bch_to_token_pays_the_fee_on_top() -> None:
    q = quote(_book(), QuoteRequest(BCH, TOKEN_A, 50_000_000, Side.BUY), FEE)
    assert q.output_amount == 50_000_000
    pools_in = q.hops[0].amount_in
    assert q.input_amount == pools_in + q.fee.amount
    assert q.fee.amount == q.input_amount * 10 // 10_000 >= 546


def test_token_to_bch_fee_comes_out_of_the_proceeds() -> None:
    q = quote(_book(), QuoteRequest(TOKEN_A, BCH, 100_000_000), FEE)
    proceeds = q.hops[0].amount_out
    assert q.fee.amount == proceeds * 10 // 10_000
    assert q.output_amount == proceeds - q.fee.amount
    exact = quote(_book(), QuoteRequest(TOKEN_A, BCH, 1_000_000, Side.BUY), FEE)
    assert exact.output_amount == 1_000_000
    assert exact.hops[0].amount_out == 1_000_000 + exact.fee.amount
    small = quote(_book(), QuoteRequest(TOKEN_A, BCH, 10_000_000), FEE)  # ~200k sats
    assert small.fee.amount == 0  # 10 bps of it is below the fee output's dust


def test_token_to_token_goes_through_bch_with_a_token_fee() -> None:
    q = quote(_book(), QuoteRequest(TOKEN_A, TOKEN_B, 100_000_000), FEE)
    first, second = q.hops
    assert (first.token_id, first.direction) == (TOKEN_A, Direction.SELL)
    assert (second.token_id, second.direction) == (TOKEN_B, Direction.BUY)
    assert first.amount_out == second.amount_in  # every sat from A's pools buys B
    assert q.fee.asset == TOKEN_A and q.fee.amount == 100_000
    assert first.amount_in == 100_000_000 - 100_000
    assert q.fee.sats >= 546  # the token fee output carries its dust in sats
    assert q.output_amount == second.amount_out
    exact = quote(_book(), QuoteRequest(TOKEN_A, TOKEN_B, 123_456, Side.BUY), FEE)
    assert exact.output_amount == 123_456 == exact.hops[1].amount_out
    assert exact.hops[0].amount_out == exact.hops[1].amount_in
    assert exact.input_amount == exact.hops[0].amount_in + exact.fee.amount


def test_quote_json_matches_its_schema_and_carries_the_snapshot() -> None:
    check = validator("quote.result.json")
    for request in (
        QuoteRequest(BCH, TOKEN_A, 3_000_000),
        QuoteRequest(TOKEN_A, BCH, 100_000_000, Side.SELL),
        QuoteRequest(TOKEN_A, TOKEN_B, 123_456, Side.BUY),
    ):
        q = quote(_book(), request, FEE)
        doc = wire.quote_doc(q)
        check.validate(doc)
        assert doc["snapshot_version"] == 42 and doc["index_height"] == 812_345
        assert doc["input_is_bch"] is (request.sell == BCH)
        assert doc["output_is_bch"] is (request.buy == BCH)
        assert len(doc["legs"]) == len(q.legs)
        assert doc["price_impact"] >= 0
        for leg, entry in zip(q.legs, doc["legs"], strict=True):
            assert entry["txid"] == leg.pool.txid and entry["tx_pos"] == leg.pool.vout
            assert int(entry["sats_after"]) == leg.after.sats
    with pytest.raises(ValidationError):
        check.validate({**doc, "input_amount": 5})


def test_prices_move_the_way_the_trade_pushes_them() -> None:
    buy = quote(_book(), QuoteRequest(BCH, TOKEN_A, 20_000_000), FEE)
    pre, post = buy.prices()
    assert post > pre  # buying tokens makes them dearer
    sell = quote(_book(), QuoteRequest(TOKEN_A, BCH, 10**9), FEE)
    pre, post = sell.prices()
    assert post < pre


def test_huge_amounts_stay_exact() -> None:
    """Near the 2^63 token limit floats lose units; the integer phase must not."""
    states = [(10**12, 2**61), (10**12, 2**61 + 12345)]
    amount = 2**60 + 7
    hop = _hop(states, Direction.SELL, amount, exact_in=True)
    assert hop.amount_in == amount
    _check_legs(hop)
    out = _hop(states, Direction.BUY, 2**61 - 3, exact_in=False)
    assert out.amount_out == 2**61 - 3
    _check_legs(out)
    assert all(leg.after.tokens <= MAX_TOKEN_AMOUNT for leg in hop.legs)


def test_pool_identity_is_the_outpoint() -> None:
    a = Pool(TOKEN_B, 0, bytes(20), TOKEN_A, 10**6, 10**6)
    b = Pool(TOKEN_B, 1, bytes(20), TOKEN_A, 10**6, 10**6)
    hop = solve_hop(
        PoolBook([a, b]),
        TOKEN_A,
        Direction.BUY,
        10_000,
        exact_in=True,
        fee_per_byte=0,
        max_pools=5,
    )
    assert {leg.pool.vout for leg in hop.legs} == {0, 1}
