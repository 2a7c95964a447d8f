"""The continuous split: the sweep down the breakpoints (entry and saturation points), the
recorded sweep table, and the water-fill of a fixed pool set.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from router.hop import Direction

if TYPE_CHECKING:
    from router.solve.model import _Model

_INF = math.inf


# --- the continuous sweep --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    cost: list[float]  # sats of miner fee each pool's bytes cost
    order: list[int]  # pools by descending entry point (only those that ever pay for bytes)
    enter: list[float]  # their entry points, aligned with `order`
    min_cost: float  # the cheapest pool's byte cost: bounds every pool's value from above
    enter_at: list[float]  # every pool's entry point, by model index (≤ 0: never admitted)
    # The sweep of this plan's breakpoints, exact in and exact out (`_SweepTable`), recorded
    # as far as orders have needed it.
    tables: dict[bool, _SweepTable] = field(default_factory=dict, compare=False, repr=False)
    # `order` as an array: a sweep's members are a prefix of it, which a purchase of many
    # pools reads as one (`_Model.buy_units`) without converting the list.
    order_array: npt.NDArray[np.int64] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "order_array", np.array(self.order, dtype=np.int64))

    def sweep(self, m: _Model, target: float, exact_in: bool, limit: int) -> _Fill:
        """The sweep of this plan's breakpoints (`_SweepTable`) for one order."""
        table = self.tables.get(exact_in)
        if table is None:
            table = self.tables.setdefault(
                exact_in, _SweepTable(m, self.order, self.enter, m.by_vmin, exact_in)
            )
        return table.fill(target, limit)


@dataclass(frozen=True, slots=True)
class _Fill:
    v: float  # the common √rate; 0 when the members cannot fill the order
    members: list[int]  # model indices admitted by the sweep
    jumped: bool = False  # the last member's admission overshot the order (see _SweepTable)


# A breakpoint of the sweep (`_steps`): v there, the fill there and the running sums there
# (sum of a, sum of the linear forms' constants, saturated pools' total), the pool admitted
# there (−1: a pool saturates there, or v = 0: the breakpoints have ended) and the fill its
# admission adds at once.
_Step = tuple[float, float, float, float, float, int, float]


def _steps(
    m: _Model,
    order: Sequence[int],
    enter: Sequence[float],
    sat_order: Sequence[int],
    exact_in: bool,
) -> Iterator[_Step]:
    """The sweep's breakpoints from the best rate down, for `_sweep` and `_SweepTable`.

    `enter[j]` is where pool `order[j]` is admitted (descending); `sat_order` lists the
    candidates by descending v_min. The fill of the pools trading on their curves is linear
    in 1/v (exact in) or v (exact out) between breakpoints, so the crossing is solved in
    closed form (`_rate_for`). A pool admitted below its v_max (byte costs) adds a positive
    fill at once, which may jump past an order."""
    a_arr, vmin = m.a, m.vmin
    off = m.b if exact_in else m.c  # per-pool constant of the linear form
    cap = m.cap_in if exact_in else m.cap_out
    sum_a = sum_k = sat_total = 0.0
    state = [0] * len(m)  # 1: trading on its curve, 2: saturated at its cap
    ei = si = 0
    n_e, n_s = len(order), len(sat_order)
    while True:
        ve = enter[ei] if ei < n_e else 0.0
        vs = vmin[sat_order[si]] if si < n_s else 0.0
        if vs > ve and state[sat_order[si]] != 1:
            si += 1  # saturates before it is admitted (it will enter saturated) or never enters
            continue
        v_next = ve if ve >= vs else vs
        if exact_in:
            if v_next > 0.0:
                fill = sum_a / v_next - sum_k + sat_total
            else:
                fill = _INF if sum_a > 0.0 else sat_total
        else:
            fill = sum_k - sum_a * v_next + sat_total
        if v_next <= 0.0:
            yield v_next, fill, sum_a, sum_k, sat_total, -1, 0.0
            return
        # Each step is reported before it changes the sums (a consumer may stop there).
        if ve >= vs:
            i = order[ei]
            ei += 1
            if ve > vmin[i]:
                gained = (a_arr[i] / ve - off[i]) if exact_in else (off[i] - a_arr[i] * ve)
                yield v_next, fill, sum_a, sum_k, sat_total, i, gained
                state[i] = 1
                sum_a += a_arr[i]
                sum_k += off[i]
            else:
                yield v_next, fill, sum_a, sum_k, sat_total, i, cap[i]
                state[i] = 2
                sat_total += cap[i]
        else:
            yield v_next, fill, sum_a, sum_k, sat_total, -1, 0.0
            i = sat_order[si]
            si += 1
            state[i] = 2
            sum_a -= a_arr[i]
            sum_k -= off[i]
            sat_total += cap[i]


