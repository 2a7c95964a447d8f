"""The safety gate: the last check before a built transaction leaves the router.

It re-derives everything from the transaction and the spent outputs, against what the request
and the route promised, so a bug anywhere upstream (route search, funding, assembly) turns into
a logged `build_failed` instead of a transaction that loses a user's money. Checks:

- layout: version 2, locktime 0, pools first (input i ↔ output i, 69-byte redeem push);
- every pool transition is exactly the route's and satisfies the contract predicate, keeping
  ≥ 1 token and at least the dust threshold of the re-created output (`pools.pool_reserve`);
- every token category is conserved (inputs = outputs), no NFT is touched;
- funding inputs are exactly `inputs_to_sign`, P2PKH, unsigned, of allowed categories;
- the bought asset goes to `receive_addr`; every other non-pool output goes to `receive_addr`,
  `change_addr` or the fee address (nothing of the user's anywhere else), and tokens only to
  one of them that is token-aware;
- the router fee output is present, exactly once and exact, iff a fee is charged;
- no output is dust or has an empty locking bytecode; BCHN standardness (`bch.policy`) holds
  for the worst-case signed transaction;
- the miner fee is at least 1 sat/byte and at least the asked rate of the worst-case signed
  size, and at most `overpay_band` above the asked rate: the only planned overpayment is BCH
  change too small to be an output (below its dust threshold plus its own bytes).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple, cast

from bch.encoding import compact_size
from bch.policy import (
    MIN_RELAY_FEE_PER_KB,
    dust_threshold,
    input_standardness_errors,
    min_relay_fee,
    standardness_errors,
)
from bch.script import ScriptKind, classify_locking, push_data
from bch.token import MAX_TOKEN_AMOUNT, PREFIX_TOKEN, TokenData
from bch.tx import MAX_SATS, TemplatedTransaction, Transaction, TxInput, TxOutput, hex_to_hash
from protocols.cauldron.formulas import LP_FEE_DEN, LP_FEE_NUM, PoolState, is_valid_pool_transition
from router.book import EncodingColumns
from router.errors import build_failed
from router.kernels import predicate_holds
from router.params import BuildRequest, RouterConfig, fee_rate_per_kb, miner_fee
from router.pools import BCH, RESERVE_STEPS, Pool, pool_reserve
from router.quotes import Quote
from router.route import Columns
from router.txsize import P2PKH_UNLOCK_WORST

log = logging.getLogger("ladle.router.gate")

_TOKEN_PREFIX = bytes((PREFIX_TOKEN,))
_INDEX_ZERO = bytes(4)  # an outpoint's index 0 on the wire
_PLACEHOLDER_UNLOCK = push_data(bytes(74)) + push_data(bytes(33))
_MOST_RESERVE = max(reserve for _, reserve in RESERVE_STEPS)  # 705 sats
assert len(_PLACEHOLDER_UNLOCK) == P2PKH_UNLOCK_WORST


@dataclass(frozen=True, slots=True)
class Expectation:
    """What the request and the route promise; the gate holds the transaction to it."""

    routed: Columns  # the route's pools and their (sats, tokens) after it (`Quote.columns`)
    encodings: EncodingColumns  # the book's encodings of those pools (`Quote`), as columns
    receive: bytes
    change: bytes
    token_aware: frozenset[bytes]  # the user's addresses (lockings) that may receive tokens
    categories: frozenset[bytes]  # token categories the trade involves (wire order)
    bought_category: bytes | None  # None: BCH
    expected_output: int
    fee_locking: bytes | None
    fee_output: TxOutput | None  # the exact router fee output, None when no fee is charged
    fee_per_kb: int
    inputs_to_sign: tuple[int, ...]

    @classmethod
    def for_build(
        cls,
        q: Quote,
        request: BuildRequest,
        config: RouterConfig,
        inputs_to_sign: tuple[int, ...],
    ) -> Expectation:
        sell, buy = q.request.sell, q.request.buy
        categories = frozenset(hex_to_hash(a) for a in (sell, buy) if a != BCH)
        fee_locking = config.fee_locking
        fee_output = None
        if q.fee.amount and fee_locking is not None:
            if q.fee.asset == BCH:
                fee_output = TxOutput(q.fee.amount, fee_locking)
            else:
                fee_output = TxOutput(
                    q.fee.sats, fee_locking, TokenData(hex_to_hash(q.fee.asset), q.fee.amount)
                )
        return cls(
            q.columns(),
            q.encoding_columns(),
            request.receive.locking,
            request.change.locking,
            frozenset(d.locking for d in (request.receive, request.change) if d.token_aware),
            categories,
            None if buy == BCH else hex_to_hash(buy),
            q.output_amount,
            fee_locking,
            fee_output,
            fee_rate_per_kb(q.fee_per_byte),
            inputs_to_sign,
        )

    def overpay_band(self) -> int:
        """Sats the miner may get above the asked rate: a change output's dust threshold plus
        the fee for its own bytes (change smaller than that is not worth an output)."""
        change = TxOutput(0, self.change)
        return dust_threshold(change) + miner_fee(change.size(), self.fee_per_kb)


def worst_case_signed(tx: Transaction, inputs_to_sign: Sequence[int]) -> Transaction:
    """`tx` with each funding input unlocked by a placeholder of the largest P2PKH size.

    The bytes are `tx`'s with the signed inputs' span replaced (the funding inputs come after
    hundreds of pools, whose bytes need not be joined again); `test_gate` holds them equal to
    the whole transaction serialized afresh."""
    if isinstance(tx, TemplatedTransaction) and min(inputs_to_sign, default=0) >= 0:
        # Its outputs' bytes reused, never made into objects.
        return tx.with_unlocking(dict.fromkeys(inputs_to_sign, _PLACEHOLDER_UNLOCK))
    inputs = list(tx.inputs)
    for i in inputs_to_sign:
        inputs[i] = TxInput(inputs[i].outpoint, _PLACEHOLDER_UNLOCK, inputs[i].sequence)
    signed = Transaction(tx.version, tuple(inputs), tx.outputs, tx.locktime)
    if not inputs_to_sign or min(inputs_to_sign) < 0:
        return Transaction(tx.version, signed.inputs, tx.outputs, tx.locktime, signed.to_bytes())
    first, last = min(inputs_to_sign), max(inputs_to_sign) + 1
    raw = tx.to_bytes()
    old = tx.inputs
    start = len(compact_size(len(old))) + 4 + sum(map(len, map(_encoded, old[:first])))
    end = start + sum(map(len, map(_encoded, old[first:last])))
    middle = b"".join(map(_encoded, inputs[first:last]))
    return Transaction(
        tx.version, signed.inputs, tx.outputs, tx.locktime, raw[:start] + middle + raw[end:]
    )


_encoded = TxInput.encode
_TOKEN_OF = attrgetter("token")


def _token_totals(
    outputs: Sequence[TxOutput], side: str, found: list[str], start: int = 0
) -> dict[bytes, int]:
    """Fungible amounts per category; any NFT, or a 0xef-led bytecode without token data (a
    malformed prefix), is a problem: the router never moves either. `outputs[0]` is the
    side's output (or input) number `start`."""
    tokens = [o.token for o in outputs]
    present = [t for t in tokens if t is not None]
    with_nft = [t for t in present if t.nft is not None]
    if present and not with_nft:
        # One category and no NFT (a router's pools, the bought tokens, BCH beside them):
        # one sum, and only the token-less outputs looked at for a malformed prefix.
        categories = [t.category for t in present]
        first = categories[0]
        if categories.count(first) == len(categories):
            for j in [j for j, token in enumerate(tokens) if token is None]:
                if outputs[j].locking[:1] == _TOKEN_PREFIX:
                    found.append(
                        f"{side} {start + j}: bytecode starts with 0xef but carries no token data"
                    )
            return {first: sum([t.amount for t in present])}
    totals: dict[bytes, int] = {}
    get = totals.get
    for j, o in enumerate(outputs, start):
        token = o.token
        if token is None:
            if o.locking[:1] == _TOKEN_PREFIX:
                found.append(f"{side} {j}: bytecode starts with 0xef but carries no token data")
            continue
        if token.nft is not None:
            found.append(f"{side} {j} carries an NFT, which the router never moves")
        category = token.category
        totals[category] = get(category, 0) + token.amount
    return totals


