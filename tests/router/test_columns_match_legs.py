"""Per-column paths give exactly what the per-leg ones give: the legs' JSON written
from the pools' templates (`wire.legs_json_bytes`) is `columns_json_parts`' text and prices, with or
without the hop's amount columns; a purchase's per-pool columns follow the model they were
made for; the route's amount columns are the legs' own amounts."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bch.token import MAX_TOKEN_AMOUNT
from bch.tx import MAX_SATS
from protocols.cauldron.formulas import PoolState
from router import wire
from router.book import EncodingColumns, Encodings
from router.params import QuoteRequest, RouterConfig
from router.pools import Pool, buy_out_cap
from router.quotes import quote
from router.route import Direction, Leg
from router.solve.model import _Model
from router.wire import legs_json_bytes
from tests.router.helpers import FEE_WALLET, TOKEN_A, TOKEN_B, make_pool, standard_book
from tests.router.reference import columns_json_parts, legs_json

_CONFIG = RouterConfig(fee_address=FEE_WALLET.token_address)

# A pool and its state after a leg: sats and tokens each up, down or unchanged.
_moves = st.tuples(
    st.integers(706, 10**12),
    st.integers(2, 10**12),
    st.integers(-(10**6), 10**6),
    st.integers(-(10**6), 10**6),
)


def _legs(moves: list[tuple[int, int, int, int]]) -> list[Leg]:
    legs = []
    for n, (x, t, dx, dt) in enumerate(moves):
        pool = make_pool(TOKEN_A, x, t, f"r10 {n}", n % 4)
        legs.append(Leg(pool, PoolState(max(1, x + dx), max(1, t + dt))))
    return legs


def _columns(legs: list[Leg]) -> tuple[tuple[Pool, ...], tuple[int, ...], tuple[int, ...]]:
    return (
        tuple(leg.pool for leg in legs),
        tuple(leg.after.sats for leg in legs),
        tuple(leg.after.tokens for leg in legs),
    )


def _encodings(legs: list[Leg]) -> EncodingColumns:
    return EncodingColumns.of_encodings(Encodings().of([leg.pool for leg in legs]))


def _expected(legs: list[Leg], direction: Direction) -> tuple[bytes, float, float] | None:
    """The reference: `reference.columns_json_parts`' objects and prices, taken only when
    every leg goes `direction` (what `wire.quote_bytes` takes from the bytes by column)."""
    texts, prices = columns_json_parts(_columns(legs))
    if prices is None or prices[0] is not direction:
        return None
    return ",".join(texts).encode(), prices[1], prices[2]


def _made(
    legs: list[Leg], direction: Direction, with_amounts: bool
) -> tuple[bytes, float, float] | None:
    amounts = None
    if with_amounts:  # what the route hands over: each leg's own amounts
        amounts = ([leg.amount_in for leg in legs], [leg.amount_out for leg in legs])
    return legs_json_bytes(_columns(legs), direction, _encodings(legs), amounts)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_moves, min_size=0, max_size=12),
    st.sampled_from(["buy", "sell", "mixed"]),
    st.sampled_from(list(Direction)),
    st.booleans(),
)
def test_legs_json_by_column_is_the_reference(
    moves: list[tuple[int, int, int, int]], shape: str, direction: Direction, with_amounts: bool
) -> None:
    if shape == "buy":  # sats in, tokens out
        moves = [(x, t, abs(dx) + 1, -abs(dt)) for x, t, dx, dt in moves]
    elif shape == "sell":  # tokens in, sats out (or none)
        moves = [(x, t, -abs(dx), abs(dt) + 1) for x, t, dx, dt in moves]
    legs = _legs(moves)
    if with_amounts and legs and any(leg.direction is not direction for leg in legs):
        with_amounts = False  # the route's amounts always go its hop's way
    got = _made(legs, direction, with_amounts)
    assert got == _expected(legs, direction)
    if got is not None:  # and the text is `Leg.to_json`'s
        assert orjson.loads(b"[" + got[0] + b"]") == [wire.leg_doc(leg) for leg in legs]
        assert got[0].decode() == legs_json(legs)[1:-1]


def test_legs_json_by_column_refuses_what_it_cannot_write() -> None:
    buy = _legs([(1_000_000, 50_000, 10_000, -200), (2_000_000, 40_000, 7_000, -100)])
    assert legs_json_bytes(_columns([]), Direction.BUY, _encodings([])) is None
    assert legs_json_bytes(_columns(buy), Direction.SELL, _encodings(buy)) is None
    # A purchase leg that pays nothing is a sale to `Leg.to_json`: the hop is mixed.
    still = Leg(buy[1].pool, PoolState(buy[1].pool.sats, buy[1].pool.tokens - 5))
    mixed = [buy[0], still]
    assert legs_json_bytes(_columns(mixed), Direction.BUY, _encodings(mixed)) is None
    assert _expected([buy[0], still], Direction.BUY) is None
    # A leg above 64 bits (no pool holds one) is written as the reference writes it.
    huge = make_pool(TOKEN_A, MAX_SATS, MAX_TOKEN_AMOUNT, "huge")
    wide = Leg(huge, PoolState(2**70, 1))
    made = legs_json_bytes(_columns([wide]), Direction.BUY, _encodings([wide]))
    assert made is not None
    assert made[0].decode() == legs_json([wide])[1:-1]


def test_a_token_less_pool_fails_alike() -> None:
    empty = make_pool(TOKEN_A, 10_000, 0, "token-less")
    legs = [Leg(empty, PoolState(20_000, 1))]
    with pytest.raises(ZeroDivisionError):
        columns_json_parts(_columns(legs))
    with pytest.raises(ZeroDivisionError):
        legs_json_bytes(_columns(legs), Direction.BUY, _encodings(legs))


@pytest.mark.parametrize(
    ("sell", "buy", "amount"),
    [
        ("bch", TOKEN_A, 40_000_000),
        ("bch", TOKEN_A, 700_000_000),
        (TOKEN_A, "bch", 150_000),
        (TOKEN_A, TOKEN_B, 100_000),
    ],
)
def test_route_amounts_are_the_legs_amounts(sell: str, buy: str, amount: int) -> None:
    q = quote(standard_book(), QuoteRequest(sell, buy, amount), _CONFIG)
    assert wire.quote_bytes(q) == orjson.dumps(wire.quote_doc(q))
    for hop in q.hops:
        amounts = hop.amounts()
        assert amounts is not None
        assert list(amounts[0]) == [leg.amount_in for leg in hop.legs]
        assert list(amounts[1]) == [leg.amount_out for leg in hop.legs]
        assert hop.legs


def test_purchase_columns_follow_the_model() -> None:
    """A model after a pool moved (`_Model.replaced`) reads its own pools' columns: its
    purchases equal a model built afresh on the new pools."""
    pools = [make_pool(TOKEN_A, 1_000_000 + 7_919 * n, 20_000 + 13 * n, f"c {n}") for n in range(9)]
    old = _Model(pools, Direction.BUY)
    members = list(range(len(old)))
    v = (old.vmax[0] + old.vmin[0]) / 2
    old.buy_units(members, v)  # the old model's columns made first
    moved = make_pool(TOKEN_A, 3_000_000, 15_000, "c 4")
    new_pools = [*pools[:4], moved, *pools[5:]]
    changed = old.replaced([pools[4]], [moved])
    fresh = _Model(new_pools, Direction.BUY)
    got, want = changed.buy_units(members, v), fresh.buy_units(members, v)
    assert got == want
    caps = [buy_out_cap(p.sats, p.tokens) for p in fresh.pools]
    assert changed.out_limit == fresh.out_limit == caps
    for i, y, paid in zip(got.indices, got.get, got.pay, strict=True):
        assert paid == fresh.in_for_out(i, y)  # each payment is the contract's own


def test_leg_pieces_share_the_text_every_pool_has() -> None:
    """Two pools' leg pieces: the numbers' surroundings that every leg has are one object each
    (a route's legs text then reads only each pool's head and state piece of its own), the
    pieces joined at the numbers are the template, and the pool-specific ones stay apart."""
    one = make_pool(TOKEN_A, 1_000_000, 50_000, "one")
    two = make_pool(TOKEN_A, 2_000_000, 80_000, "two")
    for side in (0, 1):
        a, b = wire.leg_templates(one)[side], wire.leg_templates(two)[side]
        pieces_a, pieces_b = wire.leg_pieces(a), wire.leg_pieces(b)
        assert b"%d".join(pieces_a) == a and b"%d".join(pieces_b) == b
        assert [x is y for x, y in zip(pieces_a, pieces_b, strict=True)] == [
            False, True, True, False, True, True,
        ]  # fmt: skip
