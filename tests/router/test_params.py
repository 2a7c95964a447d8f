"""Request parsing: what is accepted, how it is normalised, and a bad_request naming the field
for everything else; the parser and the JSON Schemas agree on every case here."""

from __future__ import annotations

from typing import Any

import pytest

from bch.cashaddr import Address, AddressKind
from bch.hashes import sha256
from bch.script import p2sh20_locking
from router.errors import ErrorCode, RouterError
from router.params import (
    RouterConfig,
    Side,
    fee_rate_per_kb,
    miner_fee,
    parse_build_params,
    parse_quote_params,
)
from router.pools import BCH
from tests.router.helpers import FEE_WALLET, TOKEN_A, TOKEN_B, USER, build_params, funding
from tests.router.schemas import validator

QUOTE_SCHEMA = validator("quote.params.json")
BUILD_SCHEMA = validator("tx.build.params.json")


def quote_error(params: Any) -> RouterError:
    with pytest.raises(RouterError) as info:
        parse_quote_params(params)
    assert info.value.code is ErrorCode.BAD_REQUEST
    return info.value


def build_error(params: Any, config: RouterConfig | None = None) -> RouterError:
    with pytest.raises(RouterError) as info:
        parse_build_params(params, config)
    assert info.value.code is ErrorCode.BAD_REQUEST
    return info.value


def test_quote_params_are_normalised() -> None:
    params = {"sell": "BCH", "buy": TOKEN_A.upper(), "amount": "1000", "side": "buy"}
    request = parse_quote_params(params)
    assert (request.sell, request.buy, request.amount, request.side) == (
        BCH,
        TOKEN_A,
        1000,
        Side.BUY,
    )
    assert request.fee_per_byte is None and not request.exact_in
    assert parse_quote_params({"sell": BCH, "buy": TOKEN_A, "amount": 5}).side is Side.SELL
    QUOTE_SCHEMA.validate(params)


# (params, word the message names, whether the JSON Schema rejects it too: the schema cannot
# know BCH's supply or that sell and buy differ)
BAD_QUOTES: list[tuple[dict[str, Any], str, bool]] = [
    ({"buy": TOKEN_A, "amount": "1"}, "sell", True),
    ({"sell": BCH, "buy": TOKEN_A}, "amount", True),
    ({"sell": "btc", "buy": TOKEN_A, "amount": "1"}, "sell", True),
    ({"sell": BCH, "buy": TOKEN_A[:-1], "amount": "1"}, "buy", True),
    ({"sell": BCH, "buy": BCH, "amount": "1"}, "different", False),
    ({"sell": TOKEN_A, "buy": TOKEN_A, "amount": "1"}, "different", False),
    ({"sell": BCH, "buy": TOKEN_A, "amount": "0"}, "amount", True),
    ({"sell": BCH, "buy": TOKEN_A, "amount": "-5"}, "amount", True),
    ({"sell": BCH, "buy": TOKEN_A, "amount": "007"}, "amount", True),
    ({"sell": BCH, "buy": TOKEN_A, "amount": "1.5"}, "amount", True),
    ({"sell": BCH, "buy": TOKEN_A, "amount": 1.5}, "amount", True),
    ({"sell": BCH, "buy": TOKEN_A, "amount": True}, "amount", True),
    ({"sell": BCH, "buy": TOKEN_A, "amount": str(21 * 10**14 + 1)}, "amount", False),
    ({"sell": BCH, "buy": TOKEN_A, "amount": "1", "side": "long"}, "side", True),
    ({"sell": BCH, "buy": TOKEN_A, "amount": "1", "fee_per_byte": 0.5}, "fee_per_byte", True),
    ({"sell": BCH, "buy": TOKEN_A, "amount": "1", "fee_per_byte": "2"}, "fee_per_byte", True),
    ({"sell": BCH, "buy": TOKEN_A, "amount": "1", "slippage": 1}, "slippage", True),
]


@pytest.mark.parametrize(("params", "word", "schema_rejects"), BAD_QUOTES)
def test_bad_quote_params(params: dict[str, Any], word: str, schema_rejects: bool) -> None:
    assert word in quote_error(params).message
    assert QUOTE_SCHEMA.is_valid(params) is not schema_rejects


def test_quote_params_must_be_an_object() -> None:
    assert quote_error("not an object").message.startswith("quote params")


