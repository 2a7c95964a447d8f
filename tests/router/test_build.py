"""tx.build: layout, funding selection, fees, token change, and every error a request can hit."""

from __future__ import annotations

from collections import Counter
from typing import Any

import orjson
import pytest

from bch.cashaddr import Address, AddressKind
from bch.policy import check_fee, dust_threshold, standardness_errors
from bch.token import TokenData
from bch.tx import Transaction, TxOutput, hex_to_hash
from protocols.cauldron.contract import pool_locking_bytecode, trade_unlocking
from protocols.cauldron.formulas import PoolState, is_valid_pool_transition
from router import wire
from router.build import BuildResult, build
from router.errors import ErrorCode, RouterError
from router.params import RouterConfig, parse_build_params
from router.pools import BCH, PoolBook
from router.txsize import P2PKH_UNLOCK_WORST
from tests.router.helpers import (
    FEE_WALLET,
    OTHER,
    TOKEN_A,
    TOKEN_B,
    TOKEN_C,
    USER,
    build_params,
    funding,
    pools_from,
    standard_book,
)
from tests.router.schemas import validator

FEE = RouterConfig(fee_bps=10, fee_address=FEE_WALLET.token_address)
NO_FEE = RouterConfig(fee_bps=0)


def run(
    params: dict[str, Any], config: RouterConfig = FEE, book: PoolBook | None = None
) -> BuildResult:
    result = build(book or standard_book(), parse_build_params(params, config), config)
    validator("tx.build.result.json").validate(wire.build_doc(result))
    return result


def fails(
    params: dict[str, Any], config: RouterConfig = FEE, book: PoolBook | None = None
) -> RouterError:
    with pytest.raises(RouterError) as info:
        build(book or standard_book(), parse_build_params(params, config), config)
    validator("error.json").validate(info.value.to_json())
    return info.value


def token_totals(outputs: list[TxOutput] | tuple[TxOutput, ...]) -> Counter[bytes]:
    totals: Counter[bytes] = Counter()
    for o in outputs:
        if o.token is not None:
            totals[o.token.category] += o.token.amount
    return totals


def locking(address: str) -> bytes:
    return Address.decode(address).locking_bytecode()


def check_common(result: BuildResult) -> None:
    """What every built transaction must satisfy, checked from the bytes."""
    tx = Transaction.from_hex(result.tx.hex())
    sources = result.source_outputs
    legs = result.route.legs
    n = len(legs)
    assert (tx.version, tx.locktime) == (2, 0)
    assert len(sources) == len(tx.inputs)
    for i, leg in enumerate(legs):
        assert tx.inputs[i].outpoint.txid_hex == leg.pool.txid
        assert tx.inputs[i].outpoint.index == leg.pool.vout
        assert tx.inputs[i].unlocking == trade_unlocking(leg.pool.owner_pkh)
        assert (
            sources[i].locking == tx.outputs[i].locking == pool_locking_bytecode(leg.pool.owner_pkh)
        )
        before, after = sources[i], tx.outputs[i]
        assert before.token is not None and after.token is not None
        assert before.token.category == after.token.category
        assert is_valid_pool_transition(
            PoolState(before.value, before.token.amount), PoolState(after.value, after.token.amount)
        )
    assert result.inputs_to_sign == tuple(range(n, len(tx.inputs)))
    for i in result.inputs_to_sign:
        assert sources[i].locking == USER.locking_bytecode
        assert tx.inputs[i].unlocking == b""
    assert token_totals(sources) == token_totals(tx.outputs)  # nothing burned
    paid = sum(o.value for o in sources) - sum(o.value for o in tx.outputs)
    assert paid == result.miner_fee
    worst = tx.size() + P2PKH_UNLOCK_WORST * len(result.inputs_to_sign)
    assert worst <= paid <= worst + 600
    mine = {USER.locking_bytecode, FEE_WALLET.locking_bytecode}
    for out in tx.outputs[n:]:
        assert out.locking in mine
        assert out.value >= dust_threshold(out)
    signed = USER.sign_transaction(tx, sources, result.inputs_to_sign)
    assert check_fee(signed, sources) is None
    assert standardness_errors(signed) == []


