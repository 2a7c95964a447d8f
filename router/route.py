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
"""

from __future__ import annotations

import heapq
import math
import threading
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from itertools import repeat
from operator import add, attrgetter, gt, itemgetter, sub
from typing import Any

from bch.token import MAX_TOKEN_AMOUNT
from bch.tx import MAX_SATS
from protocols.cauldron.formulas import (
    LP_FEE_DEN,
    LP_FEE_NUM,
    PoolState,
    buy_tokens_exact_in,
    buy_tokens_exact_out,
    lp_fee,
    sell_tokens_exact_in,
    sell_tokens_exact_out,
)
from router.errors import route_failed
from router.pools import (
    POOL_INPUT_SIZE,
    Pool,
    PoolBook,
    pool_output_size,
    pool_reserve,
    sell_input_limit,
)

GAMMA = 997 / 1000
_KEEP = LP_FEE_DEN - LP_FEE_NUM  # of every 1,000 sats paid in, what the pool keeps
PHI = 1000 / 1003
_INF = math.inf


class Direction(StrEnum):
    BUY = "buy"  # the user pays sats into the pools and takes tokens
    SELL = "sell"  # the user pays tokens into the pools and takes sats


@dataclass(frozen=True, slots=True)
class Leg:
    """One pool's part of a route: its state before (the pool) and after the trade."""

    pool: Pool
    after: PoolState

    @property
    def direction(self) -> Direction:
        return Direction.BUY if self.after.sats > self.pool.sats else Direction.SELL

    @property
    def amount_in(self) -> int:
        """What the user pays this pool (sats when buying tokens, tokens when selling)."""
        if self.after.sats > self.pool.sats:
            return self.after.sats - self.pool.sats
        return self.after.tokens - self.pool.tokens

    @property
    def amount_out(self) -> int:
        if self.after.sats > self.pool.sats:
            return self.pool.tokens - self.after.tokens
        return self.pool.sats - self.after.sats

    @property
    def lp_fee(self) -> int:
        return lp_fee(self.pool.sats, self.after.sats)

    def to_json(self) -> dict[str, Any]:
        pool, after = self.pool, self.after
        owner, sats_before, tokens_before = pool.json_strings
        if after.sats > pool.sats:  # buy: sats in, tokens out
            direction = "buy"
            amount_in, amount_out = after.sats - pool.sats, pool.tokens - after.tokens
        else:
            direction = "sell"
            amount_in, amount_out = after.tokens - pool.tokens, pool.sats - after.sats
        return {
            "txid": pool.txid,
            "tx_pos": pool.vout,
            "owner_pkh": owner,
            "token_id": pool.token_id,
            "direction": direction,
            "amount_in": str(amount_in),
            "amount_out": str(amount_out),
            "lp_fee": str(lp_fee(pool.sats, after.sats)),
            "sats_before": sats_before,
            "tokens_before": tokens_before,
            "sats_after": str(after.sats),
            "tokens_after": str(after.tokens),
        }


# A hop's legs as columns: the pools, their sats after the trade, their tokens after it.
Columns = tuple[tuple[Pool, ...], tuple[int, ...], tuple[int, ...]]