def test_token_amounts_may_exceed_bch_supply() -> None:
    big = str(2**63 - 1)
    assert parse_quote_params({"sell": TOKEN_A, "buy": BCH, "amount": big}).amount == 2**63 - 1
    assert "amount" in quote_error({"sell": TOKEN_A, "buy": BCH, "amount": str(2**63)}).message


def test_build_params_parse_addresses_and_funding() -> None:
    inputs = [
        funding("a", 5_000),
        funding("b", 7_000, token={"category": TOKEN_A, "amount": "10"}, by_address=False),
    ]
    params = build_params(BCH, TOKEN_A, 1_000, inputs, min_output="55", fee_per_byte=1.5)
    request = parse_build_params(params)
    BUILD_SCHEMA.validate(params)
    assert request.receive.token_aware and request.receive.locking == USER.locking_bytecode
    assert not request.change.token_aware
    assert [f.value for f in request.funding] == [5_000, 7_000]
    assert request.funding[1].token is not None and request.funding[1].token.amount == 10
    assert request.funding[0].locking == request.funding[1].locking == USER.locking_bytecode
    assert request.min_output == 55 and request.quote.fee_per_byte == 1.5


def test_funding_value_may_be_an_integer() -> None:
    entry = {**funding("a", 5_000), "value": 5_000}
    assert parse_build_params(build_params(BCH, TOKEN_A, 1, [entry])).funding[0].value == 5_000


def _p2sh_address() -> str:
    return Address(AddressKind.P2SH20, sha256(b"script")[:20]).encode()


def _one(**entry: Any) -> list[dict[str, Any]]:
    """One funding input: a valid one with `entry` merged in."""
    return [{**funding("a", 600), **entry}]


def _without(params: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != key}


OK_INPUTS = [funding("a", 600)]


def _four_with(**entry: Any) -> list[dict[str, Any]]:
    """Four funding inputs, the last without its address and with `entry` merged in."""
    last = {k: v for k, v in funding("d", 600).items() if k != "address"}
    return [funding("a", 600), funding("b", 600), funding("c", 600), {**last, **entry}]


# (params, word the message names, whether the JSON Schema rejects it too: decoding addresses,
# the token-aware rule, address/script agreement and duplicate outpoints are beyond it)
BAD_BUILDS: list[tuple[dict[str, Any], str, bool]] = [
    (build_params(BCH, TOKEN_A, 1, []), "1 to 500", True),
    (build_params(BCH, TOKEN_A, 1, [funding(f"f{i}", 600) for i in range(501)]), "1 to 500", True),
    (build_params(BCH, TOKEN_A, 1, OK_INPUTS, receive="bitcoincash:qz"), "receive_addr", False),
    (build_params(BCH, TOKEN_A, 1, OK_INPUTS, change="hello"), "change_addr", False),
    (build_params(BCH, TOKEN_A, 1, OK_INPUTS, receive=USER.address), "token-aware", False),
    (build_params(BCH, TOKEN_A, 1, OK_INPUTS, min_output="-1"), "min_output", True),
    (build_params(BCH, TOKEN_A, 1, OK_INPUTS * 2), "appears twice", False),
    (build_params(BCH, TOKEN_A, 1, _one(txid="00")), "txid", True),
    (build_params(BCH, TOKEN_A, 1, _one(vout=-1)), "vout", True),
    (build_params(BCH, TOKEN_A, 1, _one(value="0")), "value", True),
    (
        build_params(BCH, TOKEN_A, 1, [{"txid": TOKEN_B, "vout": 0, "value": "600"}]),
        "funding[0]: give script_hex (or address)",
        True,
    ),
    (
        build_params(BCH, TOKEN_A, 1, _one(script_hex=p2sh20_locking(bytes(20)).hex())),
        "disagree",
        True,
    ),
    (
        build_params(BCH, TOKEN_A, 1, _four_with(script_hex="zz")),
        "funding[3].script_hex is not hex",
        True,
    ),
    (  # the deprecated alias's errors name the spec's field too
        build_params(BCH, TOKEN_A, 1, _four_with(locking_script_hex="zz")),
        "funding[3].script_hex is not hex",
        True,
    ),
    (
        build_params(
            BCH,
            TOKEN_A,
            1,
            _four_with(
                script_hex=USER.locking_bytecode.hex(),
                locking_script_hex=USER.locking_bytecode.hex(),
            ),
        ),
        "give funding[3].script_hex or its deprecated alias funding[3].locking_script_hex",
        True,
    ),
    (
        {**build_params(BCH, TOKEN_A, 1, OK_INPUTS), "funding_inputs": OK_INPUTS},
        "give funding or its deprecated alias funding_inputs, not both",
        True,
    ),
    (_without(build_params(BCH, TOKEN_A, 1, OK_INPUTS), "funding"), "missing field: funding", True),
    (
        {**build_params(BCH, TOKEN_A, 1, OK_INPUTS), "funding": {"txid": TOKEN_B}},
        "funding must be an array",
        True,
    ),
    (build_params(BCH, TOKEN_A, 1, _one(address=_p2sh_address())), "only P2PKH", False),
    (build_params(BCH, TOKEN_A, 1, _one(token={"category": "zz"})), "funding[0].token", True),
    (build_params(BCH, TOKEN_A, 1, _one(colour="red")), "colour", True),
    (_without(build_params(BCH, TOKEN_A, 1, OK_INPUTS), "change_addr"), "change_addr", True),
]


