"""The router's JSON: every reply, push and listing it writes, as pure functions from its typed
results (`Quote`, `BuildResult`, `Pool`, `RouterError`) to JSON bytes or JSON-ready dicts.

The `*_doc` functions are the plain forms (dicts); the `*_bytes` functions are what the daemon
sends and are held byte-equal to `orjson.dumps` of the plain forms (`tests/router/
test_columns_match_legs.py`, `test_templated.py`). A 350-leg reply would spend most of its time
building and walking per-leg dicts, so the bytes come from each pool's constant text, which the
book keeps per pool (`router.book.Encodings`): its `source_outputs` entry
(`source_output_bytes`) and its leg object with the numbers left as `%d` (`leg_templates`),
filled for a whole route by one `%`, or, where the kernels are compiled, the same text in its
pieces (`leg_pieces`) with the numbers written between them (`router.kernels.legs_text`).
Such long texts are copied once, into the reply's bytes, where orjson leaves a hole for them
(`_dumps_filled`).
"""

from __future__ import annotations

from binascii import hexlify
from collections.abc import Sequence
from operator import truediv
from typing import TYPE_CHECKING, Any, cast

import orjson

from bch.encoding import compact_size_len
from bch.tx import TxOutput
from protocols.cauldron.formulas import LP_FEE_DEN, LP_FEE_NUM, lp_fee
from router.errors import RouterError
from router.hop import Columns, Direction, Leg
from router.kernels import legs_text, lp_fees
from router.pools import BCH, Pool

if TYPE_CHECKING:
    from router.book import EncodingColumns
    from router.build import BuildResult
    from router.quotes import Quote, RouterFee


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


def leg_templates(pool: Pool) -> tuple[bytes, bytes]:
    """The pool's leg object as orjson writes `leg_doc`, buying and selling, with `%d` in place
    of its five numbers (amount_in, amount_out, lp_fee, sats_after, tokens_after): a route's
    legs are their pools' templates joined and filled by one `%` (`legs_json_bytes`). Ids are
    validated lowercase hex and the rest are integers, so nothing needs escaping and no `%`
    is in the constant text."""
    head = (
        f'{{"txid":"{pool.txid}","tx_pos":{pool.vout},"owner_pkh":"{pool.owner_pkh.hex()}",'
        f'"token_id":"{pool.token_id}","direction":"'
    )
    tail = (
        '","amount_in":"%d","amount_out":"%d","lp_fee":"%d",'
        f'"sats_before":"{pool.sats}","tokens_before":"{pool.tokens}",'
        '"sats_after":"%d","tokens_after":"%d"}'
    )
    return f"{head}buy{tail}".encode(), f"{head}sell{tail}".encode()


# The pieces between a leg's numbers that every pool's template shares: one object each, so
# writing a route's legs reads two pieces of each pool's own (its head, and the text around
# its state before) and these, which stay in cache.
_SHARED_PIECES = {
    piece: piece for piece in (b'","amount_out":"', b'","lp_fee":"', b'","tokens_after":"', b'"}')
}


def leg_pieces(template: bytes) -> tuple[bytes, ...]:
    """A `leg_templates` template's constant text between its numbers (six pieces), what the
    compiled `router.kernels.legs_text` writes the numbers between."""
    return tuple([_SHARED_PIECES.get(piece, piece) for piece in template.split(b"%d")])