def test_bch_to_token_layout_and_amounts() -> None:
    params = build_params(BCH, TOKEN_A, 3_000_000, [funding("f1", 10_000_000)])
    result = run(params)
    check_common(result)
    tx, q = result.tx, result.route
    n = len(q.legs)
    assert n >= 2
    bought = tx.outputs[n]
    assert bought.locking == USER.locking_bytecode
    assert bought.token == TokenData(hex_to_hash(TOKEN_A), result.expected_output)
    assert bought.value == dust_threshold(bought)
    assert result.expected_output == q.output_amount
    change = tx.outputs[n + 1]
    assert change.locking == USER.locking_bytecode and change.token is None
    fee = tx.outputs[-1]
    assert fee == TxOutput(3_000, FEE_WALLET.locking_bytecode)
    assert (result.fee_sats, result.fee_token_amount) == (3_000, 0)
    pools_in = sum(tx.outputs[i].value - result.source_outputs[i].value for i in range(n))
    assert pools_in == 3_000_000 - 3_000
    # Everything the funding brought is accounted for.
    assert pools_in + bought.value + change.value + fee.value + result.miner_fee == 10_000_000
    doc = wire.build_doc(result)
    assert doc["expected_output"] == str(result.expected_output)
    assert doc["source_outputs"][0]["token"]["category"] == TOKEN_A
    assert doc["route"]["snapshot_version"] == 7


def test_exact_out_bch_to_token_delivers_exactly() -> None:
    params = build_params(BCH, TOKEN_A, 75_000_000, [funding("f1", 10_000_000)], side="buy")
    result = run(params)
    check_common(result)
    n = len(result.route.legs)
    assert result.tx.outputs[n].token == TokenData(hex_to_hash(TOKEN_A), 75_000_000)
    assert result.expected_output == 75_000_000


def test_token_to_bch_pays_receive_and_returns_token_change() -> None:
    inputs = [
        funding("bch", 50_000),
        funding("tok", 1_000, token={"category": TOKEN_A, "amount": "300000000"}),
    ]
    params = build_params(TOKEN_A, BCH, 100_000_000, inputs)
    result = run(params)
    check_common(result)
    tx = result.tx
    n = len(result.route.legs)
    assert tx.outputs[n] == TxOutput(result.expected_output, USER.locking_bytecode)
    token_change = [o for o in tx.outputs[n + 1 :] if o.token is not None]
    assert token_change == [
        TxOutput(
            dust_threshold(token_change[0]),
            USER.locking_bytecode,
            TokenData(hex_to_hash(TOKEN_A), 200_000_000),
        )
    ]
    proceeds = sum(result.source_outputs[i].value - tx.outputs[i].value for i in range(n))
    assert result.fee_sats == proceeds * 10 // 10_000
    assert result.expected_output == proceeds - result.fee_sats


def test_token_to_token_pays_the_fee_in_sold_tokens() -> None:
    inputs = [
        funding("bch", 100_000),
        funding("tok", 1_000, token={"category": TOKEN_A, "amount": "100000000"}),
    ]
    result = run(build_params(TOKEN_A, TOKEN_B, 100_000_000, inputs))
    check_common(result)
    tx = result.tx
    n = len(result.route.legs)
    categories = {leg.pool.token_id for leg in result.route.legs}
    assert categories == {TOKEN_A, TOKEN_B}
    assert tx.outputs[n].token == TokenData(hex_to_hash(TOKEN_B), result.expected_output)
    fee = tx.outputs[-1]
    assert fee.locking == FEE_WALLET.locking_bytecode
    assert fee.token == TokenData(hex_to_hash(TOKEN_A), 100_000)
    # The fee is the tokens; the dust sats its output carries are not the router's fee.
    assert result.fee_token_amount == 100_000 and result.fee_sats == 0
    assert fee.value == dust_threshold(fee) == result.route.fee.sats
    for doc in (wire.build_doc(result), orjson.loads(wire.build_bytes(result))):
        assert (doc["fee_sats"], doc["fee_token_amount"]) == ("0", "100000")
        assert doc["route"]["router_fee"] == {
            "asset": TOKEN_A,
            "amount": "100000",
            "sats": str(fee.value),
            "bps": 10,
        }
    # No token change: the input held exactly the amount sold.
    assert [o.token.category for o in tx.outputs[n:] if o.token] == [
        hex_to_hash(TOKEN_B),
        hex_to_hash(TOKEN_A),
    ]