def _after_first(category: bytes, amount: int, rest: dict[bytes, int]) -> dict[bytes, int]:
    """Totals of a first part holding `amount` of one category, then `rest`'s (the key order
    a tally of the whole side would give)."""
    totals = {category: amount}
    for key, value in rest.items():
        totals[key] = totals.get(key, 0) + value
    return totals


def token_problems(tx: Transaction, source_outputs: Sequence[TxOutput]) -> list[str]:
    """The token rules in one pass over each side: fungible totals equal per category (nothing
    burned, minted or moved between categories), no NFT anywhere, no input total above
    2^63−1, and no category this transaction could create (an input spending output 0 of the
    category's txid). Together these imply BCHN's `CheckTxTokens` (`bch.policy.
    token_balance_errors`) passes and `token_burns` is empty, which the tests check."""
    return _token_problems(tx, source_outputs, None)


def _token_problems(
    tx: Transaction, source_outputs: Sequence[TxOutput], pools: _PoolPart | None
) -> list[str]:
    """`token_problems`. With `pools` (what `_templated_pools_clean` accepted: `tx` is
    templated, its first inputs spend these pools' own outputs, each holding ≥ 1 token, and
    its first outputs are their templates), when the templates share one category, each
    side's pool part is that category's sum of the pools' amounts (inputs) and of the
    templated amounts (outputs): fungible, no NFT, no bare 0xef prefix. The other inputs and
    outputs are tallied one by one, as without `pools`."""
    found: list[str] = []
    n = len(pools.pools) if pools is not None else 0
    category = None
    if pools is not None and n and isinstance(tx, TemplatedTransaction):
        categories = {template.category for template in tx.templates}
        if len(categories) == 1:
            category = categories.pop()
    if category is not None and pools is not None and isinstance(tx, TemplatedTransaction):
        rest_in = _token_totals(source_outputs[n:], "input", found, n)
        inputs = _after_first(category, pools.tokens_in, rest_in)
        rest_out = _token_totals(tx.rest, "output", found, n)
        outputs = _after_first(category, pools.tokens_out, rest_out)
    else:
        inputs = _token_totals(source_outputs, "input", found)
        outputs = _token_totals(tx.outputs, "output", found)
    if inputs != outputs:
        found.append(f"token totals differ: inputs {inputs}, outputs {outputs}")
    for category, amount in inputs.items():
        if amount > MAX_TOKEN_AMOUNT:
            found.append(f"inputs of category {category[::-1].hex()} sum above 2^63-1")
    # A category is its genesis input's txid. An input spending output 0 of a category's txid
    # has txid ‖ index 0 in the transaction's bytes: where those 36 bytes occur nowhere, no
    # input spends it, and only a category they occur for is looked for input by input.
    raw = tx.to_bytes()
    if any(category + _INDEX_ZERO in raw for category in inputs.keys() | outputs.keys()):
        for txin in tx.inputs:
            outpoint = txin.outpoint
            if outpoint.index == 0 and (outpoint.txid in inputs or outpoint.txid in outputs):
                found.append(
                    f"category {outpoint.txid[::-1].hex()} could be created by this transaction"
                )
    return found


