"""Reference implementations the router is held to: slow, obviously correct, written apart
from `router.route`, `router.solve` and `router.wire`."""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from protocols.cauldron.formulas import PoolState, buy_tokens_exact_in, sell_tokens_exact_in
from router import wire
from router.hop import Columns, Leg
from router.pools import pool_reserve
from router.route import Direction
from router.solve.model import _Model


def exact_in_out(state: tuple[int, int], direction: Direction, amount: int) -> int | None:
    """What one pool pays for `amount` input under the router's rules (the contract's exact
    formula; a pool keeps one token and, selling, its reserve), None if it cannot take it."""
    if amount == 0:
        return 0
    sats, tokens = state
    try:
        if direction is Direction.BUY:
            out = buy_tokens_exact_in(PoolState(sats, tokens), amount)
            return out if out <= tokens - 1 else None
        out = sell_tokens_exact_in(PoolState(sats, tokens), amount)
    except ValueError:
        return None
    out = min(out, sats - pool_reserve(tokens + amount))
    return out if out >= 0 else None


def best_exact_in_split(
    states: Sequence[tuple[int, int]], direction: Direction, amount: int
) -> int:
    """The most output any split of exactly `amount` input over `states` gives (every split
    tried; a pool may take nothing). -1 if none is possible."""

    def best(k: int, left: int) -> int:
        if k == len(states) - 1:
            out = exact_in_out(states[k], direction, left)
            return -1 if out is None else out
        top = -1
        for x in range(left + 1):
            here = exact_in_out(states[k], direction, x)
            if here is None:
                continue
            rest = best(k + 1, left - x)
            if rest >= 0:
                top = max(top, here + rest)
        return top

    return best(0, amount)


def legs_json_parts(
    legs: Sequence[Leg],
) -> tuple[list[str], tuple[Direction, float, float] | None]:
    """Each leg's JSON object (its plain form, `wire.leg_doc`, as orjson writes it) and the
    prices a hop of these legs gives (`Quote.prices`): (BUY, least pre-trade, least
    post-trade sats per token) when every leg buys, (SELL, greatest, greatest) when every
    leg sells; None when they are mixed (or there are none)."""
    texts = [orjson.dumps(wire.leg_doc(leg)).decode() for leg in legs]
    directions = {leg.direction for leg in legs}
    if len(directions) != 1:
        return texts, None
    (direction,) = directions
    pick = min if direction is Direction.BUY else max
    pre = pick(leg.pool.sats / leg.pool.tokens for leg in legs)
    post = pick(leg.after.sats / leg.after.tokens for leg in legs)
    return texts, (direction, pre, post)


def columns_json_parts(
    columns: Columns,
) -> tuple[list[str], tuple[Direction, float, float] | None]:
    """`legs_json_parts` of a hop's columns (pools, sats after, tokens after)."""
    pools, sats, tokens = columns
    return legs_json_parts(
        [Leg(p, PoolState(x, t)) for p, x, t in zip(pools, sats, tokens, strict=True)]
    )


def legs_json(legs: Sequence[Leg]) -> str:
    """The legs' JSON array, as orjson writes their plain forms."""
    return "[" + ",".join(legs_json_parts(legs)[0]) + "]"


def plain_leg(m: _Model, i: int, amount_in: int, amount_out: int) -> Leg:
    """Model pool i's leg for a trade of `amount_in` for `amount_out`, spelled out."""
    pool = m.pools[i]
    if m.direction is Direction.BUY:
        return Leg(pool, PoolState(pool.sats + amount_in, pool.tokens - amount_out))
    return Leg(pool, PoolState(pool.sats - amount_out, pool.tokens + amount_in))
