"""Subscription footprints: whether a routed hop provably routes the same on a new snapshot.

A `tx.subscribe` / `route.subscribe` order is routed again only when a snapshot change can
move it; `footprint_holds` decides that from the `HopFootprint` `solve_hop` recorded and the
pools that changed, so most changes cost no routing at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from router.hop import Direction
from router.pools import PoolBook
from router.route import HopFootprint, _single
from router.solve.model import _Model, _model

_INF = math.inf


def _single_may_reach(
    m: _Model, i: int, fp: HopFootprint, cost: Sequence[float], floor: float
) -> bool:
    """False when pool i alone provably stays below `floor` for the hop's order: its whole
    units of output are at most ⌊`single_bound`⌋ (exact in), its input at least
    ⌈`single_cost_bound`⌉ (exact out), and the byte cost is converted as `_value` does; so
    `footprint_holds` skips the exact trade for pools far off the route's value."""
    rate = fp.v * fp.v
    if fp.exact_in:
        conv = rate if m.direction is Direction.BUY else 1.0
        return math.floor(m.single_bound(i, fp.amount)) - cost[i] * conv >= floor
    bound = m.single_cost_bound(i, fp.amount)
    if bound >= _INF:
        return False
    conv = 1.0 if m.direction is Direction.BUY else (1.0 / rate if rate > 0 else 0.0)
    return -(math.ceil(bound) + cost[i] * conv) >= floor


def footprint_holds(
    fp: HopFootprint, old: PoolBook, new: PoolBook, changed: Iterable[tuple[str, int]]
) -> bool:
    """True when the hop `fp` records (routed on `old`) provably routes the same on `new`,
    whose pools of `fp.token_id` differ from `old`'s only in the outpoints `changed`.

    Sufficient, not necessary: no changed pool was admitted by the split or traded by the
    route; none enters (before or after the change) at or above the split's threshold, so
    the sweep meets the same breakpoints in the same order (model order among the others is
    unchanged: a stable sort); and none, as changed, alone reaches the route's value (the
    best-single check could pick it, ties included). Everything else the hop does depends on
    the admitted pools only."""
    if not fp.exact:
        return False
    keys = list(changed)
    if not keys:
        return True
    if any(k in fp.used for k in keys):
        return False
    margin = 1e-9 * max(1.0, abs(fp.value))
    for book, is_new in ((old, False), (new, True)):
        m = _model(book, fp.token_id, fp.direction)
        plan = m.plan(fp.fee_per_byte)
        for key in keys:
            i = m.position(key)
            if i is None:
                continue  # not in the book, or unusable this way: never admitted
            if plan.enter_at[i] > 0.0 and plan.enter_at[i] >= fp.threshold:
                return False
            if is_new and _single_may_reach(m, i, fp, plan.cost, fp.value - margin):
                alone = _single(m, i, fp.amount, fp.exact_in, plan.cost, fp.v, lenient=False)
                if alone is not None and alone.value >= fp.value - margin:
                    return False
    return True
