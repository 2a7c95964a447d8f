"""The recorded sweep (`solve.continuous._SweepTable`, what `_split` asks through
`_Plan.sweep`) stops where the one-shot walk over the same breakpoints (`_sweep`) stops, with
the same rate, members and `jumped`, whatever orders came before it on the same plan (the table
is extended lazily and shared)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bch.token import MAX_TOKEN_AMOUNT
from bch.tx import MAX_SATS
from router.route import Direction
from router.solve.continuous import _sweep
from router.solve.model import _Model
from tests.router.helpers import TOKEN_A, make_pool

pool_states = st.one_of(
    # priced around 50 sats per token, as the bench's token
    st.tuples(st.integers(706, 10**8), st.floats(0.5, 2.0)).map(
        lambda s: (s[0], max(2, round(s[0] / (50 * s[1]))))
    ),
    # anything, up to the limits (reserves and caps bind early)
    st.tuples(
        st.one_of(st.integers(681, 5_000), st.integers(706, MAX_SATS)),
        st.one_of(st.integers(2, 300), st.integers(2, MAX_TOKEN_AMOUNT)),
    ),
)
targets = st.one_of(
    st.floats(0.0, 10.0),
    st.floats(1.0, 1e7),
    st.floats(1.0, 1e19),
    st.just(float("inf")),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(pool_states, min_size=1, max_size=40),
    st.sampled_from(list(Direction)),
    st.sampled_from([0.0, 1.0, 2.5, 40.0]),
    st.booleans(),
    st.lists(st.tuples(targets, st.integers(1, 45)), min_size=1, max_size=6),
)
def test_the_table_stops_where_the_walk_stops(
    states: list[tuple[int, int]],
    direction: Direction,
    fee_per_byte: float,
    exact_in: bool,
    orders: list[tuple[float, int]],
) -> None:
    pools = [make_pool(TOKEN_A, sats, tokens, f"t{k}") for k, (sats, tokens) in enumerate(states)]
    m = _Model(pools, direction)
    plan = m.plan(fee_per_byte)
    for target, limit in orders:
        walked = _sweep(m, plan.order, plan.enter, m.by_vmin, target, exact_in, limit)
        assert plan.sweep(m, target, exact_in, limit) == walked


def test_every_stop_of_a_long_walk_in_both_orders() -> None:
    """A 300-pool model: every kind of stop (solved, jumped over by an admission, the pool
    limit, the end) at targets across the whole walk, asked rising and then falling."""
    pools = [
        make_pool(TOKEN_A, 10_000 + 977 * k % 5_000_000, 200 + 13 * k % 90_000, f"w{k}")
        for k in range(300)
    ]
    kinds: set[str] = set()
    for direction in Direction:
        m = _Model(pools, direction)
        for fee_per_byte in (0.0, 1.0, 30.0):
            plan = m.plan(fee_per_byte)
            for exact_in in (True, False):
                asks = [(10.0**e, limit) for e in range(14) for limit in (3, 60, 1000)]
                for target, limit in asks + asks[::-1]:
                    walked = _sweep(m, plan.order, plan.enter, m.by_vmin, target, exact_in, limit)
                    assert plan.sweep(m, target, exact_in, limit) == walked
                    if walked.jumped:
                        kinds.add("jumped")
                    elif walked.v > 0.0:
                        kinds.add("solved")
                    elif len(walked.members) >= limit:
                        kinds.add("limit")
                    else:
                        kinds.add("end")
    assert kinds == {"jumped", "solved", "limit", "end"}
