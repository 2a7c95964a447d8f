"""The router's per-leg integer loops, as plain typed functions over columns of Python
integers: the contract predicate over a route's legs, the liquidity providers' fees, the
polish's cheapest-unit purchases, a hop's pool states after the trade, and the legs' JSON text.

They are the loops a 350-leg build spends most of its interpreted time in, so `make` compiles
this module with mypyc (`scripts/compile_kernels.py`; `router.kernels` says which runs). It
imports nothing from the project, so mypyc compiles it on its own, and it holds only what
mypyc compiles to native loops: integers, lists and tuples indexed by position, no closures;
its constants are `Final`, which mypyc writes into the code (a plain module global is a
dictionary lookup at every read). The integers stay Python integers, of any size, compiled or
not, except the polish heap's keys, which are sifted as 64-bit integers while they fit; the
columns' lengths are checked up front, since a compiled loop does not stop at the shortest.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heapreplace
from typing import Final

from librt.strings import BytesWriter
from librt.vecs import append, pop, vec
from mypy_extensions import i64, u8

# The polish heap's entry is `cost << KEY_SHIFT | position` (`router.solve.model._unit_key`).
KEY_SHIFT: Final = 32
_KEY_POOL: Final = (1 << KEY_SHIFT) - 1


def _same_lengths(n: int, *others: int) -> None:
    for m in others:
        if m != n:
            raise ValueError(f"columns of {n} and {m} legs")


def predicate_holds(
    before_sats: tuple[int, ...],
    before_tokens: tuple[int, ...],
    after_sats: tuple[int, ...],
    after_tokens: tuple[int, ...],
    fee_num: int,
    fee_den: int,
) -> bool:
    """The contract predicate for every leg: (sats − fee)·tokens ≥ sats_before·tokens_before,
    fee = |Δsats|·fee_num // fee_den (`protocols.cauldron.formulas.is_valid_pool_transition`
    less its range checks)."""
    n = len(after_sats)
    _same_lengths(n, len(before_sats), len(before_tokens), len(after_tokens))
    for j in range(n):
        x0 = before_sats[j]
        x1 = after_sats[j]
        moved = x1 - x0 if x1 >= x0 else x0 - x1
        if (x1 - moved * fee_num // fee_den) * after_tokens[j] < x0 * before_tokens[j]:
            return False
    return True


def lp_fees(sats_moved: list[int], fee_num: int, fee_den: int) -> list[int]:
    """Each leg's liquidity providers' fee, `moved·fee_num // fee_den` of its sats moved."""
    return [moved * fee_num // fee_den for moved in sats_moved]


# A buying model's purchase columns per pool: k − 1, sats, tradable tokens, sats room
# (`router.solve.model._purchase_columns`).
Purchase = tuple[list[int], list[int], list[int], list[int]]


def buy_cheapest_units(
    heap: list[int],
    index: list[int],
    get: list[int],
    pay: list[int],
    spare: int,
    caps: list[int],
    in_for_out: Callable[[int, int], int],
    purchase: Purchase | None = None,
    fee_den: int = 1,
    keep: int = 1,
) -> int:
    """While the spare input covers it, buy the whole output unit that costs least: pop it
    from `heap` (entries `cost << KEY_SHIFT | position`), add it to `get` and its cost to
    `pay` at its position, and put that pool's next unit in its place (`in_for_out(pool,
    units)`: what `units` cost the model's pool `pool`) while the pool's cap allows one.
    `index` maps positions to model indices; returns the spare left, and leaves `heap` as
    `heapq` would.

    A model that buys tokens with sats passes its `purchase` columns and fee (`fee_den`, and
    `keep` of every `fee_den` sats paid in): the next unit is then priced inline, as
    `in_for_out` prices it, except near a pool's limits.

    The heap is sifted as 64-bit integers (`_sift_top`, `heapq`'s moves), which compiled is
    a fraction of what comparing Python integers costs; a key past 64 bits hands the rest
    to `buy_cheapest_units_boxed`. Interpreted, that one is the faster."""
    keys = vec[i64](capacity=len(heap))
    for key in heap:
        high = key >> 63  # 0 or −1 within 64 bits (a shift: no constant past 62 bits)
        if high != 0 and high != -1:
            return buy_cheapest_units_boxed(
                heap, index, get, pay, spare, caps, in_for_out, purchase, fee_den, keep
            )
        keys = append(keys, key)
    n: i64 = len(keys)
    while n:
        top = keys[0]
        cost: int = top >> KEY_SHIFT
        if cost > spare:
            break
        spare -= cost
        p: int = top & _KEY_POOL
        step = _buy_unit(p, cost, index, get, pay, caps, in_for_out, purchase, fee_den, keep)
        if step is None:  # the pool is full: `heappop`
            n -= 1
            keys, last = pop(keys)
            if n:
                _sift_top(keys, last)
        elif -_STEP_ROOM <= step < _STEP_ROOM:
            _sift_top(keys, step << KEY_SHIFT | p)
        else:  # a key past 64 bits: Python integers from here on
            heap[:] = keys
            heapreplace(heap, step << KEY_SHIFT | p)
            return buy_cheapest_units_boxed(
                heap, index, get, pay, spare, caps, in_for_out, purchase, fee_den, keep
            )
    heap[:] = keys
    return spare


def buy_cheapest_units_boxed(
    heap: list[int],
    index: list[int],
    get: list[int],
    pay: list[int],
    spare: int,
    caps: list[int],
    in_for_out: Callable[[int, int], int],
    purchase: Purchase | None = None,
    fee_den: int = 1,
    keep: int = 1,
) -> int:
    """`buy_cheapest_units` with `heapq` on Python integers, of any size."""
    while heap:
        key = heap[0]
        cost = key >> KEY_SHIFT
        if cost > spare:
            break
        spare -= cost
        p = key & _KEY_POOL
        step = _buy_unit(p, cost, index, get, pay, caps, in_for_out, purchase, fee_den, keep)
        if step is None:
            heappop(heap)
        else:
            # A pool has one entry at a time, so the keys stay distinct: one sift in place
            # of a pop and a push, the same order.
            heapreplace(heap, step << KEY_SHIFT | p)
    return spare


# A key `step << KEY_SHIFT | position` is within 64 bits for steps in ±2^31.
_STEP_ROOM: Final = 1 << (63 - KEY_SHIFT)


def _buy_unit(
    p: int,
    cost: int,
    index: list[int],
    get: list[int],
    pay: list[int],
    caps: list[int],
    in_for_out: Callable[[int, int], int],
    purchase: Purchase | None,
    fee_den: int,
    keep: int,
) -> int | None:
    """Buy position `p`'s next unit for `cost`; what the unit after it costs, or None when
    the pool's cap allows no more."""
    paid = pay[p] + cost
    pay[p] = paid
    y = get[p] + 1
    get[p] = y
    i = index[p]
    if y >= caps[i]:
        return None
    if purchase is not None:
        k_less, sats, t_ok, room = purchase
        rest = t_ok[i] - y - 1  # the tokens one more unit would leave
        if rest > 0:
            more = (k_less[i] // rest - sats[i]) * fee_den // keep + 1
            if more <= room[i]:
                return more - paid
    return in_for_out(i, y + 1) - paid


def _sift_top(heap: vec[i64], key: i64) -> None:
    """`heapq.heapreplace(heap, key)`, its moves on native integers (so the same order):
    down to a leaf along the lesser children, then back up to where `key` belongs."""
    n: i64 = len(heap)
    pos: i64 = 0
    child: i64 = 1
    while child < n:
        right = child + 1
        if right < n and not heap[child] < heap[right]:
            child = right
        heap[pos] = heap[child]
        pos = child
        child = 2 * pos + 1
    while pos > 0:
        parent = (pos - 1) >> 1
        above = heap[parent]
        if not key < above:
            break
        heap[pos] = above
        pos = parent
    heap[pos] = key


def legs_after(
    indices: list[int],
    paid: list[int],
    got: list[int],
    sats: list[int],
    tokens: list[int],
    buying: bool,
) -> tuple[list[int], list[int]]:
    """The legs' pools' sats and tokens after the trade: leg j trades with the pool at
    `indices[j]` of the columns `sats`, `tokens`, paying it `paid[j]` and taking `got[j]`
    (sats in and tokens out buying, tokens in and sats out selling)."""
    n = len(indices)
    _same_lengths(n, len(paid), len(got))
    sats_after: list[int] = []
    tokens_after: list[int] = []
    for j in range(n):
        i = indices[j]
        if buying:
            sats_after.append(sats[i] + paid[j])
            tokens_after.append(tokens[i] - got[j])
        else:
            sats_after.append(sats[i] - got[j])
            tokens_after.append(tokens[i] + paid[j])
    return sats_after, tokens_after


def count_above(values: list[int], top: int) -> int:
    """How many of `values` exceed `top`."""
    found = 0
    for value in values:
        if value > top:
            found += 1
    return found


# `legs_text` writes integers up to this itself (mypyc's untagged range, compared without a
# call); a route holding a larger one is left to `%`.
_SHORT: Final = (1 << 62) - 1
_NUMBERS_PER_LEG: Final = 5
_COMMA: Final = 44
_ZERO: Final = 48


def legs_text(pieces: tuple[tuple[bytes, ...], ...], numbers: list[int]) -> bytes | None:
    """The legs' JSON objects joined by commas: each leg's six constant pieces
    (`router.wire.leg_pieces`) with its five numbers written in decimal between them, as
    `b",".join(b"%d".join(p) for p in pieces) % tuple(numbers)` writes them. None when a
    number is negative or above 2^62 − 1 (the caller's `%` writes it). Compiled, this writes
    straight into one buffer: CPython's `%` spends about 500 instructions on each integer."""
    n = len(pieces)
    _same_lengths(_NUMBERS_PER_LEG * n, len(numbers))
    for value in numbers:
        if value < 0 or value > _SHORT:
            return None
    w = BytesWriter()
    at: i64 = 0
    for leg in pieces:
        if len(leg) != _NUMBERS_PER_LEG + 1:
            raise ValueError(f"a leg of {len(leg)} pieces")
        if at:
            w.append(u8(_COMMA))
        w.write(leg[0])
        k: i64 = 1
        while k <= _NUMBERS_PER_LEG:
            _write_decimal(w, numbers[at])
            w.write(leg[k])
            at += 1
            k += 1
    return w.getvalue()


def _write_decimal(w: BytesWriter, x: i64) -> None:
    """`x` ≥ 0 in decimal: its digits appended least significant first, then reversed in place
    (no temporary object, where writing them in order would need a division by a power of ten
    per digit)."""
    start: i64 = len(w)
    while x >= 10:
        q: i64 = x // 10
        w.append(u8(_ZERO + (x - q * 10)))
        x = q
    w.append(u8(_ZERO + x))
    end: i64 = len(w) - 1
    while start < end:
        first = w[start]
        w[start] = w[end]
        w[end] = first
        start += 1
        end -= 1
