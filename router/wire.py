"""The router's JSON: every reply, push and listing it writes, as pure functions from its typed
results (`Quote`, `BuildResult`, `Pool`, `RouterError`) to JSON bytes or JSON-ready dicts.

The `*_doc` functions are the plain forms (dicts); the `*_bytes` functions are what the daemon
sends and are held byte-equal to `orjson.dumps` of the plain forms (`tests/router/
test_columns_match_legs.py`, `test_templated.py`). A 350-leg reply would spend most of its time
building and walking per-leg dicts, so the bytes are spliced from each pool's constant pieces
(`leg_pieces`, `source_output_bytes`, which the book keeps per pool: `router.book.Encodings`)
around the legs' numbers, each column of numbers written by one orjson call.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter, floordiv, mul, sub, truediv
from typing import TYPE_CHECKING, Any

import orjson

from bch.tx import TxOutput
from protocols.cauldron.formulas import LP_FEE_DEN, LP_FEE_NUM, lp_fee
from router.errors import RouterError
from router.hop import Columns, Direction, Leg
from router.pools import BCH, Pool

if TYPE_CHECKING:
    from router.book import PoolEncoding
    from router.build import BuildResult
    from router.quotes import Quote, RouterFee

_sats_of = attrgetter("sats")
_tokens_of = attrgetter("tokens")
_leg_buy_of = attrgetter("leg_buy")
_leg_sell_of = attrgetter("leg_sell")
_leg_mid_of = attrgetter("leg_mid")
_source_json_of = attrgetter("source_json")
_source_output_of = attrgetter("source_output")


# --- daemon frames ---------------------------------------------------------------------------


def reply(req_id: Any, result: Any) -> bytes:
    """`{"id", "result"}` (`result` may hold `orjson.Fragment`s of bytes made here)."""
    return orjson.dumps({"id": req_id, "result": result})


def error_reply(req_id: Any, err: RouterError) -> bytes:
    """`{"id", "error": {"code", "message", "data"?}}`."""
    return orjson.dumps({"id": req_id, "error": err.to_json()})


def push(method: str, sub_id: str, body: bytes) -> bytes:
    """`{"method", "params": {"subscription": id, <body>}}`: `body` is a `result_member` or an
    `error_member`, made once for every subscriber of one order."""
    return (
        b'{"method":"'
        + method.encode()
        + b'","params":{"subscription":'
        + orjson.dumps(sub_id)
        + b","
        + body
        + b"}}"
    )


def result_member(result: bytes) -> bytes:
    """`"result":<result>`, a push's member for a routed order."""
    return b'"result":' + result


def error_member(err: RouterError) -> bytes:
    """`"error":{…}`, a push's member for an order that cannot be routed now."""
    return b'"error":' + orjson.dumps(err.to_json())


def canonical(doc: Any) -> bytes:
    """`doc` with sorted keys: equal documents give equal bytes (subscription grouping)."""
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)


# --- pools -----------------------------------------------------------------------------------


def pool_doc(pool: Pool) -> dict[str, Any]:
    """A pool as the pools file and the `ladle route` listing hold it."""
    return {
        "txid": pool.txid,
        "tx_pos": pool.vout,
        "owner_pkh": pool.owner_pkh.hex(),
        "token_id": pool.token_id,
        "sats": pool.sats,
        "tokens": str(pool.tokens),
    }


def source_output_doc(output: TxOutput) -> dict[str, Any]:
    """`{value, locking_script_hex, token?}`: enough to rebuild the spent output exactly."""
    entry: dict[str, Any] = {"value": str(output.value), "locking_script_hex": output.locking.hex()}
    if output.token is not None:
        entry["token"] = output.token.to_json()
    return entry


def source_output_bytes(output: TxOutput) -> bytes:
    """`source_output_doc` serialized."""
    return orjson.dumps(source_output_doc(output))


# --- legs ------------------------------------------------------------------------------------


def leg_doc(leg: Leg) -> dict[str, Any]:
    """One leg of a route object."""
    pool, after = leg.pool, leg.after
    if after.sats > pool.sats:  # buy: sats in, tokens out
        direction = "buy"
        amount_in, amount_out = after.sats - pool.sats, pool.tokens - after.tokens
    else:
        direction = "sell"
        amount_in, amount_out = after.tokens - pool.tokens, pool.sats - after.sats
    return {
        "txid": pool.txid,
        "tx_pos": pool.vout,
        "owner_pkh": pool.owner_pkh.hex(),
        "token_id": pool.token_id,
        "direction": direction,
        "amount_in": str(amount_in),
        "amount_out": str(amount_out),
        "lp_fee": str(lp_fee(pool.sats, after.sats)),
        "sats_before": str(pool.sats),
        "tokens_before": str(pool.tokens),
        "sats_after": str(after.sats),
        "tokens_after": str(after.tokens),
    }


