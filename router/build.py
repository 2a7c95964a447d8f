"""`tx.build`: route the order on the current pools, choose the funding, assemble the unsigned
transaction and pass it through the safety gate.

Layout (cauldron.md): version 2, locktime 0; inputs are the pools (input i re-created as output
i, unlocked by the 69-byte redeem push) then the funding inputs; outputs are the pools, the
bought asset to `receive_addr`, token change, BCH change to `change_addr`, the router fee.

Funding rules:
- a funding input carrying an NFT, or tokens of a category the trade does not involve, is never
  spent (burning it would be valid by consensus, so only we can prevent it);
- when selling a token, the fewest inputs of that category that cover the amount are taken
  (if one input covers what is missing, the smallest such one), then plain BCH inputs the same
  way, and inputs carrying the traded tokens only if plain ones do not suffice;
- tokens of a spent input that the trade does not consume come back as token change;
- the miner fee is sized for the largest P2PKH signature (73-byte DER + sighash byte + 33-byte
  key), so the signed transaction pays at least the asked rate whatever the signer does;
- BCH change below its dust threshold is not created; it goes to the miner (the gate's overpay
  band allows exactly that much).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bch.encoding import compact_size_len
from bch.policy import MAX_STANDARD_TX_SIZE, dust_threshold
from bch.token import MAX_TOKEN_AMOUNT, TokenData
from bch.tx import TemplatedTransaction, Transaction, TxInput, TxOutput, hex_to_hash
from router import gate
from router.errors import bad_request, insufficient_funds, route_failed, slippage
from router.params import BuildRequest, FundingInput, RouterConfig, fee_rate_per_kb, miner_fee
from router.pools import BCH, PoolBook
from router.quotes import Quote, quote
from router.route import Direction, HopFootprint
from router.txsize import FUNDING_INPUT_WORST, P2PKH_UNLOCK_WORST


@dataclass(frozen=True, slots=True)
class BuildResult:
    tx: Transaction  # unsigned: funding inputs have empty unlocking bytecode
    source_outputs: tuple[TxOutput, ...]  # one per input, pools included
    inputs_to_sign: tuple[int, ...]
    expected_output: int
    fee_sats: int
    fee_token_amount: int
    miner_fee: int
    route: Quote


def _category(asset: str) -> bytes | None:
    return None if asset == BCH else hex_to_hash(asset)


def usable_funding(
    funding: Sequence[FundingInput], sold: bytes | None, bought: bytes | None
) -> tuple[list[FundingInput], list[int]]:
    """(inputs the trade may spend, request indices left out to protect their tokens)."""
    usable: list[FundingInput] = []
    left_out: list[int] = []
    for f in funding:
        token = f.token
        if token is not None and (token.nft is not None or token.category not in (sold, bought)):
            left_out.append(f.index)
        else:
            usable.append(f)
    return usable, left_out


def _token_amount(f: FundingInput) -> int:
    return f.token.amount if f.token is not None else 0


def _pick(
    candidates: list[FundingInput], deficit: int, amount_of: Callable[[FundingInput], int]
) -> FundingInput:
    """The smallest candidate covering `deficit` alone, else the largest (fewest inputs)."""
    covering = [f for f in candidates if amount_of(f) >= deficit]
    if covering:
        return min(covering, key=lambda f: (amount_of(f), f.index))
    return max(candidates, key=lambda f: (amount_of(f), -f.index))


class _Assembler:
    """Sizes and outputs of one routed order; funding selection asks it what a set needs."""

    def __init__(self, q: Quote, request: BuildRequest, config: RouterConfig) -> None:
        self.q = q
        self.request = request
        self.config = config
        self.kb = fee_rate_per_kb(q.fee_per_byte)
        self.sold = _category(q.request.sell)
        self.bought = _category(q.request.buy)
        self.pools, self.sats_after, self.tokens_after = q.columns()
        # Sats the pools gain (buying: what they are paid; selling: less what they pay out).
        self.pool_sats_in = sum(
            h.amount_in if h.direction is Direction.BUY else -h.amount_out for h in q.hops
        )
        self.pool_bytes = sum(h.pool_bytes for h in q.hops)
        self.fixed: list[TxOutput] = [self._bought_output()]
        self.fee_output = self._fee_output()
        self.change_template = TxOutput(0, request.change.locking)

    def _bought_output(self) -> TxOutput:
        receive = self.request.receive.locking
        amount = self.q.output_amount
        if self.bought is None:
            out = TxOutput(amount, receive)
            floor = dust_threshold(out)
            if amount < floor:
                raise route_failed(
                    f"the {amount} sats bought are below the {floor}-sat dust threshold of "
                    "the receive output",
                    output_amount=str(amount),
                    dust=floor,
                )
            return out
        token = TokenData(self.bought, amount)
        return TxOutput(dust_threshold(TxOutput(0, receive, token)), receive, token)

    def _fee_output(self) -> TxOutput | None:
        fee = self.q.fee
        locking = self.config.fee_locking
        if fee.amount == 0 or locking is None:
            return None
        if fee.asset == BCH:
            return TxOutput(fee.amount, locking)
        return TxOutput(fee.sats, locking, TokenData(hex_to_hash(fee.asset), fee.amount))

    def token_destination(self) -> bytes:
        """Token change goes to receive_addr, or change_addr, whichever is token-aware."""
        for dest in (self.request.receive, self.request.change):
            if dest.token_aware:
                return dest.locking
        raise bad_request(
            "the funding inputs leave token change, which needs a token-aware receive_addr "
            "or change_addr (z… or r…)"
        )

    def user_outputs(self, selected: Sequence[FundingInput]) -> list[TxOutput]:
        """The user-side outputs except BCH change, for this funding selection."""
        outputs = list(self.fixed)
        need_tokens = self.q.input_amount if self.sold is not None else 0
        change: dict[bytes, int] = {}
        for f in selected:
            if f.token is not None and f.token.amount:
                change[f.token.category] = change.get(f.token.category, 0) + f.token.amount
        if self.sold is not None:
            change[self.sold] = change.get(self.sold, 0) - need_tokens
        dest: bytes | None = None
        for category in (self.sold, self.bought):
            amount = change.get(category, 0) if category is not None else 0
            if amount > 0 and category is not None:
                dest = dest or self.token_destination()
                token = TokenData(category, amount)
                outputs.append(TxOutput(dust_threshold(TxOutput(0, dest, token)), dest, token))
        if self.fee_output is not None:
            outputs.append(self.fee_output)
        return outputs

    def size(self, n_funding: int, outputs: Sequence[TxOutput]) -> int:
        """Worst-case signed size."""
        n_in = len(self.pools) + n_funding
        n_out = len(self.pools) + len(outputs)
        return (
            8
            + compact_size_len(n_in)
            + compact_size_len(n_out)
            + self.pool_bytes
            + n_funding * FUNDING_INPUT_WORST
            + sum(o.size() for o in outputs)
        )

    def sats_needed(self, selected: Sequence[FundingInput]) -> int:
        """Sats the funding must bring without a change output."""
        outs = self.user_outputs(selected)
        size = self.size(len(selected), outs)
        return self.pool_sats_in + sum(o.value for o in outs) + miner_fee(size, self.kb)


def _select(asm: _Assembler, usable: list[FundingInput], left_out: list[int]) -> list[FundingInput]:
    selected: list[FundingInput] = []
    if asm.sold is not None:
        need = asm.q.input_amount
        holders = [f for f in usable if f.token is not None and f.token.category == asm.sold]
        have = 0
        while have < need and holders:
            pick = _pick(holders, need - have, _token_amount)
            holders.remove(pick)
            selected.append(pick)
            have += _token_amount(pick)
        if have < need:
            raise insufficient_funds(
                f"selling {need} tokens of {asm.q.request.sell} needs funding inputs holding "
                f"them; the usable ones hold {have}",
                need_tokens=str(need),
                have_tokens=str(have),
                left_out=left_out,
            )
    plain = [f for f in usable if f.token is None]
    tokened = [f for f in usable if f.token is not None and f not in selected]
    own_cost = miner_fee(FUNDING_INPUT_WORST, asm.kb)
    while True:
        have = sum(f.value for f in selected)
        need = asm.sats_needed(selected)
        if have >= need:
            return sorted(selected, key=lambda f: f.index)
        candidates = plain or tokened
        if not candidates:
            total = sum(f.value for f in usable)
            raise insufficient_funds(
                f"the trade needs about {need} sats from the funding inputs; the usable ones "
                f"hold {total}",
                need_sats=str(need),
                have_sats=str(total),
                left_out=left_out,
            )
        pick = _pick(candidates, need - have, lambda f: f.value - own_cost)
        candidates.remove(pick)
        selected.append(pick)


def _check_supply(q: Quote, selected: Sequence[FundingInput]) -> None:
    """No category exists beyond 2^63−1 tokens, pools and users together: coins claiming more
    next to the pools this trade spends cannot be real (and the transaction would be invalid
    by consensus), so the request is refused as a bad request, not built."""
    claimed: dict[bytes, list[FundingInput]] = {}
    for f in selected:
        if f.token is not None and f.token.amount:
            claimed.setdefault(f.token.category, []).append(f)
    if not claimed:
        return
    held: dict[bytes, int] = {}
    for pool, encoding in zip(q.columns()[0], q.encodings, strict=True):
        category = encoding.template.category
        held[category] = held.get(category, 0) + pool.tokens
    for category, coins in claimed.items():
        in_pools = held.get(category, 0)
        in_coins = sum(_token_amount(f) for f in coins)
        if in_pools + in_coins > MAX_TOKEN_AMOUNT:
            raise bad_request(
                f"funding {[f.index for f in coins]} hold {in_coins} tokens of "
                f"{category[::-1].hex()} and the pools this trade spends hold {in_pools}: "
                "together more than 2^63-1, which no token category can exceed",
                field="funding",
            )


def _refuse_spent_pools(book: PoolBook, q: Quote, usable: Sequence[FundingInput]) -> None:
    """`bad_request` when a funding input is the outpoint of a pool this trade spends. The
    legs' pools are the book's, so an outpoint no pool of the traded tokens has in the book
    is none of theirs; only one the book has is compared with the legs' outpoints."""
    tokens = [a for a in (q.request.sell, q.request.buy) if a != BCH]
    for f in usable:
        key = (f.outpoint.txid_hex, f.outpoint.index)
        for token in tokens:
            if book.find(token, key) is not None and f.outpoint in [
                e.trade_input.outpoint for e in q.encodings
            ]:
                raise bad_request(
                    f"funding[{f.index}] is pool {f.outpoint}, which this trade spends"
                )


