"""Exact integer amounts for a continuous split: whole units per pool, the remainder to the best
marginal rate, the polish, and the exchange between a few legs.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable, Sequence, Sized
from operator import itemgetter

from protocols.cauldron.formulas import (
    LP_FEE_DEN,
)
from router.hop import Direction
from router.kernels import buy_cheapest_units
from router.solve.continuous import _allocation
from router.solve.model import (
    _KEEP,
    IntArray,
    _input_limit,
    _LegColumns,
    _Model,
    _unit_key,
    _Units,
)

_first, _second, _third = itemgetter(0), itemgetter(1), itemgetter(2)


def _leg_columns(legs: Sequence[tuple[int, int, int]]) -> _LegColumns:
    """(pool, in, out) rows as `_LegColumns`."""
    return (list(map(_first, legs)), list(map(_second, legs)), list(map(_third, legs)))


# --- exact integer amounts -------------------------------------------------------------------


def _floors(weights: dict[int, int], amount: int, caps: dict[int, int]) -> dict[int, int]:
    """The continuous split's integer parts; scaled down (integer arithmetic) only if float
    error made them add up to more than `amount`."""
    total = sum(weights.values())
    if total <= amount:
        return dict(weights)
    return {i: min(w * amount // total, caps[i]) for i, w in weights.items()}


def _distribute(
    amounts: dict[int, int],
    caps: dict[int, int],
    rest: int,
    rate: Callable[[int, int], float],
    exact_cap: Callable[[int], int] | None = None,
    provisional: set[int] | None = None,
) -> int:
    """Give the `rest` units to the pools with the best marginal `rate(i, amount)`, one at a
    time (in bulk only if float drift left more units than pools). A pool reaching a
    `provisional` cap gets its exact one. Returns what is left (0 unless every pool is full)."""
    pending = provisional if provisional is not None else set()
    heap = [(-rate(i, x), i) for i, x in amounts.items() if x < caps[i] or i in pending]
    heapq.heapify(heap)
    while rest > 0 and heap:
        _, i = heapq.heappop(heap)
        if amounts[i] >= caps[i]:
            if i not in pending or exact_cap is None:
                continue
            pending.discard(i)
            caps[i] = exact_cap(i)
            if amounts[i] >= caps[i]:
                continue
        room = caps[i] - amounts[i]
        step = 1 if rest <= len(heap) + 1 else max(1, min(room, rest // (len(heap) + 1)))
        amounts[i] += step
        rest -= step
        if amounts[i] < caps[i] or i in pending:
            heapq.heappush(heap, (-rate(i, amounts[i]), i))
    return rest


def _exact_in(
    m: _Model, alloc: Sequence[tuple[int, float, float]], amount: int
) -> dict[int, int] | None:
    """Integer inputs summing to `amount`: each pool's integer part of the continuous split,
    the remaining units to the best marginal rate. None if the pools cannot absorb it."""
    # The exact cap costs a formula call: pools far below their continuous cap get a
    # provisional one, replaced by the exact one only if the remainder reaches it.
    slack = 2 * len(alloc) + 4
    caps: dict[int, int] = {}
    provisional: set[int] = set()
    for i, x, _ in alloc:
        if x * (1 + 1e-9) + 2 * slack >= m.cap_in[i] * (1 - 1e-9):
            caps[i] = m.in_cap(i)
        else:
            caps[i] = int(x * (1 + 1e-9)) + slack
            provisional.add(i)
    weights = {i: min(int(x), caps[i]) for i, x, _ in alloc if x >= 1.0}
    if not weights:
        return None
    amounts = _floors(weights, amount, caps)
    rest = amount - sum(amounts.values())
    rest = _distribute(amounts, caps, rest, m.rate_at_in, m.in_cap, provisional)
    if rest:
        return None
    return {i: x for i, x in amounts.items() if x > 0}


def _exact_out(
    m: _Model, alloc: Sequence[tuple[int, float, float]], amount: int
) -> dict[int, int] | None:
    """Integer outputs summing to `amount` (same scheme; the extra units go to the pools
    whose next unit is cheapest). None if the pools cannot deliver it."""
    caps = {i: m.out_cap(i) for i, _, _ in alloc}
    weights = {i: min(int(y), caps[i]) for i, _, y in alloc}
    amounts = _floors(weights, amount, caps)
    rest = _distribute(amounts, caps, amount - sum(amounts.values()), m.rate_at_out)
    if rest:
        return None
    return {i: y for i, y in amounts.items() if y > 0}


def _worth_polishing(m: _Model, legs: Sized, v: float, side_is_input: bool) -> bool:
    """Polishing saves at most one base unit per leg: do it when legs are few or that unit is
    worth at least a sat (tokens dearer than a sat). `side_is_input`: the unit saved is an
    input unit (exact out) rather than an output unit (exact in)."""
    if len(legs) <= 32:
        return True
    rate = v * v  # output per input at the margin
    token_is_input = m.direction is Direction.SELL
    if side_is_input:
        return token_is_input and rate >= 1.0  # a token costs ≥ 1 sat
    return not token_is_input and rate <= 1.0  # a token is worth ≥ 1 sat


def _polish_out(m: _Model, legs: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Exact out: each pool's input is rounded up on its own, so pools usually pay for a
    little more output than they deliver (slack). Move output into the others' slack whenever
    that lets one pool take one input unit less."""
    pay = {i: x for i, x, _ in legs}
    get = {i: y for i, _, y in legs}
    slack = {i: m.out_for_in(i, x) - get[i] for i, x in pay.items()}
    total = sum(slack.values())
    for _ in range(4):
        improved = False
        for j in sorted(pay, key=pay.__getitem__, reverse=True):
            less = pay[j] - 1
            kept = m.out_for_in(j, less) if less > 0 else 0
            deficit = get[j] - kept
            if deficit <= 0 or deficit > total - slack[j]:
                continue
            total -= slack[j]
            pay[j], get[j], slack[j] = less, kept, 0
            for i in sorted(slack, key=slack.__getitem__, reverse=True):
                if deficit == 0:
                    break
                if i == j or slack[i] == 0:
                    continue
                take = min(slack[i], deficit)
                get[i] += take
                slack[i] -= take
                total -= take
                deficit -= take
            improved = True
        if not improved:
            break
    return [(i, m.in_for_out(i, y), y) for i, y in sorted(get.items()) if y > 0]