class Hop:
    """The legs trading one token in one direction, and their totals.

    A hop the route makes (`Hop.of_columns`) holds its legs as columns (pools, sats after,
    tokens after) with the totals, the pool bytes and the amounts; the `Leg` objects are made
    only if something reads `legs` (tests, the CLI's plain JSON), never on the daemon's path.
    Equal to, and hashing as, the `Hop` of the same legs."""

    def __init__(
        self,
        token_id: str,
        direction: Direction,
        legs: tuple[Leg, ...] = (),
        totals: tuple[int, int] | None = None,
        size: int | None = None,
    ) -> None:
        self.token_id = token_id
        self.direction = direction
        # Made with the legs (`_Model.hop`), which the quote and the builder then ask for: the
        # totals in and out, and the bytes the pools add to the transaction.
        self.totals = totals
        self.size = size
        self._columns: Columns | None = None
        # (amounts in, amounts out) of the legs, in order, when the route made them.
        self._amounts: tuple[Sequence[int], Sequence[int]] | None = None
        self.__dict__["legs"] = legs  # the cached_property's value

    @classmethod
    def of_columns(
        cls,
        token_id: str,
        direction: Direction,
        columns: Columns,
        totals: tuple[int, int],
        size: int,
        amounts: tuple[Sequence[int], Sequence[int]] | None = None,
    ) -> Hop:
        hop = cls.__new__(cls)
        hop.token_id, hop.direction, hop.totals, hop.size = token_id, direction, totals, size
        hop._columns, hop._amounts = columns, amounts
        return hop

    @cached_property
    def legs(self) -> tuple[Leg, ...]:
        pools, sats, tokens = self.columns()
        return tuple(map(Leg, pools, map(PoolState, sats, tokens)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Hop):
            return NotImplemented
        return (self.token_id, self.direction, self.legs) == (
            other.token_id,
            other.direction,
            other.legs,
        )

    def __hash__(self) -> int:
        return hash((self.token_id, self.direction, self.legs))

    def __repr__(self) -> str:
        return f"Hop(token_id={self.token_id!r}, direction={self.direction!r}, legs={self.legs!r})"

    def amounts(self) -> tuple[Sequence[int], Sequence[int]] | None:
        """Each leg's amount in and amount out (columns), when the route made this hop."""
        return self._amounts

    def columns(self) -> Columns:
        """(pools, sats after, tokens after) of the legs, in order: what the builder, the gate
        and the JSON read."""
        found = self._columns
        if found is None:
            legs = self.legs
            afters = list(map(_after_of, legs))
            found = self._columns = (
                tuple(map(_pool_of, legs)),
                tuple(map(_sats_of, afters)),
                tuple(map(_tokens_of, afters)),
            )
        return found

    def count(self) -> int:
        """How many legs (pools)."""
        return len(self.columns()[0])

    @property
    def amount_in(self) -> int:
        if self.totals is not None:
            return self.totals[0]
        return sum(leg.amount_in for leg in self.legs)

    @property
    def amount_out(self) -> int:
        if self.totals is not None:
            return self.totals[1]
        return sum(leg.amount_out for leg in self.legs)

    @property
    def pool_bytes(self) -> int:
        """Bytes the hop's pools add to the transaction: each input and re-created output."""
        if self.size is not None:
            return self.size
        return sum(POOL_INPUT_SIZE + pool_output_size(leg.after.tokens) for leg in self.legs)


_pool_of = attrgetter("pool")
_after_of = attrgetter("after")
_sats_of = attrgetter("sats")
_tokens_of = attrgetter("tokens")
# Pool's `leg_json_bytes` slots (None until made, all three together).
# A pool's input plus re-created output by its amount's width: `bisect_left(_WIDTH_TOPS, n)`
# is 0 for 1-byte amounts (n ≤ 252), 1 for 3-byte, 2 for 5-byte, 3 for 9-byte.
_WIDTH_TOPS = (0xFC, 0xFFFF, 0xFFFFFFFF)


# A pool's input plus its re-created output, by the CompactSize width of its token amount.
_TRADE_BY_WIDTH = tuple(
    POOL_INPUT_SIZE + pool_output_size(top) for top in (1, 0xFFFF, 0xFFFFFFFF, MAX_TOKEN_AMOUNT)
)
# (top of a width, bytes the next width adds): a leg holding more than `top` tokens is `step`
# bytes larger than one holding `top`.
_WIDTH_STEPS = tuple(
    (top, wider - narrower)
    for top, narrower, wider in zip(
        _WIDTH_TOPS, _TRADE_BY_WIDTH[:-1], _TRADE_BY_WIDTH[1:], strict=True
    )
)


# --- the per-token model ---------------------------------------------------------------------


def _sell_out_cap(pool: Pool) -> int:
    """Most sats a sale may take: the pool keeps the dust threshold of its re-created output
    for its token amount after the sale, which stays within 2^63−1 (`pools.sell_out_cap`)."""
    return pool.sell_cap


_Row = tuple[float, float, float, float, float, Pool]  # v_max, a, b, c, v_min, pool


def _row(pool: Pool, direction: Direction) -> _Row | None:
    """A pool's closed-form coefficients in one direction (None: unusable that way)."""
    x, t = pool.sats, pool.tokens
    k = x * t
    if direction is Direction.BUY:
        if t < 2 or x >= MAX_SATS or pool.buy_cap < 1:
            return None  # must keep one token / cannot take more sats
        a = math.sqrt(k / GAMMA)
        b = x / GAMMA
        c = float(t)
        vmax = math.sqrt(GAMMA * t / x)
        vmin = max(1.0 / a, a / (MAX_SATS - x + b))
    else:
        if _sell_out_cap(pool) < 1 or t >= MAX_TOKEN_AMOUNT:
            return None
        a = math.sqrt(PHI * k)
        b = float(t)
        c = PHI * x
        vmax = math.sqrt(PHI * x / t)
        # Where the reserve binds: the continuous payout c − a·v reaches the cap.
        vmin = max((c - _sell_out_cap(pool)) / a, a / MAX_TOKEN_AMOUNT)
    if not vmin < vmax:
        return None
    return (vmax, a, b, c, vmin, pool)


def _row_rank(row: _Row) -> tuple[float, tuple[str, int]]:
    """A row's place in a model: v_max descending, then the outpoint (the book's order)."""
    return (-row[0], row[5].key)


# Per pool of a buying model, what `_Model.buy_units` reads: the purchase cap (`Pool.buy_cap`),
# k − 1 (k = sats · tokens), the sats, the tokens (0 when the pool holds no sats, so the inline
# arithmetic never applies to it), and MAX_SATS − sats (the most a purchase may pay).
_PurchaseColumns = tuple[list[int], list[int], list[int], list[int], list[int]]
# A purchase's caps by model index: the model's own column (`buy_units`) or a dict of the legs'.
_Caps = Sequence[int] | dict[int, int]


def _purchase_columns(pools: Sequence[Pool]) -> _PurchaseColumns:
    return (
        [pool.buy_cap for pool in pools],
        [pool.sats * pool.tokens - 1 for pool in pools],
        [pool.sats for pool in pools],
        [pool.tokens if pool.sats >= 1 else 0 for pool in pools],
        [MAX_SATS - pool.sats for pool in pools],
    )


class _Model:
    """One token's pools in one direction, sorted by v_max (best rate first), with the closed
    form's coefficients. Built once per snapshot and token (`PoolBook.memo`)."""

    __slots__ = (
        "_buy_cols",
        "_depth_max",
        "_plans",
        "_position",
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
        "pools",
        "rows",
        "size",
        "vmax",
        "vmin",
    )

    def __init__(self, pools: Iterable[Pool], direction: Direction) -> None:
        rows = [row for row in (_row(pool, direction) for pool in pools) if row is not None]
        rows.sort(key=lambda r: -r[0])  # stable: ties keep the book's (outpoint) order
        self._init(rows, direction)

    @classmethod
    def _from_rows(cls, rows: list[_Row], direction: Direction) -> _Model:
        model = cls.__new__(cls)
        model._init(rows, direction)
        return model

    def _init(self, rows: list[_Row], direction: Direction) -> None:
        self.direction = direction
        self.rows = rows
        self.vmax = [r[0] for r in rows]
        self.a = [r[1] for r in rows]
        self.b = [r[2] for r in rows]
        self.c = [r[3] for r in rows]
        self.vmin = [r[4] for r in rows]
        self.pools = [r[5] for r in rows]
        self.cap_in = [a / vmin - b for _, a, b, _, vmin, _ in rows]
        self.cap_out = [c - a * vmin for _, a, _, c, vmin, _ in rows]
        self.size = [p.trade_size for p in self.pools]
        self.by_vmin = sorted(range(len(rows)), key=self.vmin.__getitem__, reverse=True)
        self.by_depth = sorted(range(len(rows)), key=self.cap_out.__getitem__, reverse=True)
        self.neg_vmax = [-v for v in self.vmax]  # ascending, for bisect
        self.neg_depth = [-self.cap_out[i] for i in self.by_depth]
        self._plans: dict[float, _Plan] = {}
        self._position: dict[tuple[str, int], int] | None = None
        self._depth_max: list[int] | None = None
        self._buy_cols: _PurchaseColumns | None = None

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
        return _Model._from_rows(rows, self.direction)

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
                return min(limit, buy_tokens_exact_out(pool.state, pool.buy_cap))
            except ValueError:
                return limit
        limit = sell_input_limit(pool.sats, pool.tokens)
        try:
            return min(limit, sell_tokens_exact_out(pool.state, _sell_out_cap(pool)))
        except ValueError:
            return limit

    def out_cap(self, i: int) -> int:
        pool = self.pools[i]
        if self.direction is Direction.BUY:
            return pool.buy_cap
        return _sell_out_cap(pool)

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
            cols = self._buy_cols = _purchase_columns(self.pools)
        return cols

    def buy_units(
        self, members: Iterable[int], v: float
    ) -> tuple[dict[int, int], Sequence[int], dict[int, int], list[int]]:
        """Buying, exact in by output (`_exact_in_by_out`), in one pass over the continuous
        split of `members` at √rate v (`_allocation`'s outputs, the same expressions): each
        pool's whole output units `y = min(⌊out⌋, cap)` (pools with none left out), its cap,
        what it pays for them and the polish heap's entry (next unit's cost, pool;
        `_unit_key`) when it can take one more: `out_caps`, `unit_costs` and the dicts made
        from them, as `test_fast_paths` holds them (the caps as the model's own column, read
        by pool index). ValueError as `unit_costs` raises it."""
        in_for_out = self.in_for_out
        caps, k_less, sats, t_ok, room = self.purchase_columns()
        vmax, vmin, a_, c_, cap_out = self.vmax, self.vmin, self.a, self.c, self.cap_out
        den, keep, shift = LP_FEE_DEN, _KEEP, _KEY_SHIFT
        get: dict[int, int] = {}
        pay: dict[int, int] = {}
        heap: list[int] = []
        add = heap.append
        for i in members:
            if v >= vmax[i]:
                continue  # not trading at this rate
            out = cap_out[i] if v <= vmin[i] else c_[i] - a_[i] * v
            cap = caps[i]
            y = int(out)
            if y > cap:
                y = cap
            if y < 1:
                continue
            get[i] = y
            t = t_ok[i]
            if y < cap and y + 1 < t:
                # `in_for_out`'s purchase with k − 1 made once per pool: the sats missing,
                # ⌈k/(t − y)⌉ − x, are (k − 1) // (t − y) + 1 − x, ≥ 1 as y ≥ 1, so the
                # cost is ⌊1000·(missing − 1) / 997⌋ + 1 (positive operands throughout:
                # CPython's floor division of a negative takes extra steps).
                k1, x = k_less[i], sats[i]
                now = (k1 // (t - y) - x) * den // keep + 1
                more = (k1 // (t - y - 1) - x) * den // keep + 1
                if more <= room[i]:
                    pay[i] = now
                    if more >= now:
                        add((more - now) << shift | i)
                    continue
            now = in_for_out(i, y)
            pay[i] = now
            if y < cap:
                step = in_for_out(i, y + 1) - now
                if step >= 0:
                    add(step << shift | i)
        return get, caps, pay, heap

    def out_caps(self, indices: Iterable[int]) -> list[int]:
        """`out_cap` of each pool, the direction tested once."""
        pools = self.pools
        if self.direction is Direction.BUY:
            return [pools[i].buy_cap for i in indices]
        return [_sell_out_cap(pools[i]) for i in indices]

    def leg(self, i: int, amount_in: int, amount_out: int) -> Leg:
        pool = self.pools[i]
        if self.direction is Direction.BUY:
            after = PoolState(pool.sats + amount_in, pool.tokens - amount_out)
        else:
            after = PoolState(pool.sats - amount_out, pool.tokens + amount_in)
        return Leg(pool, after)

    def legs(self, chosen: Sequence[tuple[int, int, int]]) -> tuple[Leg, ...]:
        """`leg` for each (pool, in, out) of a solution, the direction tested once."""
        pools = self.pools
        out: list[Leg] = []
        add = out.append
        if self.direction is Direction.BUY:
            for i, x, y in chosen:
                pool = pools[i]
                add(Leg(pool, PoolState(pool.sats + x, pool.tokens - y)))
        else:
            for i, x, y in chosen:
                pool = pools[i]
                add(Leg(pool, PoolState(pool.sats - y, pool.tokens + x)))
        return tuple(out)

    def hop(self, token_id: str, chosen: _LegColumns) -> Hop:
        """The `Hop` of a solution (`_LegColumns`) as columns (pools, sats after, tokens
        after), with its totals and pool bytes, every pass a C-level map: the `Leg` objects
        are made only if something asks (`Hop.legs`); `tests/router/test_fast_paths.py`
        holds them equal to `leg`'s."""
        indices, xs, ys = chosen
        pools = tuple(map(self.pools.__getitem__, indices))
        if self.direction is Direction.BUY:
            sats = tuple(map(add, map(_sats_of, pools), xs))
            tokens = tuple(map(sub, map(_tokens_of, pools), ys))
        else:
            sats = tuple(map(sub, map(_sats_of, pools), ys))
            tokens = tuple(map(add, map(_tokens_of, pools), xs))
        # The narrowest width's size for every leg, plus each step up for the legs past it.
        size = len(tokens) * _TRADE_BY_WIDTH[0]
        most = max(tokens, default=0)
        for top, step in _WIDTH_STEPS:
            if most <= top:
                break
            size += step * sum(map(gt, tokens, repeat(top)))
        return Hop.of_columns(
            token_id, self.direction, (pools, sats, tokens), (sum(xs), sum(ys)), size, (xs, ys)
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

    def sweep(self, m: _Model, target: float, exact_in: bool, limit: int) -> _Fill:
        """`_sweep(m, self.order, self.enter, m.by_vmin, target, exact_in, limit)`."""
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
    jumped: bool = False  # the last member's admission overshot the order (see _sweep)


def _sweep(
    m: _Model,
    order: Sequence[int],
    enter: Sequence[float],
    sat_order: Sequence[int],
    target: float,
    exact_in: bool,
    limit: int | None = None,
) -> _Fill:
    """Walk the breakpoints from the best rate down until the pools admitted so far fill
    `target`. `enter[j]` is where pool `order[j]` is admitted (descending); `sat_order` lists
    the candidates by descending v_min. The fill is linear in 1/v (exact in) or v (exact out)
    between breakpoints, so the crossing is solved in closed form.

    Admission below v_max (byte costs) adds a pool with a positive fill at once; if that jump
    overshoots the order the sweep stops with `jumped` and the caller re-solves that set. It
    also stops, unsolved (v = 0), once more than `limit` pools are admitted.
    """
    a_arr, vmin = m.a, m.vmin
    off = m.b if exact_in else m.c  # per-pool constant of the linear form
    cap = m.cap_in if exact_in else m.cap_out
    sum_a = sum_k = sat_total = 0.0
    state = [0] * len(m)  # 1: trading on its curve, 2: saturated at its cap
    members: list[int] = []
    most = limit if limit is not None else len(m)
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
        if fill >= target and sum_a > 0.0:
            if exact_in:
                v = sum_a / (target + sum_k - sat_total)
            else:
                v = (sum_k + sat_total - target) / sum_a
            return _Fill(max(v, v_next), members)
        if v_next <= 0.0:
            return _Fill(0.0, members)  # every admitted pool is saturated: cannot fill
        if ve >= vs:
            if len(members) >= most:
                return _Fill(0.0, members)
            i = order[ei]
            ei += 1
            members.append(i)
            if ve > vmin[i]:
                state[i] = 1
                sum_a += a_arr[i]
                sum_k += off[i]
                gained = (a_arr[i] / ve - off[i]) if exact_in else (off[i] - a_arr[i] * ve)
            else:
                state[i] = 2
                sat_total += cap[i]
                gained = cap[i]
            if gained > 0.0 and fill + gained >= target:
                return _Fill(0.0, members, jumped=True)
        else:
            i = sat_order[si]
            si += 1
            state[i] = 2
            sum_a -= a_arr[i]
            sum_k -= off[i]
            sat_total += cap[i]


class _SweepTable:
    """`_sweep` of one breakpoint sequence, recorded once for every order on it.

    The walk (which pools are admitted or saturate, in which order, and the running sums)
    depends on the model and the plan only, not on the order's amount; the amount only
    decides where it stops. So the walk is recorded at each breakpoint it checks (the sums,
    the fill there, and for an admission the fill just after it), extended lazily as far as
    orders need it, and an order finds its stop by bisection on the running maximum of those
    fills (the first breakpoint reaching the target; a running maximum, so float rounding
    cannot make it differ from the walk's first). Members are a prefix of `order`. The
    result is `_sweep`'s exactly (`tests/router/test_sweep_table.py`)."""

    __slots__ = (
        "_a",
        "_admitted",
        "_cap",
        "_done",
        "_ei",
        "_enter",
        "_exact_in",
        "_fills",
        "_lock",
        "_off",
        "_order",
        "_sat_order",
        "_sat_total",
        "_si",
        "_state",
        "_sum_a",
        "_sum_k",
        "_sums",
        "_top",
        "_v_next",
        "_vmin",
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
        self._enter = enter
        self._sat_order = sat_order
        self._exact_in = exact_in
        self._a = m.a
        self._vmin = m.vmin
        self._off = m.b if exact_in else m.c
        self._cap = m.cap_in if exact_in else m.cap_out
        self._state = [0] * len(m)
        self._ei = self._si = 0
        self._sum_a = self._sum_k = self._sat_total = 0.0
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
                if self._exact_in:
                    v = sum_a / (target + sum_k - sat_total)
                else:
                    v = (sum_k + sat_total - target) / sum_a
                v_next = self._v_next[j]
                return _Fill(max(v, v_next), self._order[: self._member_count(j)])
            if j < hard:  # the admission there overshoots the order
                return _Fill(0.0, self._order[: self._member_count(j) + 1], jumped=True)
        return _Fill(0.0, self._order[: self._member_count(hard)])

    def _member_count(self, j: int) -> int:
        """Members admitted before breakpoint j."""
        return bisect_left(self._admitted, j)

    def _extend(self, target: float, limit: int) -> None:
        """Walk on (as `_sweep` does) until a recorded fill reaches `target`, more than
        `limit` pools are admitted, or the breakpoints end."""
        order, enter, sat_order = self._order, self._enter, self._sat_order
        a_arr, vmin, off, cap, state = self._a, self._vmin, self._off, self._cap, self._state
        exact_in = self._exact_in
        fills, sums, v_nexts, top, admitted = (
            self._fills,
            self._sums,
            self._v_next,
            self._top,
            self._admitted,
        )
        ei, si = self._ei, self._si
        sum_a, sum_k, sat_total = self._sum_a, self._sum_k, self._sat_total
        n_e, n_s = len(order), len(sat_order)
        high = top[-1] if top else -_INF
        done = self._done
        while not done and high < target and len(admitted) <= limit:
            ve = enter[ei] if ei < n_e else 0.0
            vs = vmin[sat_order[si]] if si < n_s else 0.0
            if vs > ve and state[sat_order[si]] != 1:
                si += 1
                continue
            v_next = ve if ve >= vs else vs
            if exact_in:
                if v_next > 0.0:
                    fill = sum_a / v_next - sum_k + sat_total
                else:
                    fill = _INF if sum_a > 0.0 else sat_total
            else:
                fill = sum_k - sum_a * v_next + sat_total
            fills.append(fill)
            sums.append((sum_a, sum_k, sat_total))
            v_nexts.append(v_next)
            if sum_a > 0.0 and fill > high:
                high = fill
            if v_next <= 0.0:
                done = True
            elif ve >= vs:
                admitted.append(len(fills) - 1)
                i = order[ei]
                ei += 1
                if ve > vmin[i]:
                    state[i] = 1
                    sum_a += a_arr[i]
                    sum_k += off[i]
                    gained = (a_arr[i] / ve - off[i]) if exact_in else (off[i] - a_arr[i] * ve)
                else:
                    state[i] = 2
                    sat_total += cap[i]
                    gained = cap[i]
                if gained > 0.0 and fill + gained > high:
                    high = fill + gained
            else:
                i = sat_order[si]
                si += 1
                state[i] = 2
                sum_a -= a_arr[i]
                sum_k -= off[i]
                sat_total += cap[i]
            top.append(high)
        self._ei, self._si = ei, si
        self._sum_a, self._sum_k, self._sat_total = sum_a, sum_k, sat_total
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
    `amount`)."""
    get = {i: y for i, _, y in legs}
    pay = {i: m.in_for_out(i, y) for i, y in get.items()}
    spare = amount - sum(pay.values())
    caps = {i: m.out_cap(i) for i in get}
    heap = [_unit_key(m.in_for_out(i, get[i] + 1) - pay[i], i) for i in get if get[i] < caps[i]]
    spare = _buy_cheapest_units(m, heap, pay, get, caps, spare)
    if not _place_rest(m, pay, get, spare):
        return legs  # it cannot be spent exactly within the limits: the legs as they came
    return [(i, pay[i], get[i]) for i in sorted(pay)]


# The polish heaps' entries: (next unit's cost, pool) as one integer, `cost << 32 | pool`,
# which orders as the pair does (pools are model indices, < 2^32; a cost may be any integer)
# and compares without a tuple (the heap sifts ~170 units of a 350-leg order).
_KEY_SHIFT = 32
_KEY_POOL = (1 << _KEY_SHIFT) - 1


def _unit_key(cost: int, i: int) -> int:
    return cost << _KEY_SHIFT | i


def _buy_cheapest_units(
    m: _Model,
    heap: list[int],
    pay: dict[int, int],
    get: dict[int, int],
    caps: _Caps,
    spare: int,
) -> int:
    """Exact in: while the spare input covers it, buy the whole output unit that costs least
    (`heap`: `_unit_key(next unit's cost, pool)`, heapified here); returns the spare left."""
    heapq.heapify(heap)
    # A pool's next unit replaces its bought one at the top (one sift, not a pop and a push):
    # a pool has one entry at a time, so the keys are distinct and the order is the same.
    pop, replace = heapq.heappop, heapq.heapreplace
    in_for_out = m.in_for_out
    shift, mask = _KEY_SHIFT, _KEY_POOL
    if m.direction is Direction.BUY:
        # `in_for_out`'s purchase arithmetic inline (a 350-leg order buys ~170 units here);
        # anything it would not answer inline goes to it.
        _, k_less, sats, t_ok, room = m.purchase_columns()
        den, keep = LP_FEE_DEN, _KEEP
        while heap and heap[0] >> shift <= spare:
            key = heap[0]
            cost, i = key >> shift, key & mask
            spare -= cost
            paid = pay[i] = pay[i] + cost
            y = get[i] = get[i] + 1
            if y < caps[i]:
                t = t_ok[i]
                if y + 1 < t:  # as `buy_units`
                    more = (k_less[i] // (t - y - 1) - sats[i]) * den // keep + 1
                    if more <= room[i]:
                        replace(heap, (more - paid) << shift | i)
                        continue
                replace(heap, (in_for_out(i, y + 1) - paid) << shift | i)
            else:
                pop(heap)
        return spare
    while heap and heap[0] >> shift <= spare:
        key = heap[0]
        cost, i = key >> shift, key & mask
        spare -= cost
        pay[i] += cost
        get[i] += 1
        if get[i] < caps[i]:
            replace(heap, (in_for_out(i, get[i] + 1) - pay[i]) << shift | i)
        else:
            pop(heap)
    return spare


def _place_rest(m: _Model, pay: dict[int, int], get: dict[int, int], spare: int) -> bool:
    """Exact in: the input no whole unit could use goes to the largest leg (its output made
    again for it), or as far as the pools' input limits allow, to the next ones (near 2^63−1
    tokens the largest may not hold it all). False if the limits leave some of it over."""
    # The largest leg (the first of the largest, as the stable sort below would order them)
    # usually holds it all: the sort only when it cannot.
    if not pay:
        return not spare
    first = max(pay, key=pay.__getitem__)
    take = min(spare, max(0, _input_limit(m.pools[first], m.direction) - pay[first]))
    if take == spare:
        pay[first] += take
        get[first] = m.out_for_in(first, pay[first])
        return True
    for n, i in enumerate(sorted(pay, key=pay.__getitem__, reverse=True)):
        take = min(spare, max(0, _input_limit(m.pools[i], m.direction) - pay[i]))
        if take or n == 0:
            pay[i] += take
            get[i] = m.out_for_in(i, pay[i])
            spare -= take
        if not spare:
            return True
    return not spare


def _exact_in_by_out(
    m: _Model,
    members: Sequence[int],
    alloc: Sequence[tuple[int, float, float]] | None,
    amount: int,
    v: float,
) -> _LegColumns | None:
    """Exact in, when the legs are worth polishing: straight from the continuous split's
    outputs to whole units. Each pool gets the integer part of its continuous output and pays
    the least input the contract takes for it; the input left over (rounding, float error,
    pools whose share buys no whole unit) buys whole units where the next one is cheapest,
    and what is still left stays with the largest leg (exact in spends exactly `amount`). A
    unit-by-unit input distribution first (`_exact_in`) would be undone by that polish anyway.

    None (the caller takes the input-first path) when the legs are not worth polishing, when
    every pool is full with input left, or when a formula refuses an amount near a limit."""
    if v * v > 1.0:
        return None
    in_for_out = m.in_for_out
    caps: _Caps
    if m.direction is Direction.BUY:
        # Always worth polishing here (a token is worth ≥ 1 sat at v² ≤ 1): the whole
        # units, their costs and the polish heap in one pass.
        try:
            get, caps, pay, ahead = m.buy_units(members, v)
        except ValueError:
            return None
        if not get:
            return None
    else:
        if alloc is None:
            alloc = _allocation(m, members, v)
        get, caps_of = {}, {}
        for (i, _, y), cap in zip(alloc, m.out_caps([i for i, _, _ in alloc]), strict=True):
            whole = min(int(y), cap)
            if whole >= 1:
                get[i] = whole
                caps_of[i] = cap
        caps = caps_of
        if not get or not _worth_polishing(m, get, v, side_is_input=False):
            return None
        try:
            costs = m.unit_costs([(i, y, caps[i]) for i, y in get.items()])
        except ValueError:
            return None
        pay = {i: now for i, (now, _) in zip(get, costs, strict=True)}
        ahead = [_unit_key(step, i) for i, (_, step) in zip(get, costs, strict=True) if step >= 0]
    try:
        spare = amount - sum(pay.values())
        gave_back = spare < 0
        if gave_back:
            # The contract rounds inputs up: give back the dearest units until it fits.
            back = [
                (in_for_out(i, y - 1) - pay[i] if y > 1 else -pay[i], i) for i, y in get.items()
            ]
            heapq.heapify(back)
            while spare < 0 and back:
                saving, i = heapq.heappop(back)
                spare -= saving
                pay[i] += saving
                get[i] -= 1
                y = get[i]
                if y == 0:
                    del get[i], pay[i]
                else:
                    heapq.heappush(back, (in_for_out(i, y - 1) - pay[i] if y > 1 else -pay[i], i))
            if not get:
                return None
        if not gave_back:
            heap = ahead
        else:  # units were given back: the next costs moved
            heap = [
                _unit_key(in_for_out(i, y + 1) - pay[i], i) for i, y in get.items() if y < caps[i]
            ]
        spare = _buy_cheapest_units(m, heap, pay, get, caps, spare)
    except ValueError:
        return None
    if spare and not heap:
        return None  # every pool is full: the input-first path tells what the pools can use
    if not _place_rest(m, pay, get, spare):
        return None  # it cannot be spent exactly within the limits: the input-first path
    order = sorted(pay)
    return order, list(map(pay.__getitem__, order)), list(map(get.__getitem__, order))


# --- one hop ---------------------------------------------------------------------------------


# A solution's legs as columns: model indices (ascending), inputs, outputs.
_LegColumns = tuple[Sequence[int], Sequence[int], Sequence[int]]


def _leg_columns(legs: Sequence[tuple[int, int, int]]) -> _LegColumns:
    """(pool, in, out) rows as `_LegColumns`."""
    return (list(map(_first, legs)), list(map(_second, legs)), list(map(_third, legs)))


@dataclass(frozen=True, slots=True)
class _Candidate:
    legs: _LegColumns
    value: float  # out minus byte cost (exact in) or −(in plus byte cost) (exact out)


_first, _second, _third = itemgetter(0), itemgetter(1), itemgetter(2)


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
        by_out = _exact_in_by_out(m, members, None, amount, v)
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


def _input_limit(pool: Pool, direction: Direction) -> int:
    """Most input a pool can hold at all (the 21e14 sats / 2^63−1 token limits, and for a
    sale a token amount whose output's dust threshold the pool's sats still cover)."""
    if direction is Direction.BUY:
        return MAX_SATS - pool.sats
    return sell_input_limit(pool.sats, pool.tokens)


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
                legs = _exchange_in(m, legs)
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