def _assemble(
    asm: _Assembler, selected: Sequence[FundingInput]
) -> tuple[Transaction, tuple[TxOutput, ...]]:
    outputs = asm.user_outputs(selected)
    have = sum(f.value for f in selected)
    base = asm.pool_sats_in + sum(o.value for o in outputs)
    fee_without = miner_fee(asm.size(len(selected), outputs), asm.kb)
    with_change = [*outputs[:-1], asm.change_template, outputs[-1]]
    if asm.fee_output is None:
        with_change = [*outputs, asm.change_template]
    fee_with = miner_fee(asm.size(len(selected), with_change), asm.kb)
    change_value = have - base - fee_with
    if change_value >= dust_threshold(asm.change_template):
        change = TxOutput(change_value, asm.change_template.locking)
        outputs = [change if o is asm.change_template else o for o in with_change]
    elif have - base < fee_without:  # pragma: no cover - _select guarantees this
        raise insufficient_funds("the funding inputs do not cover the trade")
    pools = asm.q.encoding_columns()
    inputs = [*pools.trade_input, *[TxInput(f.outpoint) for f in selected]]
    sources = (*pools.source_output, *[f.output for f in selected])
    # The pools' outputs as their templates' bytes (no objects unless something asks);
    # serialized once, and size, hex and the gate reuse the bytes and the integers.
    tx = TemplatedTransaction(inputs, pools.template, asm.sats_after, asm.tokens_after, outputs)
    return tx, sources