def _polish_in(
    m: _Model, legs: list[tuple[int, int, int]], amount: int
) -> list[tuple[int, int, int]]:
    """Exact in: each pool's output is rounded down on its own, leaving input that buys no
    whole unit. Pool those remainders and buy whole units where the next one is cheapest; what
    is still left stays with the largest leg that can hold it (exact in spends exactly
    `amount`). `legs` in pool order."""
    index = [i for i, _, _ in legs]
    get = [y for _, _, y in legs]
    pay = list(map(m.in_for_out, index, get))
    heap = _next_unit_heap(m, index, get, pay)
    spare = _buy_cheapest_units(m, _Units(index, get, pay, heap), amount - sum(pay))
    if not _place_rest(m, index, pay, get, spare):
        return legs  # it cannot be spent exactly within the limits: the legs as they came
    return list(zip(index, pay, get, strict=True))


def _next_unit_heap(m: _Model, index: list[int], get: list[int], pay: list[int]) -> list[int]:
    """The polish heap of legs by position (`_Units`): each leg's next unit's cost, for the
    legs that can take one more."""
    in_for_out, caps = m.in_for_out, m.out_limit
    heap = [
        _unit_key(in_for_out(i, y + 1) - paid, p)
        for p, (i, y, paid) in enumerate(zip(index, get, pay, strict=True))
        if y < caps[i]
    ]
    heapq.heapify(heap)
    return heap


def _buy_cheapest_units(m: _Model, units: _Units, spare: int) -> int:
    """Exact in: while the spare input covers it, buy the whole output unit that costs least
    (`units.heap`), updating `units.get` and `units.pay`; returns the spare left. A compiled
    loop (`router.kernels`), with a buying model's purchase arithmetic inline (a 350-leg
    order buys ~170 units here)."""
    index, get, pay, heap = units
    if m.direction is Direction.BUY:
        _, k_less, sats, t_ok, room = m.purchase_columns()
        return buy_cheapest_units(
            heap,
            index,
            get,
            pay,
            spare,
            m.out_limit,
            m.in_for_out,
            (k_less, sats, t_ok, room),
            LP_FEE_DEN,
            _KEEP,
        )
    return buy_cheapest_units(heap, index, get, pay, spare, m.out_limit, m.in_for_out)