def leg_pieces(pool: Pool) -> tuple[bytes, bytes, bytes]:
    """The pool's constant pieces of a leg's object as `columns_json_bytes` splices them: the
    opening up to `amount_in`'s value for a buying leg and for a selling one, and the piece
    from after `lp_fee`'s value up to `sats_after`'s. Ids are validated lowercase hex and the
    rest are integers, so nothing needs escaping."""
    head = (
        f'{{"txid":"{pool.txid}","tx_pos":{pool.vout},"owner_pkh":"{pool.owner_pkh.hex()}",'
        f'"token_id":"{pool.token_id}","direction":"'
    )
    middle = f'"sats_before":"{pool.sats}","tokens_before":"{pool.tokens}",'
    return (
        f'{head}buy","amount_in":"'.encode(),
        f'{head}sell","amount_in":"'.encode(),
        f'",{middle}"sats_after":"'.encode(),
    )


# A leg's JSON object in twelve pieces, the odd ones its numbers' digits and the separator:
# opening (the pool's `leg_pieces`, by direction), amount_in, these, amount_out, these,
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
    encodings: Sequence[PoolEncoding],
    amounts: tuple[Sequence[int], Sequence[int]] | None = None,
) -> tuple[list[bytes], float, float] | None:
    """The legs' JSON objects (`leg_doc`'s, as orjson writes them) when every leg trades in
    `direction`: their pieces, each object followed by b"," (b"".join of them, less the
    last comma, is the array's inside), and the prices `Quote.prices` takes from a hop of
    these legs (least pre- and post-trade sats per token buying, greatest selling).
    `encodings` are the pools' (`leg_pieces` among them). Every pass is C-level (maps, one
    orjson call per column of numbers, slice assignments): no Python step per leg. None when
    there are no legs or some leg goes the other way. `amounts` (the hop's `Hop.amounts`,
    what the columns were made from) spares recomputing them."""
    pools, sats, tokens = columns
    n = len(pools)
    if not n:
        return None
    buying = direction is Direction.BUY
    ins: Sequence[int]
    outs: Sequence[int]
    before = list(map(_sats_of, pools))
    held = list(map(_tokens_of, pools))
    if amounts is None:
        if buying:
            ins, outs = list(map(sub, sats, before)), list(map(sub, held, tokens))
        else:
            ins, outs = list(map(sub, tokens, held)), list(map(sub, before, sats))
    else:
        ins, outs = amounts
    # Buying, a leg is a purchase when sats go in (`Leg.direction`); selling, when none do.
    if buying:
        if min(ins) < 1:
            return None
        heads = list(map(_leg_buy_of, encodings))
        fees = ins
        pick = min
    else:
        if min(outs) < 0:  # sats after above sats before
            return None
        heads = list(map(_leg_sell_of, encodings))
        fees = outs
        pick = max
    fees = list(map(floordiv, map(mul, fees, repeat(LP_FEE_NUM)), repeat(LP_FEE_DEN)))
    parts = _LEG_PIECES * n
    parts[0::12] = heads
    parts[6::12] = map(_leg_mid_of, encodings)
    try:
        parts[1::12] = _digits(ins)
        parts[3::12] = _digits(outs)
        parts[5::12] = _digits(fees)
        parts[7::12] = _digits(sats)
        parts[9::12] = _digits(tokens)
    except orjson.JSONEncodeError:  # beyond 64 bits (no pool's): the plain way
        return None
    # The pre-trade prices as `Quote.prices` takes them (a token-less pool raises
    # ZeroDivisionError there and here alike).
    return parts, pick(map(truediv, before, held)), pick(map(truediv, sats, tokens))


# --- quotes ----------------------------------------------------------------------------------


def router_fee_doc(fee: RouterFee) -> dict[str, Any]:
    return {
        "asset": fee.asset,
        "amount": str(fee.amount),
        "sats": str(fee.sats),
        "bps": fee.bps,
    }


def quote_doc(q: Quote) -> dict[str, Any]:
    """The route object (`quote`'s result, `tx.build`'s `route`)."""
    return _route(q, [leg_doc(leg) for leg in q.legs], q.prices())


def quote_bytes(q: Quote) -> bytes:
    """`orjson.dumps(quote_doc(q))`, with the legs written straight to JSON and the prices
    taken with them (`columns_json_bytes`): what the daemon sends."""
    return orjson.dumps(_route_spliced(q))


