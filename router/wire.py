"""The router's JSON: a route's legs as the daemon writes them.

A 350-leg reply would spend most of its time building and walking per-leg dicts, so the legs
are written from each pool's constant pieces (`Pool.leg_json_parts`, `Pool.leg_json_bytes`)
around the leg's numbers; `Leg.to_json` is the plain form they are held equal to
(`tests/router/test_columns_match_legs.py`, `test_templated.py`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter, floordiv, mul, sub, truediv

import orjson

from protocols.cauldron.formulas import LP_FEE_DEN, LP_FEE_NUM
from router.route import Columns, Direction, Leg

_INF = math.inf
_pool_of = attrgetter("pool")
_after_of = attrgetter("after")
_sats_of = attrgetter("sats")
_tokens_of = attrgetter("tokens")
_leg_buy_of = attrgetter("_leg_buy")
_leg_sell_of = attrgetter("_leg_sell")
_leg_mid_of = attrgetter("_leg_mid")
_leg_price_of = attrgetter("_leg_price")  # sats / tokens, made with them


def legs_json(legs: Sequence[Leg]) -> str:
    """`[leg.to_json() for leg in legs]` as orjson writes it, made from each pool's constant
    pieces (`Pool.leg_json_parts`) and the leg's five numbers: a 350-leg reply spends most of
    its JSON time building and walking those dicts (`test_fast_paths` holds the bytes equal)."""
    return "[" + ",".join(legs_json_parts(legs)[0]) + "]"


def legs_json_parts(
    legs: Sequence[Leg],
) -> tuple[list[str], tuple[Direction, float, float] | None]:
    """`columns_json_parts` of these legs."""
    afters = list(map(_after_of, legs))
    return columns_json_parts(
        (tuple(map(_pool_of, legs)), tuple(map(_sats_of, afters)), tuple(map(_tokens_of, afters)))
    )


def columns_json_parts(
    columns: Columns,
) -> tuple[list[str], tuple[Direction, float, float] | None]:
    """Each leg's JSON object (`legs_json`), and in the same pass the prices `Quote.prices`
    takes from a hop of these legs: (BUY, least pre-trade, least post-trade sats per token)
    when every leg buys, (SELL, greatest, greatest) when every leg sells; None when they are
    mixed (or there are none). The same quotients, so the same floats."""
    parts: list[str] = []
    add = parts.append
    inf = _INF
    buy_pre = buy_post = inf
    sell_pre = sell_post = -inf
    for pool, sats, tokens in zip(*columns, strict=True):
        head, mid = pool._leg_json or pool.leg_json_parts  # the slot, made on first use
        before = pool.sats
        pre = before / pool.tokens
        post = sats / tokens
        if sats > before:  # buy: sats in, tokens out
            if pre < buy_pre:
                buy_pre = pre
            if post < buy_post:
                buy_post = post
            paid = sats - before
            add(
                f'{head}buy","amount_in":"{paid}","amount_out":"{pool.tokens - tokens}",'
                f'"lp_fee":"{paid * LP_FEE_NUM // LP_FEE_DEN}",{mid}'
                f'"sats_after":"{sats}","tokens_after":"{tokens}"}}'
            )
        else:
            if pre > sell_pre:
                sell_pre = pre
            if post > sell_post:
                sell_post = post
            taken = before - sats
            add(
                f'{head}sell","amount_in":"{tokens - pool.tokens}","amount_out":"{taken}",'
                f'"lp_fee":"{taken * LP_FEE_NUM // LP_FEE_DEN}",{mid}'
                f'"sats_after":"{sats}","tokens_after":"{tokens}"}}'
            )
    if buy_pre < inf and sell_pre == -inf:
        return parts, (Direction.BUY, buy_pre, buy_post)
    if sell_pre > -inf and buy_pre == inf:
        return parts, (Direction.SELL, sell_pre, sell_post)
    return parts, None


# A leg's JSON object in twelve pieces, the odd ones its numbers' digits and the separator:
# opening (the pool's `leg_json_bytes`, by direction), amount_in, these, amount_out, these,
# lp_fee, the middle (the pool's), sats_after, these, tokens_after, these, "," (or "]").
_LEG_PIECES = [
    b"",
    b"",
    b'","amount_out":"',
    b"",
    b'","lp_fee":"',
    b"",
    b"",
    b"",
    b'","tokens_after":"',
    b"",
    b'"}',
    b",",
]


def _digits(numbers: Sequence[int]) -> list[bytes]:
    """Each integer's decimal digits, as `str` writes them: orjson writes the list in one C
    call (a third of the cost of `str` on each), then one split."""
    return orjson.dumps(numbers)[1:-1].split(b",")


def columns_json_bytes(
    columns: Columns,
    direction: Direction,
    amounts: tuple[Sequence[int], Sequence[int]] | None = None,
) -> tuple[list[bytes], float, float] | None:
    """The legs' JSON objects (`columns_json_parts`, as bytes) when every leg trades in
    `direction`: their pieces, each object followed by b"," (b"".join of them, less the
    last comma, is the array's inside), and the prices `columns_json_parts` gives (least
    pre- and post-trade sats per token buying, greatest selling). Every pass is C-level
    (maps, one orjson call per column of numbers, slice assignments): no Python step per
    leg. None when there are no legs or some leg goes the other way. `amounts` (the hop's
    `Hop.amounts`, what the columns were made from) spares recomputing them."""
    pools, sats, tokens = columns
    n = len(pools)
    if not n:
        return None
    mids = list(map(_leg_mid_of, pools))
    if not all(mids):  # not made yet for some pool (None; the pieces are never empty)
        mids = [pool.leg_json_bytes[2] for pool in pools]
    buying = direction is Direction.BUY
    ins: Sequence[int]
    outs: Sequence[int]
    if amounts is None:
        before = list(map(_sats_of, pools))
        held = list(map(_tokens_of, pools))
        if buying:
            ins, outs = list(map(sub, sats, before)), list(map(sub, held, tokens))
        else:
            ins, outs = list(map(sub, tokens, held)), list(map(sub, before, sats))
    else:
        ins, outs = amounts
    # Buying, a leg is a purchase when sats go in (`columns_json_parts`); selling, when none do.
    if buying:
        if min(ins) < 1:
            return None
        heads = list(map(_leg_buy_of, pools))
        fees = ins
        pick = min
    else:
        if min(outs) < 0:  # sats after above sats before
            return None
        heads = list(map(_leg_sell_of, pools))
        fees = outs
        pick = max
    fees = list(map(floordiv, map(mul, fees, repeat(LP_FEE_NUM)), repeat(LP_FEE_DEN)))
    parts = _LEG_PIECES * n
    parts[0::12] = heads
    parts[6::12] = mids
    try:
        parts[1::12] = _digits(ins)
        parts[3::12] = _digits(outs)
        parts[5::12] = _digits(fees)
        parts[7::12] = _digits(sats)
        parts[9::12] = _digits(tokens)
    except orjson.JSONEncodeError:  # beyond 64 bits (no pool's): `columns_json_parts`
        return None
    return parts, pick(map(_leg_price_of, pools)), pick(map(truediv, sats, tokens))