def test_a_token_fee_below_one_token_is_absent() -> None:
    """999 tokens at 10 bps is 0.999 of a token: no fee, no fee output, both fields "0"."""
    inputs = [
        funding("bch", 100_000),
        funding("tok", 1_000, token={"category": TOKEN_B, "amount": "999"}),
    ]
    result = run(build_params(TOKEN_B, TOKEN_A, 999, inputs))
    check_common(result)
    assert result.route.kind == "two_hop" and result.route.fee.amount == 0
    assert all(o.locking != FEE_WALLET.locking_bytecode for o in result.tx.outputs)
    doc = orjson.loads(wire.build_bytes(result))
    assert (doc["fee_sats"], doc["fee_token_amount"]) == ("0", "0")


def test_without_a_router_fee_there_is_no_fee_output() -> None:
    params = build_params(BCH, TOKEN_A, 3_000_000, [funding("f1", 10_000_000)])
    result = run(params, NO_FEE)
    check_common(result)
    assert all(o.locking != FEE_WALLET.locking_bytecode for o in result.tx.outputs)
    assert result.fee_sats == 0 and result.route.fee.amount == 0


def test_a_fee_below_dust_is_not_charged() -> None:
    params = build_params(BCH, TOKEN_A, 400_000, [funding("f1", 1_000_000)])  # 10 bps = 400
    result = run(params)
    check_common(result)
    assert result.fee_sats == 0
    doc = orjson.loads(wire.build_bytes(result))
    assert (doc["fee_sats"], doc["fee_token_amount"]) == ("0", "0")
    assert doc["route"]["router_fee"] == {"asset": BCH, "amount": "0", "sats": "0", "bps": 10}
    assert all(o.locking != FEE_WALLET.locking_bytecode for o in result.tx.outputs)
    n = len(result.route.legs)
    assert sum(result.tx.outputs[i].value - result.source_outputs[i].value for i in range(n)) == (
        400_000
    )


# --- funding selection --------------------------------------------------------------------------


def selected(result: BuildResult) -> list[int]:
    """Values of the funding inputs used."""
    return [result.source_outputs[i].value for i in result.inputs_to_sign]


def test_the_smallest_single_input_that_covers_is_chosen() -> None:
    inputs = [funding(f"f{v}", v) for v in (300_000, 2_000_000, 40_000_000, 5_000_000)]
    result = run(build_params(BCH, TOKEN_A, 1_000_000, inputs))
    assert selected(result) == [2_000_000]


def test_fewest_inputs_when_none_covers_alone() -> None:
    inputs = [funding(f"f{v}", v) for v in (600_000, 700_000, 800_000, 100_000)]
    result = run(build_params(BCH, TOKEN_A, 1_200_000, inputs))
    assert sorted(selected(result)) == [600_000, 800_000]  # largest, then smallest that covers
    check_common(result)


def test_inputs_with_foreign_tokens_or_nfts_are_left_out() -> None:
    foreign = funding("foreign", 90_000_000, token={"category": TOKEN_C, "amount": "5"})
    nft = funding(
        "nft",
        80_000_000,
        token={
            "category": TOKEN_A,
            "amount": "0",
            "nft": {"capability": "none", "commitment": "ab"},
        },
    )
    plain = funding("plain", 5_000_000)
    result = run(build_params(BCH, TOKEN_A, 1_000_000, [foreign, nft, plain]))
    check_common(result)
    assert selected(result) == [5_000_000]
    assert all(o.token is None or o.token.nft is None for o in result.source_outputs)


def test_only_foreign_token_inputs_is_insufficient_funds() -> None:
    foreign = funding("foreign", 90_000_000, token={"category": TOKEN_C, "amount": "5"})
    error = fails(build_params(BCH, TOKEN_A, 1_000_000, [foreign]))
    assert error.code is ErrorCode.INSUFFICIENT_FUNDS
    assert error.data == {"left_out": [0]}
    assert "burned" in error.message


def test_not_enough_sats_is_insufficient_funds() -> None:
    error = fails(build_params(BCH, TOKEN_A, 1_000_000, [funding("f", 900_000)]))
    assert error.code is ErrorCode.INSUFFICIENT_FUNDS
    assert error.data is not None
    assert int(error.data["need_sats"]) > 1_000_000 and error.data["have_sats"] == "900000"


