"""Reference implementations the router is held to: slow, obviously correct, written apart
from `router.route`."""

from __future__ import annotations

from collections.abc import Sequence

from protocols.cauldron.formulas import PoolState, buy_tokens_exact_in, sell_tokens_exact_in
from router.pools import pool_reserve
from router.route import Direction


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