def _rate_for(target: float, sum_a: float, sum_k: float, sat_total: float, exact_in: bool) -> float:
    """The √rate at which pools with those running sums fill exactly `target`."""
    if exact_in:
        return sum_a / (target + sum_k - sat_total)
    return (sum_k + sat_total - target) / sum_a


def _sweep(
    m: _Model,
    order: Sequence[int],
    enter: Sequence[float],
    sat_order: Sequence[int],
    target: float,
    exact_in: bool,
    limit: int | None = None,
) -> _Fill:
    """Walk the breakpoints (`_steps`) until the pools admitted so far fill `target`. If an
    admission jumps past the order the sweep stops with `jumped` and the caller re-solves
    that set. It also stops, unsolved (v = 0), before admitting more than `limit` pools."""
    members: list[int] = []
    most = len(order) if limit is None else limit
    for v_next, fill, sum_a, sum_k, sat_total, i, gained in _steps(
        m, order, enter, sat_order, exact_in
    ):
        if fill >= target and sum_a > 0.0:
            v = _rate_for(target, sum_a, sum_k, sat_total, exact_in)
            return _Fill(max(v, v_next), members)
        if i >= 0:
            if len(members) >= most:
                break
            members.append(i)
            if gained > 0.0 and fill + gained >= target:
                return _Fill(0.0, members, jumped=True)
    return _Fill(0.0, members)  # the pool limit, or every admitted pool saturated


