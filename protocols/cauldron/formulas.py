"""Exact integer trade maths for one Cauldron pool.

`is_valid_pool_transition` is the contract's trade-path predicate; each trade formula returns
the tightest amount that predicate accepts (one unit better for the trader and it fails), so a
router that uses them never builds a transaction the contract rejects, and leaves no value on
the table. Python ints are exact, so K = X·T never overflows (the VM has big integers since
May 2025); only `marginal_price` returns a float, for display.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bch.token import MAX_TOKEN_AMOUNT
from bch.tx import MAX_SATS

LP_FEE_NUM = 3
LP_FEE_DEN = 1000
# A BCH reserve that keeps a pool's continuation above dust (3 × (size + 148)) while it holds
# fewer than 2^32 tokens: the P2SH32 output with its FT prefix is then at most 83 bytes. Wider
# amounts make an 87-byte output needing 705 sats; `router.pools.pool_reserve` has the exact
# rule per amount. Policy, not contract: the predicate ignores it.
MIN_POOL_SATS = 693

ChangeKind = Literal["buy", "sell", "deposit", "unchanged", "drain"]


@dataclass(frozen=True, slots=True)
class PoolState:
    """A pool's BCH (sats) and fungible-token balance; any ints, so bad states can be judged."""

    sats: int
    tokens: int

    @property
    def k(self) -> int:
        """The constant product the contract keeps from falling: sats × tokens."""
        return self.sats * self.tokens


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def lp_fee(sats_in: int, sats_out: int) -> int:
    """Fee the contract charges: 0.3 % of the pool's BCH delta, rounded down, both directions."""
    return abs(sats_out - sats_in) * LP_FEE_NUM // LP_FEE_DEN


def is_valid_pool_transition(before: PoolState, after: PoolState) -> bool:
    """Would the trade path accept re-creating `before` as `after`?

    Contract: `(out_sats − fee) × out_tokens ≥ in_sats × in_tokens`. Consensus adds what an
    output can hold: at least one token (a token-less output has an empty category, which
    fails the category check), at most 2^63−1 tokens, and 0..21e14 sats.
    """
    if not 1 <= after.tokens <= MAX_TOKEN_AMOUNT or not 0 <= after.sats <= MAX_SATS:
        return False
    fee = lp_fee(before.sats, after.sats)
    return (after.sats - fee) * after.tokens >= before.sats * before.tokens


# --- the four trades ---------------------------------------------------------------------------


def _check_pool(pool: PoolState) -> None:
    if not 1 <= pool.sats <= MAX_SATS or not 1 <= pool.tokens <= MAX_TOKEN_AMOUNT:
        raise ValueError(f"not a tradable pool: {pool.sats} sats, {pool.tokens} tokens")


def _check_amount(amount: int, what: str) -> None:
    if amount < 1:
        raise ValueError(f"{what} must be at least 1, got {amount}")


def _check_result(after: PoolState) -> None:
    if after.sats > MAX_SATS:
        raise ValueError(f"trade would leave the pool above the 21e14 sats limit: {after.sats}")
    if after.tokens > MAX_TOKEN_AMOUNT:
        raise ValueError(f"trade would leave the pool above 2^63-1 tokens: {after.tokens}")


def buy_tokens_exact_out(pool: PoolState, tokens_out: int) -> int:
    """Sats the trader must pay the pool to take exactly `tokens_out` tokens out of it.

    ValueError if `tokens_out` < 1 or would leave the pool under its 1-token reserve.
    """
    _check_pool(pool)
    _check_amount(tokens_out, "tokens_out")
    if tokens_out >= pool.tokens:
        raise ValueError(
            f"cannot buy {tokens_out} tokens: the pool holds {pool.tokens} and must keep 1"
        )
    need = _cdiv(pool.k, pool.tokens - tokens_out)  # least pool sats after fee
    missing = need - pool.sats
    # Least D with D − floor(3D/1000) ≥ missing.
    sats_in = 0 if missing <= 0 else (LP_FEE_DEN * (missing - 1)) // (LP_FEE_DEN - LP_FEE_NUM) + 1
    _check_result(PoolState(pool.sats + sats_in, pool.tokens))
    return sats_in