def _place_rest(
    m: _Model,
    index: list[int],
    pay: list[int],
    get: list[int],
    spare: int,
    members: Sequence[int] | None = None,
) -> bool:
    """Exact in: the input no whole unit could use goes to the largest leg (its output made
    again for it), or as far as the pools' input limits allow, to the next ones (near 2^63−1
    tokens the largest may not hold it all). False if the limits leave some of it over.

    Legs paying the same go in `members` order (the split's order of the pools), or, without
    it, in their own."""
    if not pay:
        return not spare
    limit = _input_limit
    pools, direction, out_for_in = m.pools, m.direction, m.out_for_in
    # The largest leg usually holds it all: the sort only when it cannot.
    first = _largest(index, pay, members)
    take = min(spare, max(0, limit(pools[index[first]], direction) - pay[first]))
    if take == spare:
        pay[first] += take
        get[first] = out_for_in(index[first], pay[first])
        return True
    rank = range(len(pay)) if members is None else _ranks(index, members)
    for n, p in enumerate(sorted(range(len(pay)), key=lambda p: (-pay[p], rank[p]))):
        take = min(spare, max(0, limit(pools[index[p]], direction) - pay[p]))
        if take or n == 0:
            pay[p] += take
            get[p] = out_for_in(index[p], pay[p])
            spare -= take
        if not spare:
            return True
    return not spare


def _largest(index: list[int], pay: list[int], members: Sequence[int] | None) -> int:
    """The position of the largest payment, the first in `members` order (or in position
    order, without it) when several pay as much."""
    top = max(pay)
    first = pay.index(top)
    if members is None or pay.count(top) == 1:
        return first
    rank = _ranks(index, members)
    return min((p for p in range(first, len(pay)) if pay[p] == top), key=rank.__getitem__)


def _ranks(index: list[int], members: Sequence[int]) -> list[int]:
    """Each position's place in `members`."""
    place = {i: n for n, i in enumerate(members)}
    return [place[i] for i in index]


def _give_back(m: _Model, units: _Units, spare: int) -> tuple[_Units, int]:
    """Exact in, when the whole units cost more than the input (`spare` < 0; the contract
    rounds inputs up): give back the dearest units until it fits. The legs left, with an
    empty heap (the next costs moved)."""
    index, get, pay, _ = units
    in_for_out = m.in_for_out

    def saving(p: int) -> int:
        y = get[p]
        return in_for_out(index[p], y - 1) - pay[p] if y > 1 else -pay[p]

    back = [(saving(p), p) for p in range(len(index))]
    heapq.heapify(back)
    while spare < 0 and back:
        less, p = heapq.heappop(back)
        spare -= less
        pay[p] += less
        get[p] -= 1
        if get[p]:
            heapq.heappush(back, (saving(p), p))
    kept = [p for p in range(len(index)) if get[p]]
    left = _Units([index[p] for p in kept], [get[p] for p in kept], [pay[p] for p in kept], [])
    return left, spare


def _exact_in_by_out(
    m: _Model,
    members: Sequence[int],
    alloc: Sequence[tuple[int, float, float]] | None,
    amount: int,
    v: float,
    member_array: IntArray | None = None,
) -> _LegColumns | None:
    """Exact in, when the legs are worth polishing: straight from the continuous split's
    outputs to whole units. Each pool gets the integer part of its continuous output and pays
    the least input the contract takes for it; the input left over (rounding, float error,
    pools whose share buys no whole unit) buys whole units where the next one is cheapest,
    and what is still left stays with the largest leg (exact in spends exactly `amount`). A
    unit-by-unit input distribution first (`_exact_in`) would be undone by that polish anyway.

    None (the caller takes the input-first path) when the legs are not worth polishing, when
    every pool is full with input left, or when a formula refuses an amount near a limit.
    `member_array`: `members` as an array, when the caller has one."""
    if v * v > 1.0:
        return None
    caps = m.out_limit
    if m.direction is Direction.BUY:
        # Always worth polishing here (a token is worth ≥ 1 sat at v² ≤ 1): the whole
        # units, their costs and the polish heap in one pass.
        try:
            units = m.buy_units(members if member_array is None else member_array, v)
        except ValueError:
            return None
    else:
        if alloc is None:
            alloc = _allocation(m, members, v)
        whole = sorted((i, min(int(y), caps[i])) for i, _, y in alloc)
        index = [i for i, y in whole if y >= 1]
        get = [y for _, y in whole if y >= 1]
        if not get or not _worth_polishing(m, get, v, side_is_input=False):
            return None
        try:
            costs = m.unit_costs([(i, y, caps[i]) for i, y in zip(index, get, strict=True)])
        except ValueError:
            return None
        pay = [now for now, _ in costs]
        heap = [_unit_key(step, p) for p, (_, step) in enumerate(costs) if step >= 0]
        heapq.heapify(heap)
        units = _Units(index, get, pay, heap)
    if not units.indices:
        return None
    try:
        spare = amount - sum(units.pay)
        if spare < 0:
            units, spare = _give_back(m, units, spare)
            index, get, pay, _ = units
            if not index:
                return None
            units = units._replace(heap=_next_unit_heap(m, index, get, pay))
        spare = _buy_cheapest_units(m, units, spare)
    except ValueError:
        return None
    index, get, pay, heap = units
    if spare and not heap:
        return None  # every pool is full: the input-first path tells what the pools can use
    if not _place_rest(m, index, pay, get, spare, members):
        return None  # it cannot be spent exactly within the limits: the input-first path
    return index, pay, get


