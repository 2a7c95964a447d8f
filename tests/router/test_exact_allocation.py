"""Exact in: the integer split over the pools a route chose is the best one there is.

Rounding makes each pool's output a step function of its input, so the split is held to
brute force (every split of the amount over the same pools) on pools small enough to try
them all."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router.errors import RouterError
from router.pools import PoolBook
from router.route import Direction, Hop, solve_hop
from tests.router.helpers import TOKEN_A, pools_from
from tests.router.reference import best_exact_in_split


def _exact_in(states: list[tuple[int, int]], direction: Direction, amount: int) -> Hop:
    """The exact-in hop of `amount` over pools in `states`, bytes free."""
    book = PoolBook(pools_from(TOKEN_A, states))
    return solve_hop(
        book, TOKEN_A, direction, amount, exact_in=True, fee_per_byte=0.0, max_pools=10
    )


small_pools = st.lists(
    st.tuples(st.integers(700, 5_000), st.integers(2, 400)), min_size=2, max_size=3
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    states=small_pools,
    direction=st.sampled_from(list(Direction)),
    amount=st.integers(1, 300),
)
def test_exact_in_split_over_the_chosen_pools_is_optimal(
    states: list[tuple[int, int]], direction: Direction, amount: int
) -> None:
    try:
        hop = _exact_in(states, direction, amount)
    except RouterError:  # refusals are other tests' concern
        return
    chosen = [(leg.pool.sats, leg.pool.tokens) for leg in hop.legs]
    assert hop.amount_in == amount
    assert hop.amount_out == best_exact_in_split(chosen, direction, amount)


def test_a_sale_over_two_pools_gets_the_unit_rounding_used_to_leave() -> None:
    # Cheapest-unit-first gave 1,595 sats here (43 and 109 tokens); 44 and 108 give 1,596.
    states = [(4109, 286), (1519, 97)]
    hop = _exact_in(states, Direction.SELL, 152)
    assert hop.amount_out == best_exact_in_split(states, Direction.SELL, 152) == 1596


def test_a_purchase_over_three_pools_gets_the_unit_moves_of_input_used_to_miss() -> None:
    # Moves of input between the legs stopped at 14 tokens from each (42); 16, 16 and 11
    # (56, 56 and 38 sats) give 43: one leg gives up 11 sats, several units of this cheap token.
    states = [(1198, 359), (1216, 364), (1222, 365)]
    hop = _exact_in(states, Direction.BUY, 150)
    assert hop.amount_out == best_exact_in_split(states, Direction.BUY, 150) == 43
    assert [leg.after.sats - leg.pool.sats for leg in hop.legs] == [56, 56, 38]