def legs_json_bytes(
    columns: Columns,
    direction: Direction,
    encodings: EncodingColumns,
    amounts: tuple[Sequence[int], Sequence[int]] | None = None,
) -> tuple[bytes, float, float] | None:
    """The legs' JSON objects (`leg_doc`'s, as orjson writes them) joined by commas, when every
    leg trades in `direction`, and the prices `Quote.prices` takes from a hop of these legs
    (least pre- and post-trade sats per token buying, greatest selling). `encodings` are the
    pools' (their `leg_templates`, as columns); `amounts` (the hop's `Hop.amounts`, what the
    columns were made from) spares recomputing them. None when there are no legs or some leg
    goes the other way."""
    pools, sats, tokens = columns
    n = len(pools)
    if not n:
        return None
    ins: Sequence[int]
    outs: Sequence[int]
    buying = direction is Direction.BUY
    if amounts is not None:
        ins, outs = amounts
    elif buying:
        ins = [x - pool.sats for pool, x in zip(pools, sats, strict=True)]
        outs = [pool.tokens - t for pool, t in zip(pools, tokens, strict=True)]
    else:
        ins = [t - pool.tokens for pool, t in zip(pools, tokens, strict=True)]
        outs = [pool.sats - x for pool, x in zip(pools, sats, strict=True)]
    # Buying, a leg is a purchase when sats go in (`Leg.direction`); selling, when none do.
    if buying:
        if min(ins) < 1:
            return None
        templates, pieces = encodings.leg_buy, encodings.leg_buy_pieces
        sats_moved, pick = ins, min
    else:
        if min(outs) < 0:  # sats after above sats before
            return None
        templates, pieces = encodings.leg_sell, encodings.leg_sell_pieces
        sats_moved, pick = outs, max
    numbers: list[int] = [0] * (5 * n)  # leg by leg, in the templates' order
    numbers[0::5] = ins
    numbers[1::5] = outs
    numbers[2::5] = _lp_fees(sats_moved)
    numbers[3::5] = sats
    numbers[4::5] = tokens
    text = None if legs_text is None else legs_text(pieces, numbers)
    if text is None:  # interpreted, or a number past the compiled loop's integers
        text = b",".join(templates) % tuple(numbers)
    # The pre- and post-trade prices as `Quote.prices` takes them (a token-less pool raises
    # ZeroDivisionError there and here alike).
    prices = encodings.price
    # A token-less pool: the same division, raising as it does there. (Looked for by
    # identity: `None in prices` would compare it with each float.)
    if any(price is None for price in prices):
        pre = pick([pool.sats / pool.tokens for pool in pools])
    else:
        pre = pick(cast(tuple[float, ...], prices))
    return text, pre, pick(map(truediv, sats, tokens))


def _lp_fees(sats_moved: Sequence[int]) -> list[int]:
    """`lp_fee` of each leg: `moved × LP_FEE_NUM // LP_FEE_DEN` of its sats moved (≥ 0), by
    a compiled loop (`router.kernels`)."""
    return lp_fees(list(sats_moved), LP_FEE_NUM, LP_FEE_DEN)


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
    taken with them (`legs_json_bytes`): what the daemon sends."""
    route, legs = _route_spliced(q)
    return _dumps_filled(route, [] if legs is None else [legs])


# A JSON text holds no raw NUL byte (orjson writes one inside a string as an escape), so the
# only NULs in a document dumped with these fragments are theirs: `_dumps_filled` splits there.
_HOLE_ARRAY = orjson.Fragment(b"[\0]")
_HOLE_STRING = orjson.Fragment(b'"\0"')


def _dumps_filled(doc: Any, fills: Sequence[Sequence[bytes]]) -> bytes:
    """`orjson.dumps(doc)` with its holes (`_HOLE_ARRAY`, `_HOLE_STRING`), in order, filled
    with the bytes of `fills`: a reply's long texts (the legs, the transaction's hex, the
    source outputs) are copied once, into the reply, rather than through orjson's buffer."""
    pieces = orjson.dumps(doc).split(b"\0")
    parts = [pieces[0]]
    for fill, piece in zip(fills, pieces[1:], strict=True):
        parts += fill
        parts.append(piece)
    return b"".join(parts)