def _route_spliced(q: Quote) -> dict[str, Any]:
    """`quote_doc(q)` with the legs as one `orjson.Fragment`, for a document that holds the
    quote (`build_bytes`): the legs' text is then copied once, into the document's bytes."""
    parts: list[bytes] = []
    pre: list[float] = []
    post: list[float] = []
    start = 0
    for hop in q.hops:
        columns = hop.columns()
        end = start + len(columns[0])
        made = columns_json_bytes(columns, hop.direction, q.encodings[start:end], hop.amounts())
        start = end
        if made is None:
            break  # no legs, or not all of them going the hop's way: the plain way below
        if parts:
            parts += made[0]
        else:  # the first hop's pieces (a fresh list) taken as they are
            parts = made[0]
        pre.append(made[1])
        post.append(made[2])
    else:
        if parts:  # (a quote has hops; otherwise the plain way below)
            parts[0] = b"[" + parts[0]  # the brackets on the end pieces: one join
            parts[-1] = b"]"  # the last object's separator
            legs = orjson.Fragment(b"".join(parts))
            if len(q.hops) == 2:  # as `Quote.prices`: sell A (hop 0) then buy B (hop 1)
                return _route(q, legs, (pre[1] / pre[0], post[1] / post[0]))
            return _route(q, legs, (pre[0], post[0]))
    return _route(q, [leg_doc(leg) for leg in q.legs], q.prices())


def _route(q: Quote, legs: Any, prices: tuple[float, float]) -> dict[str, Any]:
    """The route object. `pools` is a count because that is what clients of the public
    Cauldron router read there; the per-pool detail is `legs`."""
    pre, post = prices
    sell, buy = q.request.sell, q.request.buy
    return {
        "sell": sell,
        "buy": buy,
        "side": q.request.side.value,
        "kind": q.kind.value,
        "input_amount": str(q.input_amount),
        "output_amount": str(q.output_amount),
        "input_is_bch": sell == BCH,
        "output_is_bch": buy == BCH,
        "market_pre_price": pre,
        "market_post_price": post,
        "price_impact": abs(post - pre) / pre if pre > 0 else 0.0,
        "pools": q.pool_count,
        "legs": legs,
        "router_fee": router_fee_doc(q.fee),
        "fee_per_byte": q.fee_per_byte,
        "estimated_size": q.size_estimate,
        "miner_fee_estimate_sats": str(q.miner_fee_estimate),
        "snapshot_version": q.snapshot_version,
        "index_height": q.index_height,
    }


# --- tx.build --------------------------------------------------------------------------------


def build_doc(result: BuildResult) -> dict[str, Any]:
    """`tx.build`'s result."""
    return _build(result, _sources_doc(result), quote_doc(result.route))


def build_bytes(result: BuildResult) -> bytes:
    """`orjson.dumps(build_doc(result))`, with the pools' `source_outputs` entries spliced
    from the bytes the book keeps per pool and the route's legs written straight to JSON:
    what the daemon sends."""
    return orjson.dumps(
        _build(result, orjson.Fragment(_sources_bytes(result)), _route_spliced(result.route))
    )


def _build(result: BuildResult, sources: Any, route: Any) -> dict[str, Any]:
    return {
        "unsigned_tx_hex": result.tx.hex(),
        "source_outputs": sources,
        "inputs_to_sign": list(result.inputs_to_sign),
        "expected_output": str(result.expected_output),
        "fee_sats": str(result.fee_sats),
        "fee_token_amount": str(result.fee_token_amount),
        "miner_fee_sats": str(result.miner_fee),
        "route": route,
    }


def _sources_bytes(result: BuildResult) -> bytes:
    encodings = result.route.encodings
    n = len(encodings)
    sources = result.source_outputs
    if list(map(_source_output_of, encodings)) == list(sources[:n]):
        # Every pool input spends the pool's own output (what `build` makes, the same
        # objects, so `==` answers by identity): its entry comes made, one C-level map.
        parts = list(map(_source_json_of, encodings))
    else:
        parts = [
            e.source_json if o == e.source_output else source_output_bytes(o)
            for e, o in zip(encodings, sources, strict=False)
        ]
    parts += map(source_output_bytes, sources[n:])
    if not parts:
        return b"[]"
    parts[0] = b"[" + parts[0]  # the brackets on the end parts: one join, no copies
    parts[-1] += b"]"
    return b",".join(parts)


def _sources_doc(result: BuildResult) -> list[dict[str, Any]]:
    return [source_output_doc(o) for o in result.source_outputs]