# Exact in over a few legs: rounding makes each pool's output a step function of its input,
# not a concave one, so cheapest-unit-first can leave a unit on the table. Any other split of
# the same legs differs by moves of input between them, and a better one lies within a few
# units of the greedy one (which is within a unit per pool of the continuous optimum): every
# move of up to `_EXCHANGE_UNITS` between two legs, and for three legs every joint move of up
# to `_EXCHANGE_UNITS_3` each, is tried until none raises the output. Three legs at most: the
# search grows with the square of the legs (the cube, moving three at once).
_EXCHANGE_LEGS = 3
_EXCHANGE_UNITS = 16
_EXCHANGE_UNITS_3 = 8  # per leg, when three legs move at once
_NEAREST_FIRST = sorted(range(-_EXCHANGE_UNITS, _EXCHANGE_UNITS + 1), key=abs)


def _exchange_in(m: _Model, legs: _LegColumns) -> _LegColumns:
    """Exact in: move input between legs while some move of up to `_EXCHANGE_UNITS` units
    from one leg to another strictly raises the total output (the best move first)."""
    pools, pay, get = list(legs[0]), list(legs[1]), list(legs[2])
    n = len(pools)
    if n < 2 or n > _EXCHANGE_LEGS:
        return legs
    out_for_in = m.out_for_in
    while True:
        # gains[a][k]: output leg a gains with k more units; losses[a][k]: it loses with k less
        # (None where the pool cannot take it, or a leg would pay for nothing).
        gains: list[list[int | None]] = []
        losses: list[list[int | None]] = []
        for a in range(n):
            i, x, y = pools[a], pay[a], get[a]
            room = _input_limit(m.pools[i], m.direction) - x
            up: list[int | None] = [0]
            down: list[int | None] = [0]
            for k in range(1, _EXCHANGE_UNITS + 1):
                up.append(out_for_in(i, x + k) - y if k <= room else None)
                if k < x:
                    left = out_for_in(i, x - k)
                    down.append(y - left if left > 0 else None)
                else:
                    down.append(y if k == x else None)
            gains.append(up)
            losses.append(down)
        # change[a][d + K]: leg a's output change for d more units (d < 0: fewer).
        span = _EXCHANGE_UNITS
        change = [
            [None if lost is None else -lost for lost in reversed(losses[a][1:])] + gains[a]
            for a in range(n)
        ]
        best, moves = 0, [0] * n
        for a in range(n):
            for b in range(a + 1, n):
                ca, cb = change[a], change[b]
                for d in _NEAREST_FIRST:  # of equal gains, the smallest move
                    ga, gb = ca[span + d], cb[span - d]
                    if ga is not None and gb is not None and ga + gb > best:
                        best, moves = ga + gb, [0] * n
                        moves[a], moves[b] = d, -d
        if n == 3:
            # Three legs: one may give to (or take from) both others at once.
            c0, c1, c2 = change
            near = _EXCHANGE_UNITS_3
            for d0 in range(-near, near + 1):
                g0 = c0[span + d0]
                if g0 is None:
                    continue
                for d1 in range(max(-near, -near - d0), min(near, near - d0) + 1):
                    g1, g2 = c1[span + d1], c2[span - d0 - d1]
                    if g1 is not None and g2 is not None and g0 + g1 + g2 > best:
                        best, moves = g0 + g1 + g2, [d0, d1, -d0 - d1]
        if not best:
            break
        for a, d in enumerate(moves):
            if d:
                pay[a] += d
                get[a] = out_for_in(pools[a], pay[a]) if pay[a] else 0
    kept = [a for a in range(n) if pay[a] > 0]
    return [pools[a] for a in kept], [pay[a] for a in kept], [get[a] for a in kept]


