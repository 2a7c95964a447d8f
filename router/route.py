"""Route search: split an order across a token's pools by equal marginal rate, then make it
exact.

The continuous problem (docs/router.md derives it). With the contract's 0.3 % fee on the pool's
BCH delta, a pool (X sats, T tokens, K = X·T) trading at a common marginal rate r (output per
input unit) sits at an amount that is *linear* in v = √r or 1/v:

    buy tokens  (pay sats):   in = a/v − b,  out = T − a·v,   a = √(K/γ),  b = X/γ,  γ = 0.997
    sell tokens (pay tokens): in = a/v − T,  out = φX − a·v,  a = √(φK),   φ = 1000/1003

so the fill of every pool set is `Σa/v − Σb` (exact in) or `Σc − Σa·v` (exact out) and the
common rate has a closed form between breakpoints. Pools are presorted once per snapshot by the
rate at which they start to trade (v_max) and saturate (v_min, where a reserve rule binds), so an
order is solved by one sweep down the breakpoints that stops as soon as the order is filled: it
only touches the pools it uses. A pool also costs its ~197 bytes of miner fee; in the same
variables its surplus over the margin is `b·(v_max − v)²`, so each pool gets an *entry point*
below v_max where its surplus pays for its bytes and the sweep admits it only there.

Floats steer; amounts are exact: each pool gets the integer part of its continuous share, the
remaining base units go one by one to the best marginal rate, a polish pass recovers what
per-pool rounding wastes, and every pool's amounts come from the contract's exact formulas
(`protocols.cauldron.formulas`), so the predicate always accepts them. The result is never
worse than the best single pool, which is checked explicitly.

This module is the search for one hop (`solve_hop`: split, best single pool, refusals); the
exact core it drives is `router.solve` (`model`: a token's pools and their integer
arithmetic; `continuous`: the sweep; `integer`: whole units), the hop types `router.hop`.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from router.errors import route_failed
from router.hop import Columns as Columns
from router.hop import Direction as Direction
from router.hop import Hop as Hop
from router.hop import Leg as Leg
from router.pools import (
    PoolBook,
)
from router.solve.continuous import _allocation, _plain_fill, _Plan
from router.solve.integer import (
    _absorb,
    _best_unit_counts,
    _exact_in,
    _exact_in_by_out,
    _exact_out,
    _exchange_in,
    _leg_columns,
    _polish_in,
    _polish_out,
    _worth_polishing,
)
from router.solve.model import _INF, GAMMA, PHI, _input_limit, _LegColumns, _Model, _model
from router.solve.model import inherit_models as inherit_models
from router.solve.model import prewarm as prewarm
from router.solve.model import update_models as update_models

# --- one hop ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Candidate:
    legs: _LegColumns
    value: float  # out minus byte cost (exact in) or −(in plus byte cost) (exact out)


def _value(m: _Model, legs: _LegColumns, exact_in: bool, cost: Sequence[float], v: float) -> float:
    """Net worth of a set of legs to the user: output minus the pools' byte cost (exact in),
    or minus (input plus byte cost) (exact out), byte cost converted at the margin v²."""
    indices, ins, outs = legs
    bytes_sats: float = sum(map(cost.__getitem__, indices))  # the same sums, C-level
    rate = v * v
    if exact_in:
        out: int = sum(outs)
        conv = rate if m.direction is Direction.BUY else 1.0
        return out - bytes_sats * conv
    paid: int = sum(ins)
    conv = 1.0 if m.direction is Direction.BUY else (1.0 / rate if rate > 0 else 0.0)
    return -(paid + bytes_sats * conv)


def _solve(
    m: _Model, members: Sequence[int], amount: int, exact_in: bool
) -> tuple[list[tuple[int, float, float]], float]:
    """Water-fill `members` exactly (no byte costs). If their continuous capacity falls short,
    saturate them all: integer caps can exceed continuous ones by a unit of rounding, and the
    integer phase decides whether they suffice."""
    fill = _plain_fill(m, members, float(amount), exact_in)
    if fill.v > 0.0:
        return _allocation(m, members, fill.v), fill.v
    saturated = [(i, m.cap_in[i], m.cap_out[i]) for i in members]
    return saturated, min((m.vmin[i] for i in members), default=0.0)


@dataclass(slots=True)
class _Reach:
    """How far a split looked: the pools the sweep admitted, and the entry point at or above
    which a pool would have been admitted too (below it, a pool cannot change the split).
    `exact` is False when a fallback made the outcome depend on every pool."""

    members: list[int] = field(default_factory=list)
    threshold: float = _INF
    exact: bool = True


def _split(
    m: _Model, amount: int, exact_in: bool, plan: _Plan, max_pools: int, reach: _Reach
) -> tuple[_LegColumns, float] | None:
    """The continuous split made exact; None if the pools cannot fill the order. Fills
    `reach` (see `_Reach`)."""
    if not plan.order:
        reach.exact = False
        return None
    # Past twice the pool cap the cap will cut the set anyway: stop admitting there.
    fill = plan.sweep(m, float(amount), exact_in, 2 * max_pools)
    members = fill.members
    reach.members = list(members)
    if fill.jumped and members:
        # Stopped on admitting the last member (entry points descend): a pool entering at or
        # above its entry point would have come before it.
        reach.threshold = plan.enter_at[members[-1]]
    elif fill.v > 0.0:
        # Every member entered above v; a pool entering below it meets a breakpoint where
        # the members already fill the order, which leaves v as it is.
        reach.threshold = fill.v
    else:
        reach.exact = False
    declined = False  # `_exact_in_by_out` has already declined these members
    if fill.jumped or fill.v <= 0.0:
        alloc, v = _solve(m, members, amount, exact_in)
    elif exact_in and len(members) <= max_pools and m.direction is Direction.BUY:
        # A purchase within the pool cap (the common case): `buy_units` reads the split at v
        # itself, so the allocation is made only if that path declines.
        v = fill.v
        listed = plan.order_array[: len(members)]  # (the members, as an array)
        by_out = _exact_in_by_out(m, members, None, amount, v, listed)
        if by_out is not None:
            return by_out, v
        alloc, declined = _allocation(m, members, v), True
    else:
        alloc, v = _allocation(m, members, fill.v), fill.v
    if len(alloc) > max_pools:
        # Too many pools for one transaction: keep those with the largest surplus.
        rate = v * v
        alloc.sort(key=lambda r: r[2] - rate * r[1], reverse=True)
        members = [i for i, _, _ in alloc[:max_pools]]
        alloc, v = _solve(m, members, amount, exact_in)
        if not exact_in and sum(y for _, _, y in alloc) < amount - len(alloc):
            # The order needs capacity: try the deepest pools instead.
            reach.exact = False
            members = m.by_depth[:max_pools]
            alloc, v = _solve(m, members, amount, exact_in)
    while True:
        if not exact_in:
            outs = _exact_out(m, alloc, amount)
            if outs is None:
                return None
            legs = [(i, m.in_for_out(i, y), y) for i, y in sorted(outs.items())]
            if _worth_polishing(m, legs, v, side_is_input=True):
                legs = _polish_out(m, legs)
            return _leg_columns(legs), v
        by_out = None if declined else _exact_in_by_out(m, members, alloc, amount, v)
        if by_out is not None:
            return by_out, v
        declined = False
        ins = _exact_in(m, alloc, amount)
        if ins is None:
            return None
        legs = [(i, x, m.out_for_in(i, x)) for i, x in sorted(ins.items())]
        barren = {i for i, _, y in legs if y == 0}
        if not barren:
            if _worth_polishing(m, legs, v, side_is_input=False):
                legs = _polish_in(m, legs, amount)
            return _leg_columns(legs), v
        # A pool paid but paying nothing back: re-split without it (the set shrinks each time).
        members = [i for i in members if i not in barren]
        if not members:
            return None
        alloc, v = _solve(m, members, amount, exact_in)
        if _exact_in(m, alloc, amount) is None:
            # The others cannot use it all: the rounding remainder buys nothing anywhere, so
            # it goes to the producing pool where it does best, without an extra leg.
            absorbed = _absorb(m, [leg for leg in legs if leg[2] > 0], amount)
            return None if absorbed is None else (_leg_columns(absorbed), v)


def _single(
    m: _Model, i: int, amount: int, exact_in: bool, cost: Sequence[float], v: float, lenient: bool
) -> _Candidate | None:
    """Pool i alone taking the whole order, if it can."""
    if exact_in:
        if amount > _input_limit(m.pools[i], m.direction):
            return None
        out = m.out_for_in(i, amount)
        if out < 1:
            return None
        if not lenient and amount > m.in_cap(i):
            return None  # the pool would be paid for output it cannot give
        legs: _LegColumns = ((i,), (amount,), (out,))
    else:
        if amount > m.out_cap(i):
            return None
        legs = ((i,), (m.in_for_out(i, amount),), (amount,))
    return _Candidate(legs, _value(m, legs, exact_in, cost, v))


def _single_rate_floor(m: _Model, amount: int, exact_in: bool, need: float) -> float:
    """The least v_max² a pool needs for its exact single-pool trade to reach `need`: output
    ≥ need (exact in) or input ≤ need (exact out); `_INF` if none can. From the contract's
    integer formulas (T, X the pool's reserves, r = v_max²):

    buy, in D sats:      out = ⌊T·D'/(X + D')⌋ ≤ r·D'/γ        (D' = D − ⌊3D/1000⌋)
    sell, in s tokens:   out ≤ φ·⌊X·s/(T + s)⌋ + 999/1003 ≤ r·s + 0.9961
    buy, out y tokens:   in ≥ (⌈X·y/(T − y)⌉ − 1)/γ ≥ y/r − 1/γ
    sell, out y sats:    in ≥ T·y'/X = φ·y'/r                     (y' = y + ⌊3y/1000⌋)

    Each bound grows (output) or shrinks (input) with r, so the pools that can reach `need`
    are a prefix of the model's v_max order. Margins cover float error."""
    lo, hi = 1.0 - 1e-9, 1.0 + 1e-9
    fee = amount * 3 // 1000
    if exact_in:
        if m.direction is Direction.BUY:
            net = amount - fee
            return max(0.0, (need - 1e-9) / hi * GAMMA / net) if net > 0 else _INF
        return max(0.0, ((need - 1e-9) / hi - 0.9961) / amount)
    if need <= 0.0:
        return _INF
    if m.direction is Direction.BUY:
        room = (need + 1e-9) / lo + 1.0031
        return amount / room
    return PHI * (amount + fee) / ((need + 1e-9) / lo)


def _best_single(
    m: _Model,
    amount: int,
    exact_in: bool,
    plan: _Plan,
    v: float,
    floor: float,
    *,
    lenient: bool = False,
) -> _Candidate | None:
    """The best one-pool route if it beats `floor` (the split's value), so a split never
    loses to a single pool through rounding.

    Only pools whose best case can beat the best value so far are tried: outputs and inputs
    are whole units and each pool's value is at most its bound less the cheapest byte cost,
    so the candidates are a short prefix of the pools by v_max (rate bound, re-tightened as
    the best value rises) or by depth (capacity bound), whichever is shorter. Ties keep the
    first pool in that order."""
    n = len(m)
    cost = plan.cost
    out_conv = v * v if m.direction is Direction.BUY else 1.0  # byte sats → output units
    in_conv = 1.0 if m.direction is Direction.BUY else (1.0 / (v * v) if v > 0 else 0.0)
    conv = out_conv if exact_in else in_conv
    mc = plan.min_cost * conv

    def need_of(target: float) -> float:
        """Whole units a pool must reach to beat `target`: out ≥ need (exact in), or paid
        ≤ need (exact out)."""
        if target == -_INF:
            return -_INF if exact_in else _INF
        if exact_in:
            return math.floor(target + mc) + 1.0
        return math.ceil(-target - mc) - 1.0

    need = need_of(floor)
    if exact_in:
        rate_floor = _single_rate_floor(m, amount, True, need) if need > -_INF else 0.0
        depth_floor = need - 1.0 - 1e-9  # out ≤ cap_out + 1
    else:
        rate_floor = _single_rate_floor(m, amount, False, need) if need < _INF else 0.0
        depth_floor = amount - 1.0 - 1e-9  # amount ≤ cap_out + 1
    if rate_floor >= _INF:
        return None
    by_rate = bisect_left(m.neg_vmax, -math.sqrt(rate_floor) * (1.0 - 1e-12))
    by_depth = bisect_left(m.neg_depth, -depth_floor) if depth_floor > -_INF else n
    in_rate_order = by_rate <= by_depth
    # Model (v_max) order either way, so ties go to the same pool whichever prefix is used.
    candidates: Sequence[int] = range(by_rate) if in_rate_order else sorted(m.by_depth[:by_depth])
    best: _Candidate | None = None
    target = floor
    stop = rate_floor
    vmax = m.vmax
    pools = m.pools
    buying = m.direction is Direction.BUY
    x_in = amount + 1.0 / GAMMA + 1e-9 * amount
    g_in = GAMMA * x_in
    if exact_in and in_rate_order and by_rate:
        # One bound for the whole prefix: a pool's `single_bound` is v_max²·x·D/(D + γx)
        # buying (D its sats, x = x_in) or v_max²·s·D/(D + s) selling (D its tokens), which
        # grows with both v_max and D; the best v_max and the prefix's largest D bound them
        # all (1e-9: float error), and every pool costs at least the cheapest pool's bytes.
        deepest = float(m.depth_max()[by_rate - 1])
        if buying:
            top = vmax[0] * vmax[0] * x_in * deepest / (deepest + g_in) * (1 + 1e-9) + 1.0
        else:
            top = vmax[0] * vmax[0] * amount * deepest / (deepest + amount) * (1 + 1e-9) + 2.0
        if top - mc <= target:
            return None
    order = list(candidates)
    scores: list[float] = []
    # Candidates go in chunks: each chunk's upper bounds (`single_bound`, the same
    # expressions, less the pool's byte cost) in one comprehension, the exact trade only for
    # those that can beat the best value so far. Chunks keep an early stop cheap.
    for start in range(0, len(order), 16):
        chunk = order[start : start + 16]
        if exact_in:
            if buying:
                ubs = [
                    p.tokens * GAMMA * x_in / (p.sats + g_in) * (1 + 1e-12) + 1.0
                    for p in [pools[i] for i in chunk]
                ]
            else:
                ubs = [
                    PHI * p.sats * amount / (p.tokens + amount) * (1 + 1e-12) + 2.0
                    for p in [pools[i] for i in chunk]
                ]
            scores = [math.floor(u) - cost[i] * conv for u, i in zip(ubs, chunk, strict=True)]
        for k, i in enumerate(chunk):
            if in_rate_order and vmax[i] * vmax[i] * (1.0 + 1e-9) < stop:
                return best  # sorted by v_max: no later pool can beat the best value so far
            if exact_in:
                if scores[k] <= target:
                    continue
            else:
                bound = m.single_cost_bound(i, amount)
                if bound >= _INF or math.ceil(bound) + cost[i] * conv >= -target:
                    continue
            found = _single(m, i, amount, exact_in, cost, v, lenient)
            if found is not None and found.value > target:
                best = found
                value = found.value
                target = value
                if in_rate_order:
                    stop = _single_rate_floor(m, amount, exact_in, need_of(target))
    return best


@dataclass(frozen=True, slots=True)
class HopFootprint:
    """What one `solve_hop` call's outcome depends on, so a snapshot change can be shown not
    to move it without routing again (`footprint_holds`): the pools the split admitted or
    the route trades, the entry point a pool must reach to join the split, and the route's
    value, which a changed pool trading alone must not reach."""

    token_id: str
    direction: Direction
    amount: int
    exact_in: bool
    fee_per_byte: float
    used: frozenset[tuple[str, int]]
    threshold: float
    value: float
    v: float
    exact: bool  # False: the outcome depends on every pool (a fallback, or an error)


def solve_hop(
    book: PoolBook,
    token_id: str,
    direction: Direction,
    amount: int,
    *,
    exact_in: bool,
    fee_per_byte: float,
    max_pools: int,
    trace: list[HopFootprint] | None = None,
) -> Hop:
    """The best exact route for one token and direction.

    `amount` is the exact input (exact_in) or output; `fee_per_byte` prices each pool's bytes
    (0 for a pure price optimum); at most `max_pools` pools. RouterError(route_failed) if the
    token has no usable pool or the pools cannot fill the order in one transaction. `trace`,
    if given, receives the call's `HopFootprint` (also when it fails).
    """
    reach = _Reach()
    chosen: _Candidate | None = None
    v = 0.0
    m: _Model | None = None
    try:
        if amount < 1:
            raise route_failed("the amount to trade must be at least 1")
        if max_pools < 1:
            raise route_failed("no room for a single pool in one standard transaction")
        m = _model(book, token_id, direction)
        if not len(m):
            raise route_failed(f"no usable pools for token {token_id}", token_id=token_id)
        plan = m.plan(fee_per_byte)
        cost = plan.cost
        split = _split(m, amount, exact_in, plan, max_pools, reach)
        if split is not None:
            legs, v = split
            if exact_in:
                legs = _best_unit_counts(m, _exchange_in(m, legs), amount)
            chosen = _Candidate(legs, _value(m, legs, exact_in, cost, v))
        else:
            reach.exact = False
            v = m.vmax[0]
        single = _best_single(m, amount, exact_in, plan, v, chosen.value if chosen else -_INF)
        if single is not None:
            chosen = single
        if chosen is None and exact_in:
            reach.exact = False
            usable = sum(m.in_cap(i) for i in range(len(m)))
            if amount <= usable:
                # Within what the pools can use, but only by leaving a rounding remainder
                # that buys nothing: let one pool take all of it.
                chosen = _best_single(m, amount, exact_in, plan, v, -_INF, lenient=True)
        if chosen is None:
            raise _cannot_fill(m, token_id, direction, amount, exact_in, max_pools)
        return m.hop(token_id, chosen.legs)
    finally:
        if trace is not None:
            used: set[tuple[str, int]] = set()
            if m is not None:
                used.update(m.pools[i].key for i in reach.members)
                if chosen is not None:
                    used.update(m.pools[i].key for i in chosen.legs[0])
            trace.append(
                HopFootprint(
                    token_id,
                    direction,
                    amount,
                    exact_in,
                    fee_per_byte,
                    frozenset(used),
                    reach.threshold,
                    chosen.value if chosen is not None else -_INF,
                    v,
                    reach.exact and chosen is not None,
                )
            )


def _cannot_fill(
    m: _Model, token_id: str, direction: Direction, amount: int, exact_in: bool, max_pools: int
) -> Exception:
    unit = "sats" if (direction is Direction.BUY) == exact_in else "tokens"
    if exact_in:
        usable = sum(m.in_cap(i) for i in range(len(m)))
        if amount <= usable:
            return route_failed(
                f"{amount} {unit} is too little to buy one base unit from any pool of {token_id}",
                token_id=token_id,
            )
        return route_failed(
            f"the pools of {token_id} can use at most {usable} {unit}; more would pay them "
            "for nothing",
            token_id=token_id,
            max_amount=str(usable),
        )
    deepest = m.by_depth[:max_pools]
    capacity = sum(m.out_cap(i) for i in deepest)
    if len(m) > max_pools and capacity < amount:
        return route_failed(
            f"the order needs more than {max_pools} pools, the most one standard transaction "
            f"(100,000 bytes) can hold; those pools can deliver at most {capacity} {unit}",
            token_id=token_id,
            max_pools=max_pools,
            max_amount=str(capacity),
        )
    return route_failed(
        f"not enough liquidity: the pools of {token_id} can deliver at most {capacity} {unit}",
        token_id=token_id,
        max_amount=str(capacity),
    )