@pytest.mark.parametrize(("params", "word", "schema_rejects"), BAD_BUILDS)
def test_bad_build_params(params: dict[str, Any], word: str, schema_rejects: bool) -> None:
    error = build_error(params)
    assert word in error.message
    if word.startswith("funding[3].script_hex"):  # the spec's field, whatever the name sent
        assert error.data == {"field": "funding[3].script_hex"}
    assert BUILD_SCHEMA.is_valid(params) is not schema_rejects


def test_spec_names_and_deprecated_aliases_parse_alike() -> None:
    """`funding` / `script_hex` are the spec's names; `funding_inputs` / `locking_script_hex`
    (the previous release's) are deprecated aliases that parse to the same request."""
    spec = [funding("a", 5_000, by_address=False), funding("b", 600)]
    assert "script_hex" in spec[0] and "address" not in spec[0]
    params = build_params(BCH, TOKEN_A, 1_000, spec)
    assert "funding" in params
    want = parse_build_params(params)
    old_entry = {("locking_script_hex" if k == "script_hex" else k): v for k, v in spec[0].items()}
    for aliased in (
        {**_without(params, "funding"), "funding_inputs": spec},  # the old list name
        {**params, "funding": [old_entry, spec[1]]},  # the old script name
        {**_without(params, "funding"), "funding_inputs": [old_entry, spec[1]]},  # both
    ):
        BUILD_SCHEMA.validate(aliased)
        assert parse_build_params(aliased) == want
    BUILD_SCHEMA.validate(params)


def test_network_rules() -> None:
    testnet_user = Address(AddressKind.P2PKH, USER.pkh, True, "bchtest").encode()
    params = build_params(BCH, TOKEN_A, 1, [funding("a", 600)], receive=testnet_user)
    assert "different networks" in build_error(params).message
    config = RouterConfig(network="bchtest")
    params = build_params(BCH, TOKEN_A, 1, [funding("a", 600)])
    assert "prefix" in build_error(params, config).message


def test_router_config_validation() -> None:
    assert RouterConfig().effective_fee_bps == 0  # no fee address, no fee
    config = RouterConfig(fee_bps=25, fee_address=FEE_WALLET.token_address)
    assert config.effective_fee_bps == 25
    assert config.fee_locking == FEE_WALLET.locking_bytecode
    with pytest.raises(ValueError, match="token-aware"):
        RouterConfig(fee_address=FEE_WALLET.address)
    with pytest.raises(ValueError, match="fee_bps"):
        RouterConfig(fee_bps=1001)
    with pytest.raises(ValueError, match="fee_per_byte"):
        RouterConfig(fee_per_byte=0.5)
    with pytest.raises(ValueError, match="CashAddr"):
        RouterConfig(fee_address="nope")


def test_fee_arithmetic_is_integer_and_rounds_up() -> None:
    assert fee_rate_per_kb(1.1) == 1100  # not 1100.0000000000002
    assert miner_fee(1000, 1100) == 1100
    assert miner_fee(1001, 1100) == 1102  # 1101.1 rounds up
    assert miner_fee(250, 1000) == 250
