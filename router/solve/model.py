"""The per-token model: a token's usable pools in one direction, sorted by the rate at which
they start to trade, with the contract's exact per-pool arithmetic inline.
"""

from __future__ import annotations

import heapq
import math
from bisect import insort
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from bch.token import MAX_TOKEN_AMOUNT
from bch.tx import MAX_SATS
from protocols.cauldron.formulas import (
    LP_FEE_DEN,
    LP_FEE_NUM,
    buy_tokens_exact_in,
    buy_tokens_exact_out,
    sell_tokens_exact_in,
    sell_tokens_exact_out,
)
from router.hop import _TRADE_BY_WIDTH, _WIDTH_STEPS, Direction, Hop
from router.kernels import KEY_SHIFT, count_above, legs_after
from router.pools import (
    Pool,
    PoolBook,
    buy_out_cap,
    pool_reserve,
    pool_sell_cap,
    sell_input_limit,
)
from router.solve.continuous import _entry_points, _Plan

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

GAMMA = 997 / 1000
_KEEP = LP_FEE_DEN - LP_FEE_NUM  # of every 1,000 sats paid in, what the pool keeps
PHI = 1000 / 1003
_INF = math.inf


# A solution's legs as columns: model indices (ascending), inputs, outputs.
_LegColumns = tuple[Sequence[int], Sequence[int], Sequence[int]]


# --- the per-token model ---------------------------------------------------------------------


# v_max, a, b, c, v_min, the pool, and the most output one trade may take from it (the reserve
# rules: `pools.buy_out_cap`, `pools.sell_out_cap`).
_Row = tuple[float, float, float, float, float, Pool, int]


def _row(pool: Pool, direction: Direction) -> _Row | None:
    """A pool's closed-form coefficients in one direction (None: unusable that way)."""
    x, t = pool.sats, pool.tokens
    k = x * t
    if direction is Direction.BUY:
        if t < 2 or x >= MAX_SATS:
            return None  # must keep one token / cannot take more sats
        cap = buy_out_cap(x, t)
        if cap < 1:
            return None
        a = math.sqrt(k / GAMMA)
        b = x / GAMMA
        c = float(t)
        vmax = math.sqrt(GAMMA * t / x)
        vmin = max(1.0 / a, a / (MAX_SATS - x + b))
    else:
        cap = pool_sell_cap(x, t)
        if cap < 1 or t >= MAX_TOKEN_AMOUNT:
            return None
        a = math.sqrt(PHI * k)
        b = float(t)
        c = PHI * x
        vmax = math.sqrt(PHI * x / t)
        # Where the reserve binds: the continuous payout c − a·v reaches the cap.
        vmin = max((c - cap) / a, a / MAX_TOKEN_AMOUNT)
    if not vmin < vmax:
        return None
    return (vmax, a, b, c, vmin, pool, cap)


def _row_rank(row: _Row) -> tuple[float, tuple[str, int]]:
    """A row's place in a model: v_max descending, then the outpoint (the book's order)."""
    return (-row[0], row[5].key)


# Per pool of a buying model, what `_Model.buy_units` reads: the purchase cap (`_Model.out_limit`),
# k − 1 (k = sats · tokens), the sats, the tokens (0 when the pool holds no sats, so the inline
# arithmetic never applies to it), and MAX_SATS − sats (the most a purchase may pay).
_PurchaseColumns = tuple[list[int], list[int], list[int], list[int], list[int]]


def _purchase_columns(pools: Sequence[Pool], caps: list[int]) -> _PurchaseColumns:
    return (
        caps,
        [pool.sats * pool.tokens - 1 for pool in pools],
        [pool.sats for pool in pools],
        [pool.tokens if pool.sats >= 1 else 0 for pool in pools],
        [MAX_SATS - pool.sats for pool in pools],
    )


class _Units(NamedTuple):
    """Whole output units bought from a few pools, as columns by *position*: the pools' model
    indices (ascending), each pool's units (`get`) and what it pays for them (`pay`), and the
    polish heap's entries for the pools that can take one more unit (`heap`, in heap order:
    `_unit_key(next unit's cost, position)`; positions ascend with the model indices, so the
    heap orders as it would by pool)."""

    indices: list[int]
    get: list[int]
    pay: list[int]
    heap: list[int]


