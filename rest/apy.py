"""Liquidity providers' yield: the growth of each pool lineage's √k from trading fees, relative
to the liquidity that earned it, annualised (definition in docs/api.md, "APY").

For a constant-product pool √k = √(sats·tokens) measures its liquidity; a trade leaves the LP
fee in the pool, so √k grows by the factor g = √(k_after / k_before) while, at an unchanged
price, the pool's value (2·sats) grows by the same factor. Deposits also grow k but are not
earnings, and a withdrawal ends the lineage, so only buy and sell events count as income:

    income   = Σ over buys and sells in the window   (g − 1) · sats_before      [sats]
    exposure = ∫ over the window  Σ over live pools  sats(t) dt                 [sats · s]
    ρ        = income / exposure                                  (return per second)
    APY      = ((1 + ρ·Δ)^(year / Δ) − 1) · 100 %                 (Δ = end − start)

Pools enter the exposure in proportion to their size and lifetime within the window, so ρ is the
liquidity-weighted mean of the pools' own rates. The factor 2 of "value = 2·sats" cancels.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Context, Decimal

YEAR = 365 * 86_400
_CTX = Context(prec=40, Emax=999_999_999)


def fee_growth(sats_before: int, tokens_before: int, sats_after: int, tokens_after: int) -> float:
    """g − 1 = √(k_after / k_before) − 1, computed without cancellation for tiny fees."""
    kb = sats_before * tokens_before
    ka = sats_after * tokens_after
    if kb <= 0:
        return 0.0
    return (ka - kb) / kb / (math.sqrt(ka / kb) + 1.0)


def fee_income(sats_before: int, tokens_before: int, sats_after: int, tokens_after: int) -> float:
    """(g − 1)·sats_before: one trade's LP income in sats (SQL: `ladle_fee_income`)."""
    return fee_growth(sats_before, tokens_before, sats_after, tokens_after) * sats_before


def income(trades: Iterable[tuple[int, int, int, int]]) -> float:
    """Σ (g − 1)·sats_before over (sats_before, tokens_before, sats_after, tokens_after)."""
    return sum(fee_growth(sb, tb, sa, ta) * sb for sb, tb, sa, ta in trades)


def exposure(initial: int, steps: Iterable[tuple[int, int]], start: int, end: int) -> float:
    """∫ over [start, end] of a step function: `initial` sats at `start`, then each (time, sats)
    holds from `time` on. Steps must come in time order (block heights: running max times)."""
    total = 0.0
    at, level = start, initial
    for t, sats in steps:
        t = min(max(t, start), end)
        total += level * (t - at)
        at, level = t, sats
    return total + level * (end - at)


@dataclass(frozen=True, slots=True)
class Apy:
    percent: Decimal
    pools: int
    income: float  # sats
    exposure: float  # sats · seconds

    @property
    def text(self) -> str:
        return decimal_text(self.percent)

    @property
    def basis_points(self) -> int:
        """APY in basis points, capped at 2^53 − 1 (JSON integers beyond are unsafe)."""
        return min(int((self.percent * 100).to_integral_value(context=_CTX)), (1 << 53) - 1)


def annualise(income_sats: float, exposure_sats_seconds: float, start: int, end: int) -> Decimal:
    if exposure_sats_seconds <= 0 or end <= start:
        return Decimal(0)
    span = end - start
    period = Decimal(repr(income_sats / exposure_sats_seconds * span))
    growth = _CTX.power(_CTX.add(Decimal(1), period), _CTX.divide(Decimal(YEAR), Decimal(span)))
    return _CTX.multiply(_CTX.subtract(growth, Decimal(1)), Decimal(100))


def apy(pools: int, income_sats: float, exposure_sats_seconds: float, start: int, end: int) -> Apy:
    return Apy(
        annualise(income_sats, exposure_sats_seconds, start, end),
        pools,
        income_sats,
        exposure_sats_seconds,
    )


def decimal_text(value: Decimal) -> str:
    """A plain decimal string with ten places (never an exponent)."""
    return f"{value:.10f}"
