"""Every kind of transaction the router builds, signed by a test wallet from the result JSON
alone (as a wallet would) and judged VALID by libauth's 2025 and 2026 standard VMs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bch.policy import check_fee
from bch.token import TokenData
from bch.tx import Transaction, TxOutput
from router import wire
from router.build import build
from router.errors import RouterError
from router.params import RouterConfig, parse_build_params
from router.pools import BCH, PoolBook
from tests.router.helpers import (
    FEE_WALLET,
    TOKEN_A,
    TOKEN_B,
    USER,
    build_params,
    even_pools,
    funding,
    standard_book,
)
from verify.libauth import LibauthVerifier, VerifyResult

pytestmark = pytest.mark.node

VALID = VerifyResult(True, None)
FEE = RouterConfig(fee_bps=10, fee_address=FEE_WALLET.token_address)
NO_FEE = RouterConfig(fee_bps=0)


@pytest.fixture(scope="module")
def verifier() -> Iterator[LibauthVerifier]:
    with LibauthVerifier() as v:
        yield v


def _token(category: str, amount: int) -> dict[str, Any]:
    return {"category": category, "amount": str(amount)}


def _source_outputs(doc: dict[str, Any]) -> list[TxOutput]:
    """Rebuild the spent outputs from the result JSON, as a signing wallet must."""
    out = []
    for entry in doc["source_outputs"]:
        token = TokenData.from_json(entry["token"]) if "token" in entry else None
        out.append(TxOutput(int(entry["value"]), bytes.fromhex(entry["locking_script_hex"]), token))
    return out


def _many_pools() -> PoolBook:
    return PoolBook(
        even_pools(TOKEN_A, 300, 50_000, 0.02, "a") + even_pools(TOKEN_B, 200, 80_000, 5.0, "b")
    )


TOKENS_A = funding("tokA", 900, token=_token(TOKEN_A, 500_000_000), by_address=False)
BIG = funding("big", 200_000_000, by_address=False)  # the spec's script_hex
SCENARIOS: dict[str, tuple[dict[str, Any], RouterConfig, PoolBook | None]] = {
    "bch->token sell, fee": (build_params(BCH, TOKEN_A, 3_000_000, [BIG]), FEE, None),
    "bch->token buy, no fee": (
        build_params(BCH, TOKEN_A, 80_000_000, [BIG], side="buy"),
        NO_FEE,
        None,
    ),
    "token->bch sell, fee, token change": (
        build_params(TOKEN_A, BCH, 200_000_000, [funding("b", 30_000), TOKENS_A]),
        FEE,
        None,
    ),
    "token->bch buy, no fee": (
        build_params(TOKEN_A, BCH, 1_500_000, [funding("b", 30_000), TOKENS_A], side="buy"),
        NO_FEE,
        None,
    ),
    "token->token sell, token fee": (
        build_params(TOKEN_A, TOKEN_B, 100_000_000, [funding("b", 50_000), TOKENS_A]),
        FEE,
        None,
    ),
    "token->token buy, no fee": (
        build_params(TOKEN_A, TOKEN_B, 300_000, [funding("b", 50_000), TOKENS_A], side="buy"),
        NO_FEE,
        None,
    ),
    "bch->token spending a bought-category input": (
        build_params(
            BCH,
            TOKEN_A,
            1_000_000,
            [funding("s", 100_000), funding("held", 2_000_000, token=_token(TOKEN_A, 777))],
        ),
        FEE,
        None,
    ),
    "bch->token over many pools, fee": (
        build_params(BCH, TOKEN_A, 20_000_000, [BIG]),
        FEE,
        _many_pools(),
    ),
    "token->token over many pools, fee": (
        build_params(
            TOKEN_A,
            TOKEN_B,
            400_000_000,
            [funding("b", 200_000), funding("t", 900, token=_token(TOKEN_A, 10**9))],
        ),
        FEE,
        _many_pools(),
    ),
    "bch->token from 300 small inputs": (
        build_params(BCH, TOKEN_A, 2_500_000, [funding(f"s{i}", 10_000) for i in range(300)]),
        NO_FEE,
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("schnorr", [True, False], ids=["schnorr", "ecdsa"])
def test_built_transactions_verify_in_libauth(
    verifier: LibauthVerifier, name: str, schnorr: bool
) -> None:
    params, config, book = SCENARIOS[name]
    result = build(book or standard_book(), parse_build_params(params, config), config)
    doc = wire.build_doc(result)
    tx = Transaction.from_hex(doc["unsigned_tx_hex"])
    sources = _source_outputs(doc)
    assert tuple(sources) == result.source_outputs
    signed = USER.sign_transaction(tx, sources, doc["inputs_to_sign"], schnorr=schnorr)
    for vm in (2025, 2026):
        assert verifier.verify(signed, sources, vm=vm, standard=True) == VALID, (name, vm)
    assert check_fee(signed, sources) is None  # libauth does not check the relay fee
    assert int(doc["miner_fee_sats"]) >= signed.size()
    if "many pools" in name:
        assert len(result.route.legs) >= 50


def test_an_unsigned_build_is_not_valid(verifier: LibauthVerifier) -> None:
    """The verifier is not a rubber stamp: the same transaction unsigned fails."""
    params, config, _ = SCENARIOS["bch->token sell, fee"]
    result = build(standard_book(), parse_build_params(params, config), config)
    verdict = verifier.verify(result.tx, result.source_outputs, vm=2026)
    assert not verdict.valid


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pair=st.sampled_from([(BCH, TOKEN_A), (TOKEN_A, BCH), (TOKEN_A, TOKEN_B), (TOKEN_B, TOKEN_A)]),
    side=st.sampled_from(["sell", "buy"]),
    exponent=st.floats(3, 8.5),
    config=st.sampled_from([FEE, NO_FEE]),
)
def test_random_builds_verify_in_libauth(
    verifier: LibauthVerifier,
    pair: tuple[str, str],
    side: str,
    exponent: float,
    config: RouterConfig,
) -> None:
    sell, buy = pair
    inputs = [funding("big", 10**9)]
    if sell != BCH:
        inputs.append(funding("held", 900, token=_token(sell, 10**12)))
    params = build_params(sell, buy, int(10**exponent), inputs, side=side)
    try:
        result = build(standard_book(), parse_build_params(params, config), config)
    except RouterError:
        return  # refusals are covered elsewhere
    signed = USER.sign_transaction(result.tx, result.source_outputs, result.inputs_to_sign)
    for vm in (2025, 2026):
        assert verifier.verify(signed, result.source_outputs, vm=vm) == VALID