# The polish heaps' entries: (next unit's cost, pool) as one integer, `cost << KEY_SHIFT |
# pool` (`router.kernels`, whose loop pops them), which orders as the pair does (pools are
# model indices, < 2^32; a cost may be any integer) and compares without a tuple (the heap
# sifts ~170 units of a 350-leg order).
def _unit_key(cost: int, i: int) -> int:
    return cost << KEY_SHIFT | i


# `buy_units` reads the members' columns through numpy from this many members on (below it
# the arrays' fixed cost exceeds the Python loop's: scripts/bench_router.py's 100- and
# 350-pool orders).
_ARRAY_MEMBERS = 160
# Below this the inline purchase arithmetic stays within int64: (k − 1) // d − x < 2^53, and
# 1000 times that < 2^63.
_NARROW = 1 << 53
_ZERO, _ONE, _TWO, _DEN, _KEEP_64 = (np.int64(n) for n in (0, 1, 2, LP_FEE_DEN, _KEEP))
_SHIFT_64 = np.int64(KEY_SHIFT)
_STEP_LIMIT = 1 << 30  # a heap key `step << 32 | pool` stays within int64 below it
# Subtracted from the divisor t − y: the sats missing for y units and for y + 1 at once.
_THIS_AND_NEXT = np.array([[0], [1]], dtype=np.int64)


class _PurchaseArrays(NamedTuple):
    """A buying model's columns as numpy arrays, a row per pool by model index
    (`_Model.purchase_arrays`), so one gather reads a few pools' rows."""

    vmax: FloatArray
    floats: FloatArray  # v_min, a, c, cap_out
    ints: IntArray  # `_PurchaseColumns`


def _purchase_arrays(m: _Model) -> _PurchaseArrays | None:
    columns = m.purchase_columns()
    _, k_less, _, t_ok, _ = columns
    if max(k_less, default=0) >= _NARROW or max(t_ok, default=0) >= _NARROW:
        return None
    return _PurchaseArrays(
        np.array(m.vmax, dtype=np.float64),
        np.array([m.vmin, m.a, m.c, m.cap_out], dtype=np.float64).T.copy(),
        np.array(columns, dtype=np.int64).T.copy(),
    )