def test_not_enough_tokens_is_insufficient_funds() -> None:
    inputs = [
        funding("bch", 1_000_000),
        funding("tok", 1_000, token={"category": TOKEN_A, "amount": "999"}),
    ]
    error = fails(build_params(TOKEN_A, BCH, 100_000_000, inputs))
    assert error.code is ErrorCode.INSUFFICIENT_FUNDS
    assert error.data is not None and error.data["have_tokens"] == "999"


def test_token_inputs_are_chosen_smallest_sufficient_and_change_returns() -> None:
    amounts = (40_000_000, 150_000_000, 900_000_000)
    inputs = [funding("bch", 1_000_000)] + [
        funding(f"t{a}", 800, token={"category": TOKEN_A, "amount": str(a)}) for a in amounts
    ]
    result = run(build_params(TOKEN_A, BCH, 120_000_000, inputs))
    check_common(result)
    spent_tokens = [
        o.token.amount
        for o in result.source_outputs
        if o.token and o.locking == USER.locking_bytecode
    ]
    assert spent_tokens == [150_000_000]
    n = len(result.route.legs)
    change = [o.token.amount for o in result.tx.outputs[n:] if o.token]
    assert change == [30_000_000]


def test_bought_category_inputs_are_spent_only_when_needed_and_come_back() -> None:
    held = funding("held", 2_000_000, token={"category": TOKEN_A, "amount": "777"})
    # A plain input covers the trade: the token input is not touched.
    result = run(build_params(BCH, TOKEN_A, 1_000_000, [held, funding("plain", 5_000_000)]))
    assert selected(result) == [5_000_000]
    # Without it, the token input's sats are needed; its 777 tokens come back as change.
    result = run(build_params(BCH, TOKEN_A, 1_000_000, [held, funding("small", 100_000)]))
    check_common(result)
    assert sorted(selected(result)) == [100_000, 2_000_000]
    n = len(result.route.legs)
    assert [o.token.amount for o in result.tx.outputs[n + 1 :] if o.token] == [777]


def test_token_change_goes_to_change_addr_when_receive_is_not_token_aware() -> None:
    inputs = [
        funding("bch", 100_000),
        funding("tok", 1_000, token={"category": TOKEN_A, "amount": "300000000"}),
    ]
    params = build_params(
        TOKEN_A, BCH, 100_000_000, inputs, receive=OTHER.address, change=USER.token_address
    )
    result = run(params)
    n = len(result.route.legs)
    assert result.tx.outputs[n].locking == OTHER.locking_bytecode
    (token_change,) = [o for o in result.tx.outputs[n + 1 :] if o.token]
    assert token_change.locking == USER.locking_bytecode
    # Neither address token-aware: the change has nowhere safe to go.
    params = build_params(
        TOKEN_A, BCH, 100_000_000, inputs, receive=OTHER.address, change=USER.address
    )
    error = fails(params)
    assert error.code is ErrorCode.BAD_REQUEST and "token-aware" in error.message


def test_change_below_dust_goes_to_the_miner() -> None:
    probe = run(build_params(BCH, TOKEN_A, 1_000_000, [funding("f", 5_000_000)]))
    n = len(probe.route.legs)
    spent = 5_000_000 - probe.tx.outputs[n + 1].value  # everything but the change
    exact = run(build_params(BCH, TOKEN_A, 1_000_000, [funding("g", spent + 300)]))
    check_common(exact)
    assert all(
        o.token is not None or o.locking == FEE_WALLET.locking_bytecode
        for o in exact.tx.outputs[n:]
    )  # no BCH change output
    assert exact.miner_fee > probe.miner_fee  # the 300 sats (less a change output) went to it


def test_higher_fee_rate_pays_more() -> None:
    inputs = [funding("f", 10_000_000)]
    base = run(build_params(BCH, TOKEN_A, 3_000_000, inputs))
    fast = run(build_params(BCH, TOKEN_A, 3_000_000, inputs, fee_per_byte=2.5))
    worst = fast.tx.size() + P2PKH_UNLOCK_WORST
    assert fast.miner_fee >= 2.5 * worst
    assert fast.miner_fee > 2 * base.miner_fee * 0.9