def _route_spliced(q: Quote) -> tuple[dict[str, Any], list[bytes] | None]:
    """`quote_doc(q)`, and the legs' text when they are written straight to JSON: the
    document then holds `_HOLE_ARRAY` where they go (`_dumps_filled`)."""
    texts: list[bytes] = []
    pre: list[float] = []
    post: list[float] = []
    start = 0
    encodings = q.encoding_columns()
    for hop in q.hops:
        columns = hop.columns()
        end = start + len(columns[0])
        part = encodings if len(q.hops) == 1 else encodings.part(start, end)
        made = legs_json_bytes(columns, hop.direction, part, hop.amounts())
        start = end
        if made is None:
            break  # no legs, or not all of them going the hop's way: the plain way below
        texts.append(made[0])
        pre.append(made[1])
        post.append(made[2])
    else:
        if len(texts) == 2:  # as `Quote.prices`: sell A (hop 0) then buy B (hop 1)
            prices = (pre[1] / pre[0], post[1] / post[0])
            return _route(q, _HOLE_ARRAY, prices), [texts[0], b",", texts[1]]
        if texts:  # (a quote has hops; otherwise the plain way below)
            return _route(q, _HOLE_ARRAY, (pre[0], post[0])), texts
    return _route(q, [leg_doc(leg) for leg in q.legs], q.prices()), None


def _route(q: Quote, legs: Any, prices: tuple[float, float]) -> dict[str, Any]:
    """The route object. `pools` is a count because that is what clients of the public
    Cauldron router read there; the per-pool detail is `legs`."""
    pre, post = prices
    sell, buy = q.request.sell, q.request.buy
    return {
        "sell": sell,
        "buy": buy,
        "side": q.request.side,  # (str enums: orjson writes their values)
        "kind": q.kind,
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
    return _build(result, result.tx.hex(), _sources_doc(result), quote_doc(result.route))


def build_bytes(result: BuildResult) -> bytes:
    """`orjson.dumps(build_doc(result))`, with the pools' inputs' hex and `source_outputs`
    entries spliced from the text the book keeps per pool and the route's legs written
    straight to JSON: what the daemon sends."""
    route, legs = _route_spliced(result.route)
    doc = _build(result, _HOLE_STRING, _HOLE_ARRAY, route)
    fills = [_tx_hex_parts(result), [_sources_bytes(result)]]
    if legs is not None:
        fills.append(legs)
    return _dumps_filled(doc, fills)


def _build(result: BuildResult, tx_hex: Any, sources: Any, route: Any) -> dict[str, Any]:
    return {
        "unsigned_tx_hex": tx_hex,
        "source_outputs": sources,
        "inputs_to_sign": list(result.inputs_to_sign),
        "expected_output": str(result.expected_output),
        "fee_sats": str(result.fee_sats),
        "fee_token_amount": str(result.fee_token_amount),
        "miner_fee_sats": str(result.miner_fee),
        "route": route,
    }


def _tx_hex_parts(result: BuildResult) -> list[bytes]:
    """`result.tx.hex()`, ASCII, in parts. The pools' inputs are most of a routed
    transaction's bytes and the same in every build while the pools stay, so when the
    transaction spends them first (what `build` makes) their hex comes from the book
    (`PoolEncoding.input_hex`)."""
    raw = result.tx.to_bytes()
    inputs = result.tx.inputs
    encodings = result.route.encoding_columns()
    n = len(encodings.trade_input)
    if not n or encodings.trade_input != tuple(inputs[:n]):
        return [hexlify(raw)]
    hexes = encodings.input_hex
    start = 4 + compact_size_len(len(inputs))  # after the version and the input count
    end = start + sum(map(len, hexes)) // 2
    view = memoryview(raw)
    return [hexlify(view[:start]), *hexes, hexlify(view[end:])]


def _sources_bytes(result: BuildResult) -> bytes:
    """The `source_outputs` entries, comma-separated (the array's brackets are the caller's)."""
    encodings = result.route.encoding_columns()
    n = len(encodings.source_output)
    sources = result.source_outputs
    if encodings.source_output == tuple(sources[:n]):
        # Every pool input spends the pool's own output (what `build` makes, the same
        # objects, so `==` answers by identity): its entry comes made.
        parts = list(encodings.source_json)
    else:
        parts = [
            made if o == own else source_output_bytes(o)
            for made, own, o in zip(
                encodings.source_json, encodings.source_output, sources, strict=False
            )
        ]
    parts += map(source_output_bytes, sources[n:])
    return b",".join(parts)


def _sources_doc(result: BuildResult) -> list[dict[str, Any]]:
    return [source_output_doc(o) for o in result.source_outputs]