def output_total(tx: Transaction) -> int:
    """Sats of every output (a templated transaction's from its integers)."""
    if isinstance(tx, TemplatedTransaction):
        return tx.output_value()
    return sum([o.value for o in tx.outputs])


class _PoolPart(NamedTuple):
    """The pool part of a transaction `_templated_pools_clean` accepted."""

    pools: Sequence[Pool]
    sats_in: int  # the pools' sats before the trade: what the pool inputs spend
    tokens_in: int  # and their tokens
    sats_out: int  # what the pool outputs hold after it
    tokens_out: int


def _templated_pools_clean(
    tx: TemplatedTransaction,
    source_outputs: Sequence[TxOutput],
    routed: Columns,
    encodings: EncodingColumns,
) -> _PoolPart | None:
    """The legs' pools and what they held when the pool checks of `problems` have nothing to
    report about `tx` (else None: the caller runs them one by one on `tx.outputs`), decided
    column by column:
    encoding i is routed pool i's, input i is pool i's own trade input and spends pool i's own
    output, output i is pool i's
    own template (its bytecode and category, no NFT) filled with exactly the leg's state
    (all as its `encodings` hold them, which are standard on their own: `PoolEncoding.
    standard`), and that state passes the contract predicate and keeps ≥ 1 token and the
    reserve."""
    pools, sats_after, tokens_after = routed
    n = len(pools)
    if tx.values != sats_after or tx.amounts != tokens_after or len(encodings.pool) != n:
        return None  # not exactly the routed states
    if not n:
        return _PoolPart(pools, 0, 0, 0, 0)
    # Each column against the encodings' (a tuple compares its items by identity first: the
    # same objects, made once per pool). Equal objects hold the same values, and so encode
    # the same pools and bytes.
    if (
        encodings.pool != tuple(pools)  # (the encodings stand for the routed pools only then)
        or tx.inputs[:n] != encodings.trade_input
        or tuple(source_outputs[:n]) != encodings.source_output
        or tx.templates != encodings.template
        or not all(encodings.standard)
        or not all(map(_TOKEN_OF, source_outputs[:n]))  # a token-less pool: no template
    ):
        return None
    # What the pool inputs spend: each its pool's `source_output`, which the book made from
    # the pool's state (`router.book.encode`), kept beside it in the encoding.
    before_sats, before_tokens = encodings.sats, encodings.tokens
    if min(tokens_after) < 1 or (
        min(sats_after) < _MOST_RESERVE  # no reserve exceeds the widest
        and any(
            sats < pool_reserve(tokens)
            for sats, tokens in zip(sats_after, tokens_after, strict=True)
        )
    ):
        return None  # a token-less pool output, or a pool left below its reserve
    # Every part positive now, so a sum within a limit has no part above it: a maximum is
    # only looked for when a sum is above it.
    sats_out, tokens_out = sum(sats_after), sum(tokens_after)
    if (sats_out > MAX_SATS and max(sats_after) > MAX_SATS) or (
        tokens_out > MAX_TOKEN_AMOUNT and max(tokens_after) > MAX_TOKEN_AMOUNT
    ):
        return None  # an amount no output holds
    # (`tx.values` and `tx.amounts` are the states after, as tuples: checked equal above.)
    if not _predicate_holds(before_sats, before_tokens, tx.values, tx.amounts):
        return None
    return _PoolPart(pools, sum(before_sats), sum(before_tokens), sats_out, tokens_out)