def _purchases_arrays(
    arrays: _PurchaseArrays, members: Sequence[int] | IntArray, v: float
) -> tuple[_Units, list[int]]:
    """`_Model.buy_units` of the members read as arrays: the units, and the payments and the
    polish heap's entries the inline arithmetic answers; the positions of the others, left to
    the formulas (their `pay` holds a placeholder).

    The inline arithmetic is `in_for_out`'s purchase with k − 1 made once per pool: the sats
    missing, ⌈k/(t − y)⌉ − x, are (k − 1) // (t − y) + 1 − x, ≥ 1 as y ≥ 1, so the cost is
    ⌊1000·(missing − 1) / 997⌋ + 1. The same IEEE operations as the Python expressions of
    `_allocation`, so the same floats."""
    rate = np.float64(v)  # (numpy scalars: a Python one costs a conversion per operation)
    # (numpy's methods where its functions are Python wrappers around them: one call less)
    idx = np.array(members, np.int64)  # a copy, sorted in place
    idx.sort()
    idx = idx[rate < arrays.vmax[idx]]  # trading at this rate
    vmin, a, c, cap_out = arrays.floats.take(idx, axis=0).T
    cap, k1, x, t, room = arrays.ints.take(idx, axis=0).T
    out = np.where(rate <= vmin, cap_out, c - a * rate)
    y = np.minimum(out.astype(np.int64), cap)  # ⌊out⌋ for out ≥ 0 (< 2^53 here)
    whole = y >= _ONE
    inline = whole & (y < cap) & (y + _ONE < t)
    d = np.where(inline, t - y, _TWO)  # (any divisor ≥ 2 where the result is not read)
    now, more = (k1 // (d - _THIS_AND_NEXT) - x) * _DEN // _KEEP_64 + _ONE
    fast = (inline & (more <= room))[whole]
    idx, y, step = idx[whole], y[whole], (more - now)[whole]
    now = now[whole]
    queued = fast & (step >= _ZERO)
    positions = queued.nonzero()[0]
    steps = step[queued]
    # (`np.maximum.reduce`: `ndarray.max` calls it through a Python function)
    if steps.size and np.maximum.reduce(steps) >= _STEP_LIMIT:  # a key past 63 bits
        pairs = zip(steps.tolist(), positions.tolist(), strict=True)
        heap = sorted([s << KEY_SHIFT | p for s, p in pairs])
    else:
        keys = (steps << _SHIFT_64) | positions
        keys.sort()  # (sorted: a heap)
        heap = keys.tolist()
    units = _Units(idx.tolist(), y.tolist(), now.tolist(), heap)
    return units, (~fast).nonzero()[0].tolist()


class _Model:
    """One token's pools in one direction, sorted by v_max (best rate first), with the closed
    form's coefficients. Built once per snapshot and token (`PoolBook.memo`)."""

    __slots__ = (
        "_buy_arrays",
        "_buy_cols",
        "_depth_max",
        "_plans",
        "_pool_table",
        "_position",
        "_reserves",
        "a",
        "b",
        "by_depth",
        "by_vmin",
        "c",
        "cap_in",
        "cap_out",
        "direction",
        "neg_depth",
        "neg_vmax",
        "out_limit",
        "pools",
        "rows",
        "size",
        "vmax",
        "vmin",
    )

    def __init__(
        self, pools: Iterable[Pool], direction: Direction, *, ranked: list[_Row] | None = None
    ) -> None:
        """The model of `pools`; or, given `ranked` (`updated`), of those rows as they are,
        already in model order (`pools` is then not read)."""
        rows = ranked
        if rows is None:
            rows = [row for row in (_row(pool, direction) for pool in pools) if row is not None]
            rows.sort(key=lambda r: -r[0])  # stable: ties keep the book's (outpoint) order
        self.direction = direction
        self.rows = rows
        self.vmax = [r[0] for r in rows]
        self.a = [r[1] for r in rows]
        self.b = [r[2] for r in rows]
        self.c = [r[3] for r in rows]
        self.vmin = [r[4] for r in rows]
        self.pools = [r[5] for r in rows]
        self.out_limit = [r[6] for r in rows]
        self.cap_in = [a / vmin - b for _, a, b, _, vmin, _, _ in rows]
        self.cap_out = [c - a * vmin for _, a, _, c, vmin, _, _ in rows]
        self.size = [p.trade_size for p in self.pools]
        self.by_vmin = sorted(range(len(rows)), key=self.vmin.__getitem__, reverse=True)
        self.by_depth = sorted(range(len(rows)), key=self.cap_out.__getitem__, reverse=True)
        self.neg_vmax = [-v for v in self.vmax]  # ascending, for bisect
        self.neg_depth = [-self.cap_out[i] for i in self.by_depth]
        self._plans: dict[float, _Plan] = {}
        self._position: dict[tuple[str, int], int] | None = None
        self._depth_max: list[int] | None = None
        self._reserves: tuple[list[int], list[int]] | None = None
        self._pool_table: list[Any] | None = None
        self._buy_cols: _PurchaseColumns | None = None
        self._buy_arrays: tuple[_PurchaseArrays | None] | None = None  # made once

    def replaced(self, removed: Iterable[Pool], added: Iterable[Pool]) -> _Model:
        """This model after a few pools of its token left (`removed`, as this model holds
        them) and others joined (`added`): their rows are taken out and re-inserted by bisect
        at their rank, so the result equals a model built afresh on the new pools (the
        order is v_max descending, ties by outpoint, as the stable sort of the book leaves
        it) without recomputing or re-sorting the 2,000 unchanged rows."""
        rows = list(self.rows)
        gone = sorted(
            (i for i in (self.position(p.key) for p in removed) if i is not None), reverse=True
        )
        for i in gone:
            del rows[i]
        for pool in added:
            row = _row(pool, self.direction)
            if row is not None:
                insort(rows, row, key=_row_rank)
        return _Model((), self.direction, ranked=rows)

    def depth_max(self) -> list[int]:
        """Running maximum, in model (v_max) order, of the reserve a single-pool trade's
        output bound grows with: sats when buying, tokens when selling (`_best_single`).
        Made once per model, so every order on this book shares it."""
        found = self._depth_max
        if found is None:
            found = []
            top = 0
            buying = self.direction is Direction.BUY
            for pool in self.pools:
                top = max(top, pool.sats if buying else pool.tokens)
                found.append(top)
            self._depth_max = found
        return found

    def reserves(self) -> tuple[list[int], list[int]]:
        """The pools' sats and tokens as columns, made once per model (`hop` reads them)."""
        found = self._reserves
        if found is None:
            found = self._reserves = (
                [pool.sats for pool in self.pools],
                [pool.tokens for pool in self.pools],
            )
        return found

    def pool_table(self) -> list[Any]:
        """A list aligned with the pools, None until a caller fills an entry: what a caller
        keeps per pool of this model (the book's encodings, `Encodings.of_hops`), read by
        the legs' positions (`Hop.aligned`)."""
        found = self._pool_table
        if found is None:
            found = self._pool_table = [None] * len(self.pools)
        return found

    def position(self, key: tuple[str, int]) -> int | None:
        """The model index of the pool with outpoint `key` (None: not usable this way)."""
        if self._position is None:
            self._position = {p.key: i for i, p in enumerate(self.pools)}
        return self._position.get(key)

    def __len__(self) -> int:
        return len(self.pools)

    def plan(self, fee_per_byte: float) -> _Plan:
        """Byte costs and the entry order for one fee rate (cached: rates rarely vary)."""
        plan = self._plans.get(fee_per_byte)
        if plan is None:
            cost = [fee_per_byte * s for s in self.size]
            enter = _entry_points(self, cost)
            order = sorted(range(len(self)), key=enter.__getitem__, reverse=True)
            order = [i for i in order if enter[i] > 0.0]
            plan = _Plan(cost, order, [enter[i] for i in order], min(cost, default=0.0), enter)
            if len(self._plans) >= 8:
                self._plans.clear()
            self._plans[fee_per_byte] = plan
        return plan

    def single_cost_bound(self, i: int, amount: int) -> float:
        """A lower bound on pool i's exact input for `amount` output alone (the continuous
        input, less two units); infinite if the pool cannot deliver it."""
        pool = self.pools[i]
        x, t = pool.sats, pool.tokens
        if self.direction is Direction.BUY:
            if amount >= t:
                return _INF
            return (x * t / (t - amount) - x) / GAMMA - 2.0
        # The contract's fee floor can save up to one sat of the payout: price amount − 1.
        net = x - (amount - 1) / PHI
        if net <= 0.0:
            return _INF
        return x * t / net - t - 2.0

    def single_bound(self, i: int, amount: int) -> float:
        """An upper bound on pool i's exact output for `amount` input alone: the continuous
        output, plus one unit for the contract's ceiling division, with the fee floor's gain
        (< 1/γ sats of input when buying, < 1 sat of output when selling)."""
        pool = self.pools[i]
        if self.direction is Direction.BUY:
            x = amount + 1.0 / GAMMA + 1e-9 * amount
            return pool.tokens * GAMMA * x / (pool.sats + GAMMA * x) * (1 + 1e-12) + 1.0
        return PHI * pool.sats * amount / (pool.tokens + amount) * (1 + 1e-12) + 2.0

    # exact per-pool arithmetic (integers; the contract's formulas) --------------------------

    def in_cap(self, i: int) -> int:
        """Most input worth paying pool i (beyond it the output no longer grows)."""
        pool = self.pools[i]
        if self.direction is Direction.BUY:
            limit = MAX_SATS - pool.sats
            try:
                return min(limit, buy_tokens_exact_out(pool.state, self.out_limit[i]))
            except ValueError:
                return limit
        limit = sell_input_limit(pool.sats, pool.tokens)
        try:
            return min(limit, sell_tokens_exact_out(pool.state, self.out_limit[i]))
        except ValueError:
            return limit

    def out_cap(self, i: int) -> int:
        """Most output one trade may take from pool i (its reserve rules)."""
        return self.out_limit[i]

    # The route evaluates these thousands of times per order, so the common case is the
    # contract's arithmetic inline (the same integer expressions as `protocols.cauldron.
    # formulas`, which `tests/router/test_route.py` holds them to); anything near a limit or
    # invalid goes to the formula itself, which also raises the same errors.

    def out_for_in(self, i: int, amount_in: int) -> int:
        pool = self.pools[i]
        x, t = pool.sats, pool.tokens
        if self.direction is Direction.BUY:
            if amount_in < 1 or x + amount_in > MAX_SATS or x < 1 or t < 1:
                return buy_tokens_exact_in(pool.state, amount_in)
            net = x + amount_in - amount_in * LP_FEE_NUM // LP_FEE_DEN
            return t + (-(x * t) // net)  # t − ⌈k/net⌉
        if amount_in < 1 or t + amount_in > MAX_TOKEN_AMOUNT or x < 1 or t < 1:
            out = sell_tokens_exact_in(pool.state, amount_in)
        else:
            spare = x + (-(x * t) // (t + amount_in))  # x − ⌈k/(t + in)⌉
            out = (LP_FEE_DEN * spare + LP_FEE_DEN - 1) // (LP_FEE_DEN + LP_FEE_NUM)
        # Paying more tokens than the cap's payout needs can widen the amount: the reserve
        # is that of the tokens actually held after the sale.
        return max(0, min(out, x - pool_reserve(t + amount_in)))

    def in_for_out(self, i: int, amount_out: int) -> int:
        pool = self.pools[i]
        x, t = pool.sats, pool.tokens
        if self.direction is Direction.BUY:
            if 1 <= amount_out < t and x >= 1:
                missing = -(-(x * t) // (t - amount_out)) - x
                sats_in = (
                    0
                    if missing <= 0
                    else (LP_FEE_DEN * (missing - 1)) // (LP_FEE_DEN - LP_FEE_NUM) + 1
                )
                if x + sats_in <= MAX_SATS:
                    return sats_in
            return buy_tokens_exact_out(pool.state, amount_out)
        if amount_out >= 1 and t >= 1:
            net = x - amount_out - amount_out * LP_FEE_NUM // LP_FEE_DEN
            if net >= 1:
                tokens_in = -(-(x * t) // net) - t
                if t + tokens_in <= MAX_TOKEN_AMOUNT:
                    return tokens_in
        return sell_tokens_exact_out(pool.state, amount_out)

    def unit_costs(self, items: Iterable[tuple[int, int, int]]) -> list[tuple[int, int]]:
        """For each (pool i, output y ≥ 1, cap): `(in_for_out(i, y), in_for_out(i, y + 1) −
        in_for_out(i, y))`, the second −1 when y is at the cap. Both amounts of a purchase in
        one pass (the exact-in polish asks them for every leg), the same integer expressions
        as `in_for_out`, which answers everything else; `test_fast_paths` holds them equal."""
        out: list[tuple[int, int]] = []
        add = out.append
        pools = self.pools
        in_for_out = self.in_for_out
        if self.direction is Direction.BUY:
            for i, y, cap in items:
                pool = pools[i]
                x, t = pool.sats, pool.tokens
                if 1 <= y < cap and y + 1 < t and x >= 1:
                    k = x * t
                    missing = -(-k // (t - y)) - x
                    now = 0 if missing <= 0 else (LP_FEE_DEN * (missing - 1)) // _KEEP + 1
                    missing = -(-k // (t - y - 1)) - x
                    more = 0 if missing <= 0 else (LP_FEE_DEN * (missing - 1)) // _KEEP + 1
                    if x + more <= MAX_SATS:
                        add((now, more - now))
                        continue
                now = in_for_out(i, y)
                add((now, in_for_out(i, y + 1) - now if y < cap else -1))
            return out
        for i, y, cap in items:
            now = in_for_out(i, y)
            add((now, in_for_out(i, y + 1) - now if y < cap else -1))
        return out

    def purchase_columns(self) -> _PurchaseColumns:
        """`_PurchaseColumns` of a buying model's pools, made once per model: every purchase
        on this book reads them."""
        cols = self._buy_cols
        if cols is None:
            cols = self._buy_cols = _purchase_columns(self.pools, self.out_limit)
        return cols

    def purchase_arrays(self) -> _PurchaseArrays | None:
        """`_PurchaseArrays` of a buying model, made once per model; None when some pool is
        too large for 64-bit arithmetic (then `buy_units` asks the formulas pool by pool)."""
        made = self._buy_arrays
        if made is None:
            made = self._buy_arrays = (_purchase_arrays(self),)
        return made[0]

    def buy_units(self, members: Sequence[int] | IntArray, v: float) -> _Units:
        """Buying, exact in by output (`_exact_in_by_out`), in one pass over the continuous
        split of `members` at √rate v (`_allocation`'s outputs, the same expressions): each
        pool's whole output units `y = min(⌊out⌋, cap)` (pools with none left out), what it
        pays for them and the polish heap's entry (next unit's cost; `_unit_key`) when it can
        take one more: `out_caps`, `unit_costs` and the columns made from them, as
        `test_fast_paths` holds them. ValueError as `unit_costs` raises it.

        From `_ARRAY_MEMBERS` members on the columns go through numpy at once
        (`purchase_arrays`), else member by member; a pool whose purchase is near a limit asks
        `in_for_out`. The heap comes in heap order (its keys are distinct). `members` may come
        as an array (`_Plan.order_array`)."""
        arrays = self.purchase_arrays() if len(members) >= _ARRAY_MEMBERS else None
        if arrays is not None:
            units, slow = _purchases_arrays(arrays, members, v)
        else:
            listed = members.tolist() if isinstance(members, np.ndarray) else members
            units, slow = self._purchases_inline(listed, v)
        index, get, pay, heap = units
        caps = self.out_limit
        in_for_out = self.in_for_out
        for p in slow:  # near a limit: the formulas themselves
            i, y = index[p], get[p]
            now = pay[p] = in_for_out(i, y)
            if y < caps[i]:
                step = in_for_out(i, y + 1) - now
                if step >= 0:
                    heapq.heappush(heap, step << KEY_SHIFT | p)
        return units

    def _purchases_inline(self, members: Iterable[int], v: float) -> tuple[_Units, list[int]]:
        """`_purchases_arrays` member by member, for fewer members (the arrays' fixed cost
        exceeds the Python loop's) or a model too large for 64 bits (Python integers)."""
        caps, k_less, sats, t_ok, room = self.purchase_columns()
        vmax, vmin, a_, c_, cap_out = self.vmax, self.vmin, self.a, self.c, self.cap_out
        den, keep, shift = LP_FEE_DEN, _KEEP, KEY_SHIFT
        units = _Units([], [], [], [])
        index, get, pay, heap = units
        slow: list[int] = []
        add = heap.append
        for i in sorted(members):
            if v >= vmax[i]:
                continue  # not trading at this rate
            out = cap_out[i] if v <= vmin[i] else c_[i] - a_[i] * v
            cap = caps[i]
            y = int(out)
            if y > cap:
                y = cap
            if y < 1:
                continue
            p = len(index)
            index.append(i)
            get.append(y)
            t = t_ok[i]
            if y < cap and y + 1 < t:
                # (Positive operands throughout: CPython's floor division of a negative takes
                # extra steps.)
                k1, x = k_less[i], sats[i]
                now = (k1 // (t - y) - x) * den // keep + 1
                more = (k1 // (t - y - 1) - x) * den // keep + 1
                if more <= room[i]:
                    pay.append(now)
                    if more >= now:
                        add((more - now) << shift | p)
                    continue
            pay.append(0)  # (`buy_units` asks the formulas)
            slow.append(p)
        heapq.heapify(heap)
        return units, slow

    def out_caps(self, indices: Iterable[int]) -> list[int]:
        """`out_cap` of each pool."""
        return list(map(self.out_limit.__getitem__, indices))

    def hop(self, token_id: str, chosen: _LegColumns) -> Hop:
        """The `Hop` of a solution (`_LegColumns`) as columns (pools, sats after, tokens
        after), with its totals and pool bytes, by compiled loops (`router.kernels`): the
        `Leg` objects are made only if something asks (`Hop.legs`);
        `tests/router/test_fast_paths.py` holds them equal to `reference.plain_leg`'s. The
        legs' model indices come with it (`Hop.aligned`)."""
        indices, xs, ys = list(chosen[0]), list(chosen[1]), list(chosen[2])
        sats_of, tokens_of = self.reserves()
        buying = self.direction is Direction.BUY
        sats, tokens = legs_after(indices, xs, ys, sats_of, tokens_of, buying)
        return Hop.of_columns(
            token_id,
            self.direction,
            (tuple(map(self.pools.__getitem__, indices)), tuple(sats), tuple(tokens)),
            (sum(xs), sum(ys)),
            _pool_bytes(tokens),
            (xs, ys),
            aligned=(self.pool_table(), indices),
        )

    def rate_at_in(self, i: int, x: int) -> float:
        """Marginal output per input unit after pool i has received `x` input units."""
        pool = self.pools[i]
        if self.direction is Direction.BUY:
            return GAMMA * pool.tokens * pool.sats / (pool.sats + GAMMA * x) ** 2
        return PHI * pool.sats * pool.tokens / (pool.tokens + x) ** 2

    def rate_at_out(self, i: int, y: int) -> float:
        """Marginal output per input unit after pool i has paid out `y` output units."""
        pool = self.pools[i]
        k = pool.sats * pool.tokens
        if self.direction is Direction.BUY:
            return GAMMA * (pool.tokens - y) ** 2 / k
        return PHI * (pool.sats - y / PHI) ** 2 / k


def _pool_bytes(tokens: list[int]) -> int:
    """The bytes of legs leaving their pools these tokens: the narrowest width's size for
    every leg, plus each step up for the legs past it."""
    size = len(tokens) * _TRADE_BY_WIDTH[0]
    for top, step in _WIDTH_STEPS:
        wider = count_above(tokens, top)
        if not wider:
            break
        size += step * wider
    return size


def _model_key(token_id: str, direction: Direction) -> tuple[str, str, Direction]:
    return ("route-model", token_id, direction)


def _model(book: PoolBook, token_id: str, direction: Direction) -> _Model:
    return book.memo(
        _model_key(token_id, direction), lambda: _Model(book.pools(token_id), direction)
    )


def prewarm(book: PoolBook, token_id: str) -> None:
    """Build a token's models (both directions) now, so the next order does not pay for it."""
    for direction in Direction:
        _model(book, token_id, direction)


def _const(model: _Model) -> Callable[[], _Model]:
    return lambda: model


def inherit_models(new: PoolBook, old: PoolBook, tokens: Iterable[str]) -> None:
    """Reuse `old`'s models for `tokens` whose pools are the same in `new` (the caller's
    promise): a snapshot change touching one token must not re-sort the 199 others."""
    for token in tokens:
        for direction in Direction:
            key = _model_key(token, direction)
            found = old.peek(key)
            if isinstance(found, _Model):
                new.memo(key, _const(found))


def update_models(
    new: PoolBook, old: PoolBook, token: str, removed: Sequence[Pool], added: Sequence[Pool]
) -> None:
    """`prewarm` for a token whose pools in `new` are `old`'s less `removed` plus `added`
    (the caller's promise): each of `old`'s models is updated in place of a rebuild when
    the change is small (`_Model.replaced`), else built afresh."""
    for direction in Direction:
        key = _model_key(token, direction)
        found = old.peek(key)
        if isinstance(found, _Model) and 4 * (len(removed) + len(added)) <= len(found):
            new.memo(key, _const(found.replaced(removed, added)))
        else:
            _model(new, token, direction)


def _input_limit(pool: Pool, direction: Direction) -> int:
    """Most input a pool can hold at all (the 21e14 sats / 2^63−1 token limits, and for a
    sale a token amount whose output's dust threshold the pool's sats still cover)."""
    if direction is Direction.BUY:
        return MAX_SATS - pool.sats
    return sell_input_limit(pool.sats, pool.tokens)
