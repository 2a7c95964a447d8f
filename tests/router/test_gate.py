"""The safety gate: its invariants hold for every build over random pools, orders and coins
(checked here from the transaction bytes, not by asking the gate), and each kind of tampering
is caught, logged and reported as build_failed."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from bch.policy import dust_threshold, min_relay_fee, standardness_errors, token_burns
from bch.token import MAX_TOKEN_AMOUNT, TokenData
from bch.tx import (
    MAX_SATS,
    OutPoint,
    TemplatedTransaction,
    Transaction,
    TxInput,
    TxOutput,
    hex_to_hash,
)
from protocols.cauldron.formulas import PoolState, is_valid_pool_transition, lp_fee
from router import gate
from router.book import EncodingColumns
from router.build import BuildResult, build
from router.errors import ErrorCode, RouterError
from router.params import BuildRequest, QuoteRequest, RouterConfig, Side, parse_build_params
from router.pools import BCH, PoolBook
from router.quotes import quote
from tests.router.helpers import (
    FEE_WALLET,
    LARGEST_POOL_DUST,
    OTHER,
    TOKEN_A,
    TOKEN_B,
    TOKEN_C,
    USER,
    build_params,
    continuation_dust,
    funding,
    make_pool,
    standard_book,
)

FEE = RouterConfig(fee_bps=10, fee_address=FEE_WALLET.token_address)


# --- the contract predicate over columns -----------------------------------------------------


@st.composite
def _transitions(draw: st.DrawFn) -> tuple[PoolState, PoolState]:
    """A pool and a state after a trade at the predicate's edge: the fewest tokens the
    contract accepts for the new sats, give or take two."""
    sats = draw(st.integers(1, MAX_SATS))
    tokens = draw(st.integers(1, MAX_TOKEN_AMOUNT))
    after_sats = draw(st.integers(0, MAX_SATS))
    kept = after_sats - lp_fee(sats, after_sats)
    least = -(-sats * tokens // kept) if kept > 0 else MAX_TOKEN_AMOUNT
    after_tokens = min(MAX_TOKEN_AMOUNT, max(1, least + draw(st.integers(-2, 2))))
    return PoolState(sats, tokens), PoolState(after_sats, after_tokens)


@settings(max_examples=500, deadline=None)
@given(st.lists(_transitions(), min_size=1, max_size=6))
def test_the_predicate_over_columns_is_the_contracts(
    legs: list[tuple[PoolState, PoolState]],
) -> None:
    expected = all(is_valid_pool_transition(before, after) for before, after in legs)
    event(f"valid: {expected}")
    got = gate._predicate_holds(
        [before.sats for before, _ in legs],
        [before.tokens for before, _ in legs],
        [after.sats for _, after in legs],
        [after.tokens for _, after in legs],
    )
    assert got == expected


# --- invariants over random builds -----------------------------------------------------------


@st.composite
def books(draw: st.DrawFn) -> PoolBook:
    pools = []
    for token, tag in ((TOKEN_A, "a"), (TOKEN_B, "b")):
        for i in range(draw(st.integers(1, 12))):
            sats = draw(st.integers(LARGEST_POOL_DUST, 10**9))
            price = 10 ** draw(st.floats(-4, 2))
            tokens = max(1, min(10**15, round(sats / price)))
            pools.append(make_pool(token, sats, tokens, f"{tag}{i}", i % 3))
    return PoolBook(pools)


def _token(category: str, amount: int) -> dict[str, Any]:
    return {"category": category, "amount": str(amount)}


@st.composite
def coins(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = [funding("base", int(10 ** draw(st.floats(5, 9))))]
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["bch", "bch", "bch", "A", "A", "B", "C", "nft"]))
        value = max(546, int(10 ** draw(st.floats(2.7, 9))))
        token = None
        if kind in "ABC":
            category = {"A": TOKEN_A, "B": TOKEN_B, "C": TOKEN_C}[kind]
            token = _token(category, int(10 ** draw(st.floats(0, 12))))
        elif kind == "nft":
            token = {"category": TOKEN_A, "nft": {"capability": "none", "commitment": "01"}}
        out.append(funding(f"{i}:{kind}:{value}", value, token=token))
    return out


orders = st.tuples(
    st.sampled_from([(BCH, TOKEN_A), (TOKEN_A, BCH), (TOKEN_A, TOKEN_B), (TOKEN_B, BCH)]),
    st.sampled_from(["sell", "buy"]),
    st.floats(0, 10).map(lambda e: int(10**e)),
)
configs = st.sampled_from(
    [
        FEE,
        RouterConfig(fee_bps=100, fee_address=FEE_WALLET.token_address),
        RouterConfig(fee_bps=0),
        RouterConfig(fee_bps=10, fee_address=FEE_WALLET.token_address, fee_per_byte=2.0),
    ]
)


def _totals(outputs: tuple[TxOutput, ...] | list[TxOutput]) -> Counter[bytes]:
    totals: Counter[bytes] = Counter()
    for o in outputs:
        if o.token is not None:
            totals[o.token.category] += o.token.amount
    return totals


def check_invariants(result: BuildResult, request: BuildRequest, config: RouterConfig) -> None:
    tx = Transaction.from_hex(result.tx.hex())
    sources = result.source_outputs
    n = len(result.route.legs)
    assert len(sources) == len(tx.inputs)
    # Every token category conserved, nothing burned.
    assert _totals(sources) == _totals(tx.outputs)
    assert token_burns(tx, sources) == {}
    # Pools: re-created at the same index, accepted by the contract, reserves kept.
    for i in range(n):
        before, after = sources[i], tx.outputs[i]
        assert before.locking == after.locking
        assert before.token and after.token and before.token.category == after.token.category
        a = PoolState(after.value, after.token.amount)
        assert is_valid_pool_transition(PoolState(before.value, before.token.amount), a)
        assert a.tokens >= 1 and after.value >= dust_threshold(after)
    # Funding: only the user's coins, never a foreign category or an NFT.
    involved = {hex_to_hash(a) for a in (request.quote.sell, request.quote.buy) if a != BCH}
    for i in result.inputs_to_sign:
        token = sources[i].token
        assert token is None or (token.nft is None and token.category in involved)
    # Outputs: only the user's two addresses and the fee address; none dust or empty.
    allowed = {request.receive.locking, request.change.locking}
    if config.fee_locking is not None:
        allowed.add(config.fee_locking)
    for out in tx.outputs[n:]:
        assert out.locking in allowed and out.locking
        assert out.value >= dust_threshold(out)
    # The bought asset, exactly, to receive_addr.
    bought = tx.outputs[n]
    assert bought.locking == request.receive.locking
    if request.quote.buy == BCH:
        assert bought.token is None and bought.value == result.expected_output
    else:
        assert bought.token == TokenData(hex_to_hash(request.quote.buy), result.expected_output)
    if request.quote.side.value == "buy":
        assert result.expected_output == request.quote.amount
    # The fee output iff a fee is charged.
    fee_outputs = [o for o in tx.outputs[n:] if o.locking == config.fee_locking]
    if result.route.fee.amount:
        assert len(fee_outputs) == 1
    else:
        assert fee_outputs == []
    # Signed for real: pays at least 1 sat/byte (and the asked rate), standard.
    signed = USER.sign_transaction(tx, sources, result.inputs_to_sign, schnorr=False)
    rate = request.quote.fee_per_byte or config.fee_per_byte
    assert result.miner_fee >= min_relay_fee(signed.size())
    assert result.miner_fee >= rate * signed.size()
    assert standardness_errors(signed) == []


@settings(
    max_examples=int(os.environ.get("ROUTER_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    book=books(),
    order=orders,
    inputs=coins(),
    config=configs,
    holding=st.one_of(st.none(), st.floats(0.5, 4.0)),
)
def test_every_build_satisfies_the_gate_invariants(
    book: PoolBook,
    order: tuple[tuple[str, str], str, int],
    inputs: list[dict[str, Any]],
    config: RouterConfig,
    holding: float | None,
) -> None:
    (sell, buy), side, amount = order
    if sell != BCH and holding is not None:  # the user holds about the amount sold
        held = max(1, int(amount * holding))
        inputs = [*inputs, funding(f"held:{held}", 800, token=_token(sell, held))]
    params = build_params(sell, buy, amount, inputs, side=side)
    request = parse_build_params(params, config)
    try:
        result = build(book, request, config)
    except RouterError as exc:
        event(f"error: {exc.code.value}")
        # Refusals are about the order or the coins, never the gate.
        assert exc.code in (
            ErrorCode.ROUTE_FAILED,
            ErrorCode.INSUFFICIENT_FUNDS,
        ), exc.message
        return
    event(f"built: {sell[:3]}->{buy[:3]} {side}")
    check_invariants(result, request, config)
    assert gate.problems(result.tx, result.source_outputs, _expectation(result, params)) == []


# --- tiny BCH reserves where the token amount's width steps -----------------------------------

# Where a pool's token amount changes CompactSize width, its output grows (79 → 87 bytes) and so
# does its dust threshold (681 → 705 sats): a sale that pushes the amount across must leave the
# larger reserve. Amounts just below and above each step, and far into the widest one.
_STEPS = (0xFC, 0xFFFF, 2**32 - 1, 2**40, 2**56, 2**62, 2**63 - 1)


@st.composite
def edge_books(draw: st.DrawFn) -> PoolBook:
    pools = []
    supply = 2**63 - 1  # a category never holds more, pools and users together
    for i in range(draw(st.integers(1, 4))):
        step = draw(st.sampled_from(_STEPS))
        tokens = max(1, min(supply, step + draw(st.integers(-4_000, 300))))
        sats = draw(st.one_of(st.integers(681, 760), st.integers(681, 50_000)))
        if tokens < supply:
            supply -= tokens
            pools.append(make_pool(TOKEN_A, sats, tokens, f"edge{i}", i % 3))
    assume(pools)
    return PoolBook(pools)


@settings(
    max_examples=int(os.environ.get("ROUTER_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    book=edge_books(),
    selling=st.booleans(),
    side=st.sampled_from(["sell", "buy"]),
    share=st.one_of(st.just(1.0), st.floats(0.0, 1.0)),
)
def test_wide_token_amounts_with_tiny_reserves_always_pass_the_gate(
    book: PoolBook, selling: bool, side: str, share: float
) -> None:
    """Orders up to the most the pools take (the amount the route_failed error names), in
    both directions: whatever is built passes the gate, so no request meets build_failed."""
    sell, buy = (TOKEN_A, BCH) if selling else (BCH, TOKEN_A)
    given_asset = sell if side == "sell" else buy
    probe = QuoteRequest(sell, buy, 21 * 10**14 if given_asset == BCH else 2**63 - 1, Side(side))
    try:
        quote(book, probe, FEE)
        most = probe.amount
    except RouterError as exc:
        assert exc.code is ErrorCode.ROUTE_FAILED
        most = int((exc.data or {}).get("max_amount", 0))
    assume(most >= 1)
    amount = max(1, min(most, int(most * share)))  # (float rounding may pass `most`)
    inputs = [funding("sats", 10**15)]
    if selling:
        inputs.append(funding("held", 800, token=_token(TOKEN_A, 2**63 - 1 - _held(book))))
    params = build_params(sell, buy, amount, inputs, side=side)
    request = parse_build_params(params, FEE)
    try:
        result = build(book, request, FEE)
    except RouterError as exc:
        event(f"error: {exc.code.value}")
        assert exc.code in (ErrorCode.ROUTE_FAILED, ErrorCode.INSUFFICIENT_FUNDS), exc.message
        return
    event(f"built: {'sell' if selling else 'buy'} tokens ({side} side)")
    check_invariants(result, request, FEE)
    for leg in result.route.legs:
        assert leg.after.sats >= continuation_dust(leg.after.tokens)


def _held(book: PoolBook) -> int:
    """Tokens of A in the pools: a user can hold at most the rest of the 2^63−1 supply."""
    return sum(p.tokens for p in book.pools(TOKEN_A))


# --- tampering -------------------------------------------------------------------------------


def _expectation(
    result: BuildResult, params: dict[str, Any], config: RouterConfig = FEE
) -> gate.Expectation:
    request = parse_build_params(params, config)
    return gate.Expectation.for_build(result.route, request, config, result.inputs_to_sign)


PARAMS = build_params(
    TOKEN_A,
    TOKEN_B,
    100_000_000,
    [
        funding("bch", 1_000_000),
        funding("tok", 1_000, token=_token(TOKEN_A, 150_000_000)),
    ],
)


@pytest.fixture(scope="module")
def honest() -> BuildResult:
    return build(standard_book(), parse_build_params(PARAMS, FEE), FEE)


def _with_outputs(tx: Transaction, outputs: list[TxOutput]) -> Transaction:
    return Transaction(tx.version, tx.inputs, tuple(outputs), tx.locktime)


def _tampered(honest: BuildResult, name: str) -> tuple[Transaction, tuple[TxOutput, ...]]:
    tx, sources = honest.tx, honest.source_outputs
    outs = list(tx.outputs)
    n = len(honest.route.legs)
    change_index = next(
        j
        for j in range(n + 1, len(outs))
        if outs[j].token is None and outs[j].locking == USER.locking_bytecode
    )
    sold = TokenData(hex_to_hash(TOKEN_A), 50_000_000)  # 150M held, 100M sold
    token_change = next(j for j in range(n + 1, len(outs)) if outs[j].token == sold)
    if name == "pool_short_one_sat":
        outs[0] = dataclasses.replace(outs[0], value=outs[0].value - 1)
    elif name == "pool_moved":
        outs[0], outs[1] = outs[1], outs[0]
    elif name == "token_change_dropped":
        del outs[token_change]
    elif name == "change_to_stranger":
        outs[change_index] = dataclasses.replace(outs[change_index], locking=OTHER.locking_bytecode)
    elif name == "miner_overpaid":
        outs[change_index] = dataclasses.replace(
            outs[change_index], value=outs[change_index].value - 5_000
        )
    elif name == "miner_underpaid":
        outs[change_index] = dataclasses.replace(
            outs[change_index], value=outs[change_index].value + 2_000
        )
    elif name == "fee_output_dropped":
        outs = outs[:-1]
    elif name == "fee_output_doubled":
        outs.append(outs[-1])
    elif name == "dust_output":
        outs.append(TxOutput(100, USER.locking_bytecode))
        outs[change_index] = dataclasses.replace(
            outs[change_index], value=outs[change_index].value - 100
        )
    elif name == "empty_script":
        outs[change_index] = dataclasses.replace(outs[change_index], locking=b"")
    elif name == "version_1":
        return Transaction(1, tx.inputs, tx.outputs, 0), sources
    elif name == "funding_presigned":
        inputs = list(tx.inputs)
        inputs[-1] = TxInput(inputs[-1].outpoint, b"\x51")
        return Transaction(2, tuple(inputs), tx.outputs, 0), sources
    elif name == "foreign_token_spent":
        foreign = TxOutput(1_000, USER.locking_bytecode, TokenData(hex_to_hash(TOKEN_C), 5))
        extra = TxInput(OutPoint(b"\x11" * 32, 0))
        return Transaction(2, (*tx.inputs, extra), tx.outputs, 0), (*sources, foreign)
    else:  # pragma: no cover
        raise AssertionError(name)
    return _with_outputs(tx, outs), sources


CASES = {
    "pool_short_one_sat": "fails the contract predicate",
    "pool_moved": "does not re-create pool input",
    "token_change_dropped": "token totals differ",
    "change_to_stranger": "address the user did not name",
    "miner_overpaid": "above the overpay band",
    "miner_underpaid": "below",
    "fee_output_dropped": "router fee output appears 0 times",
    "fee_output_doubled": "router fee output appears 2 times",
    "dust_output": "is dust",
    "empty_script": "empty locking bytecode",
    "version_1": "must be 2 / 0",
    "funding_presigned": "not left unsigned",
    "foreign_token_spent": "would burn",
}


def test_the_honest_build_passes(honest: BuildResult) -> None:
    assert gate.problems(honest.tx, honest.source_outputs, _expectation(honest, PARAMS)) == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_tampering_is_caught_logged_and_build_failed(
    honest: BuildResult, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    tx, sources = _tampered(honest, name)
    exp = _expectation(honest, PARAMS)
    found = gate.problems(tx, sources, exp)
    assert any(CASES[name] in reason for reason in found), found
    with (
        caplog.at_level(logging.ERROR, logger="ladle.router.gate"),
        pytest.raises(RouterError) as info,
    ):
        gate.enforce(tx, sources, exp)
    assert info.value.code is ErrorCode.BUILD_FAILED
    assert info.value.data is not None and info.value.data["reasons"] == found
    assert any("safety gate rejected" in r.getMessage() for r in caplog.records)


def test_an_input_that_could_create_a_traded_category_is_caught(honest: BuildResult) -> None:
    """An input spending output 0 of a traded category's txid could create the category; the
    gate finds it from the transaction's bytes, where the same 36 bytes elsewhere (an output's
    bytecode, an input spending another output of that txid) are no such input."""
    tx = honest.tx
    assert isinstance(tx, TemplatedTransaction)
    category = hex_to_hash(TOKEN_A)
    exp = _expectation(honest, PARAMS)

    def spending(index: int) -> TemplatedTransaction:
        return tx.with_inputs([*tx.inputs[:-1], TxInput(OutPoint(category, index))])

    created = f"category {TOKEN_A} could be created by this transaction"
    assert created in gate.problems(spending(0), honest.source_outputs, exp)
    assert created in gate.token_problems(_plain(spending(0)), honest.source_outputs)
    assert created not in gate.problems(spending(1), honest.source_outputs, exp)
    data = TxOutput(0, b"\x6a\x24" + category + bytes(4))  # OP_RETURN of those 36 bytes
    elsewhere = _with_outputs(tx, [*tx.outputs, data])
    assert category + bytes(4) in elsewhere.to_bytes()
    assert created not in gate.token_problems(elsewhere, honest.source_outputs)


def test_a_pool_spent_under_another_pools_encoding_is_caught(honest: BuildResult) -> None:
    """The gate holds each input and output to the route's encodings: when an encoding is not
    its leg's pool's (two swapped upstream, the transaction made from them), the pool spent is
    not the one routed, on the column path and on the one-by-one path alike."""
    tx = honest.tx
    assert isinstance(tx, TemplatedTransaction)
    exp = _expectation(honest, PARAMS)
    encodings = honest.route.encodings
    first, second = encodings[:2]
    assert first.pool.token_id == second.pool.token_id  # two legs of one hop
    swapped = (second, first, *encodings[2:])
    inputs = [e.trade_input for e in swapped] + list(tx.inputs[len(swapped) :])
    templates = [e.template for e in swapped]
    moved = TemplatedTransaction(inputs, templates, list(tx.values), list(tx.amounts), tx.rest)
    sources = (second.source_output, first.source_output, *honest.source_outputs[2:])
    wrong = dataclasses.replace(exp, encodings=EncodingColumns.of_encodings(swapped))
    pool = first.pool
    for made in (moved, _plain(moved)):
        found = gate.problems(made, sources, wrong)
        assert any(f"input 0 is not pool {pool.txid}:{pool.vout} as routed" in r for r in found)


def _plain(tx: Transaction) -> Transaction:
    return Transaction(tx.version, tx.inputs, tx.outputs, tx.locktime)


def test_a_fee_address_in_the_wrong_place_is_caught(honest: BuildResult) -> None:
    """A route promising no fee must not pay the fee address anything."""
    no_fee = dataclasses.replace(
        honest.route, fee=dataclasses.replace(honest.route.fee, amount=0, sats=0)
    )
    exp = gate.Expectation.for_build(
        no_fee, parse_build_params(PARAMS, FEE), FEE, honest.inputs_to_sign
    )
    found = gate.problems(honest.tx, honest.source_outputs, exp)
    assert any("fee address something other than the fee" in r for r in found)


def test_tokens_to_an_address_that_is_not_token_aware_are_caught() -> None:
    """receive_addr is a plain `q…` address (BCH only); moving the token change there must fail
    even though the address is the user's own."""
    params = build_params(
        TOKEN_A,
        BCH,
        100_000_000,
        [funding("bch", 1_000_000), funding("tok", 1_000, token=_token(TOKEN_A, 150_000_000))],
        receive=OTHER.address,
        change=USER.token_address,
    )
    result = build(standard_book(), parse_build_params(params, FEE), FEE)
    exp = _expectation(result, params)
    assert gate.problems(result.tx, result.source_outputs, exp) == []
    outs = [
        dataclasses.replace(o, locking=OTHER.locking_bytecode)
        if o.token is not None and i >= len(result.route.legs)
        else o
        for i, o in enumerate(result.tx.outputs)
    ]
    found = gate.problems(_with_outputs(result.tx, outs), result.source_outputs, exp)
    assert any("not token-aware" in r for r in found), found