def buy_tokens_exact_in(pool: PoolState, sats_in: int) -> int:
    """Most tokens the trader can take for paying exactly `sats_in` sats (may be 0)."""
    _check_pool(pool)
    _check_amount(sats_in, "sats_in")
    _check_result(PoolState(pool.sats + sats_in, pool.tokens))
    net = pool.sats + sats_in - sats_in * LP_FEE_NUM // LP_FEE_DEN
    return pool.tokens - _cdiv(pool.k, net)


def sell_tokens_exact_in(pool: PoolState, tokens_in: int) -> int:
    """Most sats the trader can take for paying exactly `tokens_in` tokens (may be 0)."""
    _check_pool(pool)
    _check_amount(tokens_in, "tokens_in")
    _check_result(PoolState(pool.sats, pool.tokens + tokens_in))
    spare = pool.sats - _cdiv(pool.k, pool.tokens + tokens_in)  # sats the pool can lose, fee incl.
    # Greatest D with D + floor(3D/1000) ≤ spare.
    return (LP_FEE_DEN * spare + LP_FEE_DEN - 1) // (LP_FEE_DEN + LP_FEE_NUM)


def sell_tokens_exact_out(pool: PoolState, sats_out: int) -> int:
    """Fewest tokens the trader must pay to take exactly `sats_out` sats out of the pool.

    ValueError if `sats_out` < 1 or `sats_out` plus its fee would take all of the pool's sats
    (no token amount can pay for that), or if the tokens needed overflow 2^63−1.
    """
    _check_pool(pool)
    _check_amount(sats_out, "sats_out")
    net = pool.sats - sats_out - sats_out * LP_FEE_NUM // LP_FEE_DEN
    if net < 1:
        raise ValueError(
            f"cannot take {sats_out} sats: with the {lp_fee(0, sats_out)} sats fee that needs "
            f"more than the pool's {pool.sats} sats"
        )
    tokens_in = _cdiv(pool.k, net) - pool.tokens
    _check_result(PoolState(pool.sats, pool.tokens + tokens_in))
    return tokens_in


def apply_buy_tokens_exact_out(pool: PoolState, tokens_out: int) -> PoolState:
    return PoolState(pool.sats + buy_tokens_exact_out(pool, tokens_out), pool.tokens - tokens_out)


def apply_buy_tokens_exact_in(pool: PoolState, sats_in: int) -> PoolState:
    return PoolState(pool.sats + sats_in, pool.tokens - buy_tokens_exact_in(pool, sats_in))


def apply_sell_tokens_exact_in(pool: PoolState, tokens_in: int) -> PoolState:
    return PoolState(pool.sats - sell_tokens_exact_in(pool, tokens_in), pool.tokens + tokens_in)


def apply_sell_tokens_exact_out(pool: PoolState, sats_out: int) -> PoolState:
    return PoolState(pool.sats - sats_out, pool.tokens + sell_tokens_exact_out(pool, sats_out))


def marginal_price(pool: PoolState) -> float:
    """Sats per token before fee (X/T): for display and ranking, never for amounts."""
    if pool.tokens <= 0:
        raise ValueError("a pool without tokens has no price")
    return pool.sats / pool.tokens


def classify_change(before: PoolState, after: PoolState) -> ChangeKind:
    """Name a pool's change by the signs of (Δsats, Δtokens), from the pool's point of view.

    (+, −) "buy": the user bought tokens; (−, +) "sell": the user sold tokens; both ≥ 0 and not
    both 0 — incl. one-sided additions — "deposit"; (0, 0) "unchanged"; both ≤ 0 and not both 0
    "drain", which the trade path can never accept (only the withdraw path takes value out, and
    that ends the pool instead). Signs only: check `is_valid_pool_transition` separately.
    """
    return change_kind(after.sats - before.sats, after.tokens - before.tokens)


def change_kind(d_sats: int, d_tokens: int) -> ChangeKind:
    """`classify_change` from the deltas (the indexer's block path has no `PoolState` pair per
    pool move)."""
    if d_sats > 0 and d_tokens < 0:
        return "buy"
    if d_sats < 0 and d_tokens > 0:
        return "sell"
    if d_sats >= 0 and d_tokens >= 0:
        return "unchanged" if d_sats == d_tokens == 0 else "deposit"
    return "drain"
