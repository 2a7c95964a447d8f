"""Splitting a trade across several pools with the exact Cauldron formulas (pure).

The scenario is not a router: it splits an order in proportion to the pools' reserves (which
keeps their prices together when they start together) and lets each pool's exact formula decide
the amounts, so every re-created pool is exactly as tight as the contract allows. Half of the
orders use the exact-in formulas, the other half the exact-out ones, so both get exercised.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocols.cauldron.formulas import (
    MIN_POOL_SATS,
    PoolState,
    buy_tokens_exact_in,
    buy_tokens_exact_out,
    is_valid_pool_transition,
    sell_tokens_exact_in,
    sell_tokens_exact_out,
)

MAX_SELL_SHARE = 0.5  # at most add half a pool's tokens in one trade (its price at most halves)


def split_buy(pools: Sequence[PoolState], sats: int, *, exact_out: bool) -> list[PoolState | None]:
    """New states for spending about `sats` on tokens across `pools` (None: pool left out)."""
    total = sum(p.sats for p in pools)
    out: list[PoolState | None] = []
    for pool in pools:
        share = sats * pool.sats // total
        after: PoolState | None = None
        if share >= 1:
            tokens = buy_tokens_exact_in(pool, share)
            if tokens >= 1:
                if exact_out:
                    share = buy_tokens_exact_out(pool, tokens)
                after = PoolState(pool.sats + share, pool.tokens - tokens)
        out.append(after)
    _check(pools, out)
    return out


def split_sell(
    pools: Sequence[PoolState], tokens: int, *, exact_out: bool
) -> list[PoolState | None]:
    """New states for selling about `tokens` across `pools` (None: pool left out)."""
    total = sum(p.tokens for p in pools)
    out: list[PoolState | None] = []
    for pool in pools:
        share = min(tokens * pool.tokens // total, int(pool.tokens * MAX_SELL_SHARE))
        after: PoolState | None = None
        if share >= 1:
            sats = sell_tokens_exact_in(pool, share)
            if exact_out and sats >= 1:
                share = sell_tokens_exact_out(pool, sats)
            if sats >= 1 and pool.sats - sats >= MIN_POOL_SATS:
                after = PoolState(pool.sats - sats, pool.tokens + share)
        out.append(after)
    _check(pools, out)
    return out


def deposit(pool: PoolState, sats: int) -> PoolState | None:
    """The pool after adding `sats` and the tokens that keep its price (None if that is < 1)."""
    tokens = sats * pool.tokens // pool.sats
    if sats < 1 or tokens < 1:
        return None
    after = PoolState(pool.sats + sats, pool.tokens + tokens)
    _check([pool], [after])
    return after


def _check(before: Sequence[PoolState], after: Sequence[PoolState | None]) -> None:
    for b, a in zip(before, after, strict=True):
        if a is not None and not is_valid_pool_transition(b, a):
            raise AssertionError(f"formula gave an invalid pool transition {b} -> {a}")
