"""The quote: what an order costs and pays once routed, with the router fee and the miner fee
estimate. Split from `route.py`, which only searches routes: this module prices them.

Router fee rounding: `floor(gross × bps / 10⁴)`; below the fee output's dust threshold (sats)
or below one token (token→token) no fee is charged and no fee output is made. Exact-out orders
pay the fee on top (`gross_for_net`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from itertools import chain

from bch.encoding import compact_size_len
from bch.policy import dust_threshold
from bch.script import p2pkh_locking
from bch.token import TokenData
from bch.tx import TxOutput
from router.book import EncodingColumns, PoolEncoding, encodings
from router.errors import route_failed
from router.params import QuoteRequest, RouterConfig, fee_rate_per_kb, miner_fee
from router.pools import BCH, PoolBook
from router.route import Columns, Direction, Hop, HopFootprint, Leg, solve_hop
from router.txsize import FUNDING_INPUT_WORST, max_pools_for, output_size

# --- router fee ------------------------------------------------------------------------------


def fee_on(gross: int, bps: int, minimum: int) -> int:
    """The router fee on `gross`: floor(gross·bps/10⁴), or 0 when that is below `minimum`
    (the fee output's dust threshold for sats, 1 for tokens): no fee output is made then."""
    fee = gross * bps // 10_000
    return fee if fee >= minimum else 0


def gross_for_net(net: int, bps: int, minimum: int) -> int:
    """Smallest gross with gross − fee_on(gross) == net (exact-out orders pay fee on top)."""
    if fee_on(net, bps, minimum) == 0:
        return net
    gross = net * 10_000 // (10_000 - bps)
    while gross - gross * bps // 10_000 < net:
        gross += 1
    while gross > net and (gross - 1) - (gross - 1) * bps // 10_000 >= net:
        gross -= 1
    return gross


@dataclass(frozen=True, slots=True)
class RouterFee:
    asset: str  # "bch" or the sold token's id
    amount: int  # sats or tokens; 0 when no fee is charged
    sats: int  # sats the fee output carries (the fee itself, or a token output's dust)
    bps: int


# The user's outputs are sized as P2PKH (a wallet's usual receive and change addresses), and
# so is the fee output when no fee address is set.
_P2PKH_SIZED = p2pkh_locking(bytes(20))


def _fee_output(config: RouterConfig, token: TokenData | None, sats: int) -> TxOutput:
    return TxOutput(sats, config.fee_locking or _P2PKH_SIZED, token)


@lru_cache(maxsize=64)
def _sats_fee_floor(fee_locking: bytes | None) -> int:
    """The dust threshold of a sats fee output to `fee_locking`: the least fee charged in
    sats. One per fee address, and every order asks."""
    return dust_threshold(TxOutput(0, fee_locking or _P2PKH_SIZED))


# --- the quote -------------------------------------------------------------------------------


class RouteKind(StrEnum):
    """The route object's `kind`: how the order crosses the pools."""

    SINGLE = "single"  # one pool (BCH↔token)
    SPLIT = "split"  # several pools of one token (BCH↔token)
    TWO_HOP = "two_hop"  # token→token: sell A for BCH in A's pools, buy B in B's pools


@dataclass(frozen=True, slots=True)
class Quote:
    """A priced route: what the user pays and gets, the legs, the fees and the state used."""

    request: QuoteRequest
    hops: tuple[Hop, ...]
    input_amount: int
    output_amount: int
    fee: RouterFee
    fee_per_byte: float
    size_estimate: int
    miner_fee_estimate: int
    snapshot_version: int | str | None
    index_height: int | None
    # The book's encodings of the pools `columns` lists, in order (what `build` and `wire` read).
    encodings: tuple[PoolEncoding, ...] = field(repr=False, compare=False)
    # Every hop's legs (and their columns) in order, joined once on first use.
    _legs: tuple[Leg, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _columns: Columns | None = field(default=None, init=False, repr=False, compare=False)
    _encoding_columns: EncodingColumns | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def pool_count(self) -> int:
        """Pools the route trades through (both hops'); the route object's `pools`."""
        hops = self.hops
        return hops[0].count() if len(hops) == 1 else sum(h.count() for h in hops)

    @property
    def kind(self) -> RouteKind:
        if len(self.hops) == 2:
            return RouteKind.TWO_HOP
        return RouteKind.SINGLE if self.hops[0].count() == 1 else RouteKind.SPLIT

    @property
    def legs(self) -> tuple[Leg, ...]:
        legs = self._legs
        if legs is None:
            hops = self.hops
            legs = hops[0].legs if len(hops) == 1 else tuple(leg for h in hops for leg in h.legs)
            object.__setattr__(self, "_legs", legs)
        return legs

    def columns(self) -> Columns:
        """Every hop's `Hop.columns` joined: (pools, sats after, tokens after) of `legs`. The
        builder, the gate and the JSON read these, so a route's `Leg` objects need not exist."""
        found = self._columns
        if found is None:
            hops = self.hops
            if len(hops) == 1:
                found = hops[0].columns()
            else:
                parts = [h.columns() for h in hops]
                found = (
                    tuple(chain.from_iterable(c[0] for c in parts)),
                    tuple(chain.from_iterable(c[1] for c in parts)),
                    tuple(chain.from_iterable(c[2] for c in parts)),
                )
            object.__setattr__(self, "_columns", found)
        return found

    def encoding_columns(self) -> EncodingColumns:
        """`encodings` as columns (`EncodingColumns`), made on first use."""
        found = self._encoding_columns
        if found is None:
            found = EncodingColumns.of_encodings(self.encodings)
            object.__setattr__(self, "_encoding_columns", found)
        return found

    def with_costs(self, size_estimate: int, miner_fee_estimate: int) -> Quote:
        """This quote with the size and miner fee of the transaction built from it
        (`dataclasses.replace`, without its per-call look at the fields)."""
        costed = Quote(
            self.request,
            self.hops,
            self.input_amount,
            self.output_amount,
            self.fee,
            self.fee_per_byte,
            size_estimate,
            miner_fee_estimate,
            self.snapshot_version,
            self.index_height,
            self.encodings,
        )
        # The same hops and encodings: what was made of them holds for the copy too.
        for made in ("_legs", "_columns", "_encoding_columns"):
            object.__setattr__(costed, made, getattr(self, made))
        return costed

    def prices(self) -> tuple[float, float]:
        """(pre, post): the best marginal price among the pools used, before and after.

        Sats per token base unit for BCH trades; for token→token, sold-token units per
        bought-token unit (the ratio of the two hops' prices).
        """
        pre: list[float] = []
        post: list[float] = []
        for hop in self.hops:
            pick = min if hop.direction is Direction.BUY else max
            pools, sats, tokens = hop.columns()
            pre.append(pick([pool.sats / pool.tokens for pool in pools]))
            post.append(pick([x / t for x, t in zip(sats, tokens, strict=True)]))
        if len(self.hops) == 2:  # sell A (hop 0) then buy B (hop 1)
            return pre[1] / pre[0], post[1] / post[0]
        return pre[0], post[0]


def _require_pools(book: PoolBook, token_id: str) -> None:
    if not book.pools(token_id):
        raise route_failed(f"no pools for token {token_id}", token_id=token_id)


def quote(
    book: PoolBook,
    request: QuoteRequest,
    config: RouterConfig,
    *,
    funding_inputs: int | None = None,
    max_pools: int | None = None,
    trace: list[HopFootprint] | None = None,
) -> Quote:
    """Route `request` over `book`. `funding_inputs` (default: 1, or 2 when selling a token)
    sizes the standard-size cap and the miner fee estimate; `max_pools` overrides the cap;
    `trace` collects each hop's footprint (see `footprints.footprint_holds`)."""
    sell, buy, amount, exact_in = request.sell, request.buy, request.amount, request.exact_in
    fee_per_byte = request.fee_per_byte or config.fee_per_byte
    if funding_inputs is None:
        funding_inputs = 1 if sell == BCH else 2
    cap = max_pools if max_pools is not None else max_pools_for(funding_inputs)
    bps = config.effective_fee_bps
    for asset in (sell, buy):
        if asset != BCH:
            _require_pools(book, asset)

    def hop(token: str, direction: Direction, n: int, exact: bool, limit: int) -> Hop:
        return solve_hop(
            book,
            token,
            direction,
            n,
            exact_in=exact,
            fee_per_byte=fee_per_byte,
            max_pools=limit,
            trace=trace,
        )

    sat_fee_min = _sats_fee_floor(config.fee_locking)
    fee_asset = BCH
    fee_tokens_category: bytes | None = None
    hops: tuple[Hop, ...]
    if sell == BCH:
        if exact_in:
            fee = fee_on(amount, bps, sat_fee_min)
            if amount - fee < 1:
                raise route_failed("the amount does not cover the router fee")
            hops = (hop(buy, Direction.BUY, amount - fee, True, cap),)
            gross, out = amount, hops[0].amount_out
        else:
            hops = (hop(buy, Direction.BUY, amount, False, cap),)
            gross = gross_for_net(hops[0].amount_in, bps, sat_fee_min)
            fee, out = gross - hops[0].amount_in, amount
    elif buy == BCH:
        if exact_in:
            hops = (hop(sell, Direction.SELL, amount, True, cap),)
            proceeds = hops[0].amount_out
            fee = fee_on(proceeds, bps, sat_fee_min)
            gross, out = amount, proceeds - fee
        else:
            proceeds = gross_for_net(amount, bps, sat_fee_min)
            hops = (hop(sell, Direction.SELL, proceeds, False, cap),)
            fee = proceeds - amount
            gross, out = hops[0].amount_in, amount
    else:
        fee_asset = sell
        fee_tokens_category = bytes.fromhex(sell)[::-1]
        if exact_in:
            fee = fee_on(amount, bps, 1)
            if amount - fee < 1:
                raise route_failed("the amount does not cover the router fee")
            first = hop(sell, Direction.SELL, amount - fee, True, cap - 1)
            if first.amount_out < 1:
                raise route_failed("the tokens sold fetch no sats to buy with")
            second = hop(buy, Direction.BUY, first.amount_out, True, cap - first.count())
            hops = (first, second)
            gross, out = amount, second.amount_out
        else:
            second = hop(buy, Direction.BUY, amount, False, cap - 1)
            first = hop(sell, Direction.SELL, second.amount_in, False, cap - second.count())
            hops = (first, second)
            gross = gross_for_net(first.amount_in, bps, 1)
            fee, out = gross - first.amount_in, amount
    if fee and fee_tokens_category is not None:
        token = TokenData(fee_tokens_category, fee)
        fee_sats = dust_threshold(_fee_output(config, token, 0))
    else:
        fee_sats = fee
    router_fee = RouterFee(fee_asset, fee, fee_sats, bps)
    # Sized as a wallet typically asks: token-aware P2PKH receive, P2PKH BCH change.
    user = len(_P2PKH_SIZED)
    outputs = [output_size(user, None if buy == BCH else max(1, out)), output_size(user)]
    if router_fee.amount:
        fee_locking = len(config.fee_locking or _P2PKH_SIZED)
        fee_tokens = None if fee_tokens_category is None else router_fee.amount
        outputs.append(output_size(fee_locking, fee_tokens))
    size = estimate_size(hops, funding_inputs, outputs)
    kb = fee_rate_per_kb(fee_per_byte)
    return Quote(
        request,
        hops,
        gross,
        out,
        router_fee,
        fee_per_byte,
        size,
        miner_fee(size, kb),
        book.version,
        book.height,
        encodings(book).of_hops(hops),
    )


def estimate_size(hops: Sequence[Hop], funding_inputs: int, outputs: Sequence[int]) -> int:
    """Worst-case signed size of the trade: its pools, `funding_inputs` P2PKH inputs (largest
    signature) and user-side outputs of the sizes `outputs`."""
    if len(hops) == 1:
        n_legs, pool_bytes = hops[0].count(), hops[0].pool_bytes
    else:
        n_legs, pool_bytes = sum(h.count() for h in hops), sum(h.pool_bytes for h in hops)
    return (
        8
        + compact_size_len(n_legs + funding_inputs)
        + compact_size_len(n_legs + len(outputs))
        + pool_bytes
        + funding_inputs * FUNDING_INPUT_WORST
        + sum(outputs)
    )