# Exact in over a few legs, counted in output units rather than input: every count of units
# within `_UNIT_WINDOW` of each leg's (a leg may drop to none), each count bought with the
# least input the contract takes for it, the input left over added to a leg. The cost of a
# count grows with the count, so the last leg's best count for the others' is a bisection.
# Moves of input (`_exchange_in`) miss a better split whose legs differ by several units of a
# cheap token, where one unit costs several input units.
_UNIT_WINDOW = (0, 0, 16, 8)  # by the number of legs


def _best_unit_counts(m: _Model, legs: _LegColumns, amount: int) -> _LegColumns:
    """Exact in, two or three legs: the split of `amount` over the same pools buying the most
    units within `_UNIT_WINDOW` of the legs' counts; `legs` when none buys more."""
    pools, get = list(legs[0]), list(legs[2])
    n = len(pools)
    if n < 2 or n >= len(_UNIT_WINDOW):
        return legs
    window = _UNIT_WINDOW[n]
    unreachable = amount + 1
    lows = [max(0, y - window) for y in get]
    costs: list[list[int]] = []  # costs[a][j]: least input buying lows[a] + j units of leg a
    for i, low, y in zip(pools, lows, get, strict=True):
        limit = min(amount, _input_limit(m.pools[i], m.direction))
        cap = m.out_cap(i)
        row = []
        for units in range(low, y + window + 1):
            if units == 0:
                cost = 0
            elif units > cap:
                cost = unreachable
            else:
                try:
                    cost = m.in_for_out(i, units)
                except ValueError:
                    cost = unreachable
                if cost > limit:
                    cost = unreachable
            row.append(cost)
        costs.append(row)
    # Counts as offsets into the rows; a total is theirs plus `base`.
    base, last = sum(lows), costs[-1]
    most_last = len(last) - 1
    best_total, best = sum(get), None
    middle = costs[1] if n == 3 else [0]
    for j0, c0 in enumerate(costs[0]):
        if c0 > amount:
            break
        for j1, c1 in enumerate(middle):
            if base + j0 + j1 + most_last <= best_total:
                continue  # not even the last leg's most units would do better
            spent = c0 + c1
            if spent > amount:
                break
            j = bisect_right(last, amount - spent) - 1
            if j >= 0 and base + j0 + j1 + j > best_total:
                best_total, best = base + j0 + j1 + j, (j0, j1, j)
    if best is None:
        return legs
    offsets = best if n == 3 else (best[0], best[2])
    counts = [low + k for low, k in zip(lows, offsets, strict=True)]
    pay = [costs[a][counts[a] - lows[a]] for a in range(n)]
    if not _place_rest(m, pools, pay, counts, amount - sum(pay)):
        return legs
    made = [m.out_for_in(i, x) if x else 0 for i, x in zip(pools, pay, strict=True)]
    if sum(made) <= sum(get):  # (cannot happen: more input never buys fewer units)
        return legs
    kept = [a for a in range(n) if pay[a] > 0]
    return [pools[a] for a in kept], [pay[a] for a in kept], [made[a] for a in kept]


def _absorb(
    m: _Model, legs: list[tuple[int, int, int]], amount: int
) -> list[tuple[int, int, int]] | None:
    """Add the input the legs lack to the one leg where it yields the most (possibly nothing,
    past the pool's saturation point)."""
    if not legs:
        return None
    extra = amount - sum(x for _, x, _ in legs)
    best: tuple[int, int, int] | None = None
    best_gain = -1
    for i, x, y in legs:
        if x + extra > _input_limit(m.pools[i], m.direction):
            continue
        gain = m.out_for_in(i, x + extra) - y
        if gain > best_gain:
            best, best_gain = (i, x + extra, y + gain), gain
    if best is None:
        return None
    return sorted([leg if leg[0] != best[0] else best for leg in legs])