def test_orders_just_past_what_wide_pools_take_fill_exactly_or_fail_cleanly() -> None:
    """Found by the property above: selling a few tokens more than two ~2^62-token pools were
    said to take left the polish's remainder on a pool that cannot hold it (2^63−1 tokens),
    and a plain ValueError escaped the route. Now the remainder goes where it fits: each
    order spends exactly its amount within every pool's limits, or is a route_failed."""
    pools = [(2812, 2**62), (708, 2**62 - 506), (681, 252), (681, 252)]
    book = PoolBook([make_pool(TOKEN_A, s, t, f"edge{i}", i % 3) for i, (s, t) in enumerate(pools)])
    with pytest.raises(RouterError) as caught:
        quote(book, QuoteRequest(TOKEN_A, BCH, 2**63 - 1, Side("sell")), FEE)
    most = int((caught.value.data or {})["max_amount"])
    for amount in (most, most + 1, most + 2, int(most * 1.0), most + 1000):
        try:
            q = quote(book, QuoteRequest(TOKEN_A, BCH, amount, Side("sell")), FEE)
        except RouterError as exc:
            assert exc.code is ErrorCode.ROUTE_FAILED, exc.message
            continue
        assert q.input_amount == amount
        fee_in_tokens = q.fee.amount if q.fee.asset != BCH else 0
        assert sum(leg.after.tokens - leg.pool.tokens for leg in q.legs) == amount - fee_in_tokens
        for leg in q.legs:
            assert leg.after.tokens <= 2**63 - 1
            assert is_valid_pool_transition(leg.pool.state, leg.after)