# --- errors --------------------------------------------------------------------------------------


def test_min_output_above_the_route_is_slippage() -> None:
    inputs = [funding("f", 10_000_000)]
    expected = run(build_params(BCH, TOKEN_A, 3_000_000, inputs)).expected_output
    error = fails(build_params(BCH, TOKEN_A, 3_000_000, inputs, min_output=str(expected + 1)))
    assert error.code is ErrorCode.SLIPPAGE
    assert error.data == {"expected_output": str(expected), "min_output": str(expected + 1)}
    ok = run(build_params(BCH, TOKEN_A, 3_000_000, inputs, min_output=str(expected)))
    assert ok.expected_output == expected
    # Exact out ignores min_output.
    run(build_params(BCH, TOKEN_A, 1_000_000, inputs, side="buy", min_output=str(10**15)))


def test_too_many_pools_is_route_failed() -> None:
    book = PoolBook(pools_from(TOKEN_A, [(10_000, 10)] * 600))
    error = fails(build_params(BCH, TOKEN_A, 5_000, [funding("f", 10**9)], side="buy"), book=book)
    assert error.code is ErrorCode.ROUTE_FAILED
    assert "pools" in error.message and "100,000 bytes" in error.message


def test_unknown_token_is_route_failed() -> None:
    error = fails(build_params(BCH, TOKEN_C, 5_000, [funding("f", 10**6)]))
    assert error.code is ErrorCode.ROUTE_FAILED and TOKEN_C in error.message


def test_bch_bought_below_dust_is_route_failed() -> None:
    inputs = [
        funding("bch", 100_000),
        funding("tok", 1_000, token={"category": TOKEN_A, "amount": "20000"}),
    ]
    error = fails(build_params(TOKEN_A, BCH, 20_000, inputs))  # ~400 sats
    assert error.code is ErrorCode.ROUTE_FAILED and "dust" in error.message


def test_501_funding_inputs_is_bad_request() -> None:
    inputs = [funding(f"f{i}", 10_000) for i in range(501)]
    error = fails(build_params(BCH, TOKEN_A, 5_000, inputs))
    assert error.code is ErrorCode.BAD_REQUEST and "500" in error.message


def test_500_small_inputs_shrink_the_pool_cap_but_still_build() -> None:
    """Funding bytes come out of the 100,000-byte budget: the route is re-capped to fit."""
    book = PoolBook(pools_from(TOKEN_A, [(100_000, 10_000_000)] * 400))
    inputs = [funding(f"f{i}", 12_000) for i in range(500)]
    result = run(build_params(BCH, TOKEN_A, 5_000_000, inputs), NO_FEE, book)
    check_common(result)
    worst = result.tx.size() + P2PKH_UNLOCK_WORST * len(result.inputs_to_sign)
    assert worst <= 100_000
    assert len(result.inputs_to_sign) > 400


def test_bad_addresses_are_bad_requests() -> None:
    inputs = [funding("f", 10**6)]
    cases = [
        build_params(BCH, TOKEN_A, 5_000, inputs, receive="bitcoincash:qqqqqqq"),
        build_params(BCH, TOKEN_A, 5_000, inputs, change="not an address"),
        build_params(BCH, TOKEN_A, 5_000, inputs, receive=USER.address),  # not token-aware
        # change on another network than receive
        build_params(
            BCH,
            TOKEN_A,
            5_000,
            inputs,
            change=Address(AddressKind.P2PKH, USER.pkh, False, "bchtest").encode(),
        ),
    ]
    for params in cases:
        error = fails(params)
        assert error.code is ErrorCode.BAD_REQUEST, params


def test_a_pool_offered_as_funding_is_bad_request() -> None:
    book = standard_book()
    probe = run(build_params(BCH, TOKEN_A, 3_000_000, [funding("f", 10**7)]), book=book)
    pool = probe.route.legs[0].pool
    fake = {**funding("f", 10**7), "txid": pool.txid, "vout": pool.vout}
    error = fails(build_params(BCH, TOKEN_A, 3_000_000, [fake]), book=book)
    assert error.code is ErrorCode.BAD_REQUEST and "is pool" in error.message