class _SweepTable:
    """The sweep down one breakpoint sequence (`_steps`), recorded once for every order on it.

    It stops where `_sweep` would: at the first breakpoint where the order is filled
    (`v` there), on an admission that jumps past the order (`jumped`: the caller re-solves
    that set), and, unsolved (v = 0), once more than `limit` pools are admitted or the
    breakpoints end.

    The walk (which pools are admitted or saturate, in which order, and the running sums)
    depends on the model and the plan only, not on the order's amount; the amount only
    decides where it stops. So the walk is recorded at each breakpoint it checks (the sums,
    the fill there, and for an admission the fill just after it), extended lazily as far as
    orders need it, and an order finds its stop by bisection on the running maximum of those
    fills (the first breakpoint reaching the target; a running maximum, so float rounding
    cannot make it differ from the walk's first). Members are a prefix of `order`. The
    result is `_sweep`'s (`tests/router/test_sweep_table.py`)."""

    __slots__ = (
        "_admitted",
        "_done",
        "_exact_in",
        "_fills",
        "_lock",
        "_order",
        "_steps",
        "_sums",
        "_top",
        "_v_next",
    )

    def __init__(
        self,
        m: _Model,
        order: list[int],
        enter: Sequence[float],
        sat_order: Sequence[int],
        exact_in: bool,
    ) -> None:
        self._order = order
        self._exact_in = exact_in
        self._steps = _steps(m, order, enter, sat_order, exact_in)
        self._done = False
        # Per breakpoint checked: the fill there, (sum_a, sum_k, sat_total), v_next, members
        # so far; `_top`: running maximum of the fill (when it can stop there) and of the fill
        # after an admission; `_admitted[n]`: the breakpoint admitting the (n+1)-th member.
        self._fills: list[float] = []
        self._sums: list[tuple[float, float, float]] = []
        self._v_next: list[float] = []
        self._top: list[float] = []
        self._admitted: list[int] = []
        self._lock = threading.Lock()

    def fill(self, target: float, limit: int) -> _Fill:
        top, admitted = self._top, self._admitted
        if not (self._done or (top and top[-1] >= target) or len(admitted) > limit):
            with self._lock:
                self._extend(target, limit)
        j = bisect_left(top, target)  # the first breakpoint where the order can stop
        hard = len(top)  # where the walk stops whatever the target: the pool limit, or the end
        if limit < len(admitted):
            hard = admitted[limit]
        elif self._done:
            hard = len(top) - 1
        if j <= hard:
            fill = self._fills[j]
            sum_a, sum_k, sat_total = self._sums[j]
            if fill >= target and sum_a > 0.0:
                v = _rate_for(target, sum_a, sum_k, sat_total, self._exact_in)
                return _Fill(max(v, self._v_next[j]), self._order[: self._member_count(j)])
            if j < hard:  # the admission there overshoots the order
                return _Fill(0.0, self._order[: self._member_count(j) + 1], jumped=True)
        return _Fill(0.0, self._order[: self._member_count(hard)])

    def _member_count(self, j: int) -> int:
        """Members admitted before breakpoint j."""
        return bisect_left(self._admitted, j)

    def _extend(self, target: float, limit: int) -> None:
        """Walk on until a recorded fill reaches `target`, more than `limit` pools are
        admitted, or the breakpoints end."""
        steps = self._steps
        fills, sums, v_nexts, top, admitted = (
            self._fills,
            self._sums,
            self._v_next,
            self._top,
            self._admitted,
        )
        high = top[-1] if top else -_INF
        done = self._done
        while not done and high < target and len(admitted) <= limit:
            v_next, fill, sum_a, sum_k, sat_total, i, gained = next(steps)
            fills.append(fill)
            sums.append((sum_a, sum_k, sat_total))
            v_nexts.append(v_next)
            if sum_a > 0.0 and fill > high:
                high = fill
            if v_next <= 0.0:
                done = True
            elif i >= 0:
                admitted.append(len(fills) - 1)
                if gained > 0.0 and fill + gained > high:
                    high = fill + gained
            top.append(high)
        self._done = done  # after the last breakpoint's records (`fill` reads them unlocked)


def _plain_fill(m: _Model, members: Iterable[int], target: float, exact_in: bool) -> _Fill:
    """Water-fill exactly this set of pools (no byte costs: each trades from its v_max)."""
    order = sorted(members)  # model order is v_max order
    sat_order = sorted(order, key=m.vmin.__getitem__, reverse=True)
    return _sweep(m, order, [m.vmax[i] for i in order], sat_order, target, exact_in)


def _allocation(m: _Model, members: Iterable[int], v: float) -> list[tuple[int, float, float]]:
    """(pool, in, out) at the common √rate v, for the pools that trade at all."""
    out: list[tuple[int, float, float]] = []
    add = out.append
    vmax, vmin, a_, b_, c_ = m.vmax, m.vmin, m.a, m.b, m.c
    for i in members:
        if v >= vmax[i]:
            continue
        if v <= vmin[i]:
            add((i, m.cap_in[i], m.cap_out[i]))
        else:
            a = a_[i]
            add((i, a / v - b_[i], c_[i] - a * v))
    return out


def _entry_points(m: _Model, pool_cost: Sequence[float]) -> list[float]:
    """Where each pool's surplus over the margin pays for its bytes (cost in sats).

    Buying: surplus b·(v_max − v)² tokens against cost·v² tokens → v ≤ v_max / (1 + √(cost/b)).
    Selling: surplus T·(v_max − v)² sats against cost sats → v ≤ v_max − √(cost/T).
    """
    if m.direction is Direction.BUY:
        return [
            vm / (1.0 + math.sqrt(c / b)) for vm, c, b in zip(m.vmax, pool_cost, m.b, strict=True)
        ]
    return [vm - math.sqrt(c / b) for vm, c, b in zip(m.vmax, pool_cost, m.b, strict=True)]