def _predicate_holds(
    before_sats: Sequence[int],
    before_tokens: Sequence[int],
    after_sats: Sequence[int],
    after_tokens: Sequence[int],
) -> bool:
    """The contract predicate for every leg (`is_valid_pool_transition` less its range checks,
    which the caller makes): (sats − fee)·tokens ≥ sats_before·tokens_before, fee =
    |Δsats|·3 // 1000. A compiled loop (`router.kernels`); `tuple` of a tuple is itself."""
    return predicate_holds(
        tuple(before_sats),
        tuple(before_tokens),
        tuple(after_sats),
        tuple(after_tokens),
        LP_FEE_NUM,
        LP_FEE_DEN,
    )


def problems(tx: Transaction, source_outputs: Sequence[TxOutput], exp: Expectation) -> list[str]:
    """Every reason `tx` must not leave the router (empty: it may)."""
    return _checked(tx, source_outputs, exp)[0]


def _checked(
    tx: Transaction, source_outputs: Sequence[TxOutput], exp: Expectation
) -> tuple[list[str], int | None]:
    """`problems`, and the miner fee `tx` pays (None when a problem stopped the checks before
    it was worked out)."""
    found: list[str] = []
    add = found.append
    if tx.version != 2 or tx.locktime != 0:
        add(f"version {tx.version} / locktime {tx.locktime}: must be 2 / 0")
    if len(source_outputs) != len(tx.inputs):
        return [*found, "source outputs are not aligned with the inputs"], None
    routed_pools, routed_sats, routed_tokens = exp.routed
    n_pools = len(routed_pools)
    templated = isinstance(tx, TemplatedTransaction) and len(tx.templates) == n_pools
    n_outputs = tx.output_count() if isinstance(tx, TemplatedTransaction) else len(tx.outputs)
    if len(tx.inputs) < n_pools or n_outputs < n_pools + 1:
        return [*found, "fewer inputs or outputs than the route's pools"], None

    # Pools: input i ↔ output i, exactly the route, accepted by the contract.
    pools = (
        _templated_pools_clean(
            cast(TemplatedTransaction, tx), source_outputs, exp.routed, exp.encodings
        )
        if templated
        else None
    )
    encodings = exp.encodings
    for i, (
        pool,
        own_pool,
        trade_input,
        source,
        sats_after,
        tokens_after,
        txin,
        spent,
        out,
    ) in enumerate(
        zip(
            routed_pools,
            encodings.pool,
            encodings.trade_input,
            encodings.source_output,
            routed_sats,
            routed_tokens,
            tx.inputs,
            source_outputs,
            () if pools is not None else tx.outputs,
            strict=False,
        )
    ):
        # `trade_input` and `source` are the encoding's: they stand for `pool` only when the
        # encoding is the routed pool's.
        if own_pool is not pool and own_pool != pool:
            add(f"input {i} is not pool {pool.txid}:{pool.vout} as routed (another's encoding)")
            continue
        # Identity short-cuts: the pool's own immutable input and output objects hold exactly
        # the pool's outpoint, unlocking and state, so comparing values would tell the same.
        if txin is not trade_input:
            if txin.outpoint != trade_input.outpoint:
                add(f"input {i} is not pool {pool.txid}:{pool.vout} as routed")
            if txin.unlocking != trade_input.unlocking:
                add(f"input {i} is not unlocked by the pool's trade path")
        if spent is not source and spent != source:
            add(f"input {i} is not pool {pool.txid}:{pool.vout} as routed")
        out_token, spent_token = out.token, spent.token
        if out.locking != spent.locking or out_token is None or spent_token is None:
            add(f"output {i} does not re-create pool input {i}")
            continue
        if out_token.category != spent_token.category or out_token.nft or spent_token.nft:
            add(f"output {i} changes the pool's token category or holds an NFT")
        if out.value != sats_after or out_token.amount != tokens_after:
            add(f"output {i} is not the routed state of pool {pool.txid}:{pool.vout}")
        # Judge what the transaction does, not what the route says it does (`after` is the
        # output's state: equal to the route's, or not, and then reported just above).
        after = PoolState(out.value, out_token.amount)
        before = pool.state if spent is source else PoolState(spent.value, spent_token.amount)
        if not is_valid_pool_transition(before, after):
            add(f"pool {i}: {before} → {after} fails the contract predicate")
        tokens = after.tokens
        if tokens < 1 or after.sats < pool_reserve(tokens):
            add(f"pool {i} left below its reserve: {after.sats} sats, {after.tokens} tokens")

    # Funding inputs.
    funding = tuple(range(n_pools, len(tx.inputs)))
    # The pools' inputs, spent outputs and templates were found standard once per pool.
    vetted = n_pools if pools is not None and funding == exp.inputs_to_sign else 0
    if funding != exp.inputs_to_sign:
        add(f"inputs to sign {exp.inputs_to_sign} are not the funding inputs {funding}")
    for i in funding:
        spent = source_outputs[i]
        if classify_locking(spent.locking)[0] is not ScriptKind.P2PKH:
            add(f"funding input {i} is not P2PKH")
        if tx.inputs[i].unlocking:
            add(f"funding input {i} is not left unsigned")
        if spent.token is not None and (
            spent.token.nft is not None or spent.token.category not in exp.categories
        ):
            add(f"funding input {i} carries tokens this trade would burn")

    # Tokens: conserved per category, nothing burned or minted.
    found += _token_problems(tx, source_outputs, pools)

    # Outputs: the bought asset first, then only the user's addresses and the fee address.
    user = cast(TemplatedTransaction, tx).rest if templated else tx.outputs[n_pools:]
    bought = user[0]
    if bought.locking != exp.receive:
        add(f"output {n_pools} (the bought asset) does not pay receive_addr")
    if exp.bought_category is None:
        if bought.token is not None or bought.value != exp.expected_output:
            add(f"output {n_pools} is not {exp.expected_output} sats to receive_addr")
    elif (
        bought.token is None
        or bought.token.category != exp.bought_category
        or bought.token.amount != exp.expected_output
        or bought.token.nft is not None
    ):
        add(f"output {n_pools} is not {exp.expected_output} bought tokens to receive_addr")
    allowed = {exp.receive, exp.change}
    if exp.fee_locking is not None:
        allowed.add(exp.fee_locking)
    fee_outputs = 0
    for j, out in enumerate(user, n_pools):
        if not out.locking:
            add(f"output {j} has an empty locking bytecode")
        if out.locking not in allowed:
            add(f"output {j} pays an address the user did not name")
        is_fee = j > n_pools and out.locking == exp.fee_locking  # token-aware by config
        if out.token is not None and out.locking not in exp.token_aware and not is_fee:
            add(f"output {j} sends tokens to an address that is not token-aware")
        if out.value < dust_threshold(out):
            add(f"output {j} is dust: {out.value} < {dust_threshold(out)} sats")
        if exp.fee_output is not None and out == exp.fee_output and j > n_pools:
            fee_outputs += 1
        elif (
            exp.fee_locking is not None
            and out.locking == exp.fee_locking
            and exp.fee_locking not in (exp.receive, exp.change)
        ):
            add(f"output {j} pays the fee address something other than the fee")
    if exp.fee_output is not None and fee_outputs != 1:
        add(f"the router fee output appears {fee_outputs} times (expected once)")

    # Miner fee within [asked rate, asked rate + overpay band] of the worst-case signed size.
    signed = worst_case_signed(tx, funding)
    size = signed.size()
    if pools is not None:  # the pools' part summed by `_templated_pools_clean`
        rest = cast(TemplatedTransaction, tx).rest
        paid = (pools.sats_in + sum([o.value for o in source_outputs[n_pools:]])) - (
            pools.sats_out + sum([o.value for o in rest])
        )
    else:
        paid = sum([o.value for o in source_outputs]) - output_total(tx)
    floor = max(min_relay_fee(size, MIN_RELAY_FEE_PER_KB), miner_fee(size, exp.fee_per_kb))
    ceiling = miner_fee(size, exp.fee_per_kb) + exp.overpay_band()
    if paid < floor:
        add(f"miner fee {paid} sats is below {floor} for {size} bytes")
    if paid > ceiling:
        add(f"miner fee {paid} sats is above the overpay band ({ceiling} for {size} bytes)")

    # Relay policy, on the worst-case signed transaction.
    for v in standardness_errors(signed, vetted=vetted):
        add(f"non-standard ({v.reason}): {v.message}")
    for v in input_standardness_errors(signed, source_outputs, vetted=vetted):
        add(f"non-standard input ({v.reason}): {v.message}")
    return found, paid


def enforce(tx: Transaction, source_outputs: Sequence[TxOutput], exp: Expectation) -> int:
    """Raise `build_failed` (and log why) unless `tx` passes every check; return the miner
    fee it pays (its inputs' sats less its outputs')."""
    found, paid = _checked(tx, source_outputs, exp)
    if found:
        log.error("safety gate rejected a built transaction: %s", "; ".join(found))
        raise build_failed(
            f"safety gate: {found[0]}" + (f" (+{len(found) - 1} more)" if len(found) > 1 else ""),
            reasons=found,
        )
    assert paid is not None  # worked out whenever nothing stopped the checks early
    return paid