def build(
    book: PoolBook,
    request: BuildRequest,
    config: RouterConfig,
    *,
    trace: list[HopFootprint] | None = None,
) -> BuildResult:
    """Route, fund, assemble and gate one `tx.build` request (RouterError on any failure).
    `trace` collects the footprint of every hop routed (see `footprints.footprint_holds`)."""
    req = request.quote
    sold, bought = _category(req.sell), _category(req.buy)
    usable, left_out = usable_funding(request.funding, sold, bought)
    if not usable:
        raise insufficient_funds(
            "no funding input can be spent: each carries an NFT or tokens of a category this "
            "trade does not involve (they are left out so their tokens are not burned)",
            left_out=left_out,
        )
    n_funding = 1 if sold is None else 2
    for _ in range(4):
        q = quote(book, req, config, funding_inputs=n_funding, trace=trace)
        if req.exact_in and request.min_output is not None and q.output_amount < request.min_output:
            raise slippage(
                f"the route delivers {q.output_amount}, below min_output {request.min_output}",
                expected_output=str(q.output_amount),
                min_output=str(request.min_output),
            )
        # A few funding inputs against hundreds of legs: each looked up in the book (by
        # bisection), and only a pool found there looked for among the legs.
        _refuse_spent_pools(book, q, usable)
        asm = _Assembler(q, request, config)
        selected = _select(asm, usable, left_out)
        _check_supply(q, selected)
        tx, sources = _assemble(asm, selected)
        worst = tx.size() + len(selected) * P2PKH_UNLOCK_WORST
        if worst <= MAX_STANDARD_TX_SIZE:
            break
        if len(selected) <= n_funding:  # pragma: no cover - the pool cap accounts for it
            raise route_failed(f"the transaction would be {worst} bytes, above the standard size")
        n_funding = len(selected)
    else:  # pragma: no cover - converges in two rounds
        raise route_failed("could not fit the trade and its funding in one standard transaction")
    n_pools = len(q.columns()[0])
    inputs_to_sign = tuple(range(n_pools, n_pools + len(selected)))
    fee_paid = gate.enforce(
        tx, sources, gate.Expectation.for_build(q, request, config, inputs_to_sign)
    )
    q = q.with_costs(worst, fee_paid)
    fee = q.fee
    return BuildResult(
        tx,
        sources,
        inputs_to_sign,
        q.output_amount,
        # A token fee's output carries dust sats, but those are not the router's fee: the
        # spec reports it in `fee_token_amount` alone, `fee_sats` "0".
        fee.amount if fee.asset == BCH else 0,
        fee.amount if fee.asset != BCH else 0,
        fee_paid,
        q,
    )
